"""The test process's Spark gateway after a test was interrupted in the middle of a Spark call.

pytest-timeout (signal method) and a KeyboardInterrupt raise a BaseException inside py4j's ``send_command`` while it
waits for the JVM's answer. py4j only cleans up after an ``Exception``: the thread keeps its connection, and the
answer of the interrupted command, when it comes, is read as the answer of the next one. Every later Spark call of
the session then fails with answers that belong to other calls ("PythonRDD does not exist in the JVM",
``KeyError: 'm'``), so one slow test turned every Spark test after it red. Closing the thread's connection makes
py4j open a fresh one for the next call; the interrupted job is cancelled on it.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def reset_after_interrupt() -> bool:
    """Drop this thread's gateway connection and cancel what Spark still runs for it. True when there was a
    Spark context to reset."""
    try:
        from pyspark import SparkContext  # noqa: PLC0415
    except ImportError:
        return False
    sc = SparkContext._active_spark_context  # noqa: SLF001 - the test process's one context
    if sc is None or sc._gateway is None:  # noqa: SLF001
        return False
    client = sc._gateway._gateway_client  # noqa: SLF001
    connection = client.get_thread_connection() if hasattr(client, "get_thread_connection") else None
    if connection is not None:
        connection.close()  # the next call opens a connection of its own: no stale answer in its stream
    try:
        sc.cancelAllJobs()
    except Exception as exc:  # noqa: BLE001 - a reset must not fail the teardown it runs in
        log.warning("cancelling Spark jobs after an interrupted test failed: %s", exc)
    return True
