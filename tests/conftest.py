"""The one set of server fixtures every test tree uses (lakeFS, Redis, the receiver, a Celery worker, Spark), each
started at most once per session on first use, and the markers: ``integration`` for tests/integration/, ``spark``
for tests/spark/ and for every test that runs on the Spark runner in process (``tests.gc_engine.RUNNERS``).

A stopped test run still stops the servers it started. A CI runner or a person ending a run sends SIGTERM, whose
default ends pytest at once: no fixture is torn down, so the servers the session started (each in a session of its
own, tests/services.py) live on. As a KeyboardInterrupt, pytest stops the run and tears its fixtures down, and
those servers with them."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterator

import pytest

from tests.services import (
    ADMIN_ACCESS_KEY,
    ADMIN_SECRET_KEY,
    WEBHOOK_SECRET,
    CeleryWorker,
    LakeFSServer,
    ReceiverServer,
    RedisServer,
    free_port,
    janitor_env,
    stop_on_sigterm,
)
from tests.spark.cluster import SparkMaster, SparkWorker, spark_env
from tests.spark_gateway import reset_after_interrupt
from workers.shared.lakefs.client import LakeFS, make_lakefs_for
from workers.shared.settings import LakeFSConnection, SparkSettings


def pytest_configure(config) -> None:
    if _xdist_controller(config):
        _workers_stop_first_on_sigterm()
    stop_on_sigterm()


def _xdist_controller(config) -> bool:
    """This process hands tests to pytest-xdist workers (scripts/run-tests.sh) and runs none itself."""
    return not hasattr(config, "workerinput") and config.getvalue("dist") not in (None, "no") \
        and bool(config.getvalue("numprocesses"))


def _workers_stop_first_on_sigterm() -> None:
    """Under pytest-xdist the servers belong to the workers, and the controller kills a worker that does not end at
    once: SIGTERM to the controller alone would leave the servers running. So the controller passes it on to each
    worker (each stops its tests as on Ctrl-C and tears its fixtures down), waits until no server a worker started
    is left (each runs in a session of its own: tests/services.py), then stops as on Ctrl-C too."""
    import psutil  # noqa: PLC0415 - a test dependency; only the controller needs it

    def servers_left(workers: list) -> bool:
        for worker in workers:
            with contextlib.suppress(psutil.Error):
                for proc in worker.children(recursive=True):
                    with contextlib.suppress(OSError):
                        if os.getsid(proc.pid) == proc.pid:
                            return True
        return False

    def forward(signum: int, frame: object) -> None:
        workers = psutil.Process().children()
        for worker in workers:
            with contextlib.suppress(psutil.Error):
                worker.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 120
        while servers_left(workers) and time.monotonic() < deadline:
            time.sleep(0.2)
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, forward)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadscope`` (scripts/run-tests.sh): a module per worker at a time, the costliest first
    (tests/xdist_schedule.py)."""
    if config.getvalue("dist") != "loadscope":
        return None
    from tests.xdist_schedule import CostOrderedScopes  # noqa: PLC0415 - only with pytest-xdist

    return CostOrderedScopes(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/integration/" in str(item.path):
            item.add_marker(pytest.mark.integration)
        if "/spark/" in str(item.path):
            item.add_marker(pytest.mark.spark)


# --- lakeFS, Redis, the receiver and a Celery worker ---------------------------------------------------------

@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer().start()
    yield server
    server.cleanup()


@pytest.fixture(scope="session")
def lakefs_server() -> Iterator[LakeFSServer]:
    """lakeFS on its local blockstore, with the secret the receiver's hooks are signed with."""
    server = LakeFSServer({"LAKEFSACTION_JANITOR_SECRET": WEBHOOK_SECRET}).start()
    yield server
    server.cleanup()


@pytest.fixture(scope="session")
def lakefs(lakefs_server: LakeFSServer) -> Iterator[LakeFS]:
    client = make_lakefs_for(lakefs_server.endpoint, ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY)
    yield client
    client.close()


@pytest.fixture(scope="session")
def lakefs_conn(lakefs_server: LakeFSServer) -> LakeFSConnection:
    return LakeFSConnection(endpoint_url=lakefs_server.endpoint, access_key_id=ADMIN_ACCESS_KEY,
                            secret_access_key=ADMIN_SECRET_KEY)


@pytest.fixture(scope="session")
def env(lakefs_server: LakeFSServer, redis_server: RedisServer) -> dict[str, str]:
    return janitor_env(lakefs_server, redis_server.url)


@pytest.fixture(scope="session")
def receiver(env: dict[str, str]) -> Iterator[ReceiverServer]:
    server = ReceiverServer(env).start()
    yield server
    server.cleanup()


@pytest.fixture(scope="session")
def celery_worker(env: dict[str, str]) -> Iterator[CeleryWorker]:
    metrics_port = free_port()
    worker = CeleryWorker({**env, "LAKEFS_JANITOR_WORKER_METRICS_PORT": str(metrics_port)}).start()
    worker.metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
    yield worker
    worker.cleanup()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.call_failed = report.failed


@pytest.fixture(autouse=True)
def _spark_gateway_after_a_failure(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that failed (a timeout among them) may have left the Spark gateway mid-answer: reset it, so that the
    Spark tests after it in this process are not failed by it (tests/spark_gateway.py)."""
    yield
    if getattr(request.node, "call_failed", False):
        reset_after_interrupt()


# --- Spark: in this process (the engine's Spark runner), through spark-submit, and a standalone cluster ----------

@pytest.fixture(scope="session")
def spark_context():
    """A real Spark context in local mode in this process: the engine's Spark runner spreads its units over
    Spark's Python workers exactly as in the spark-submit job (spark_jobs/jobs/gc.py)."""
    pyspark = pytest.importorskip("pyspark")
    os.environ["PYSPARK_PYTHON"] = sys.executable  # the workers run this virtualenv's Python
    conf = (pyspark.SparkConf().setMaster("local[2]").setAppName("lakefs-janitor-tests")
            .set("spark.driver.host", "127.0.0.1").set("spark.driver.bindAddress", "127.0.0.1")
            .set("spark.ui.enabled", "false").set("spark.python.worker.reuse", "true"))
    sc = pyspark.SparkContext.getOrCreate(conf)
    sc.setLogLevel("ERROR")
    yield sc
    sc.stop()


@pytest.fixture(scope="session")
def spark_cluster() -> Iterator[tuple[SparkMaster, SparkWorker]]:
    """A real standalone cluster on loopback: a master and one 1-core worker."""
    master = SparkMaster().start()
    try:
        worker = SparkWorker(master, cores=1, memory="1g").start()
    except BaseException:
        master.cleanup()
        raise
    yield master, worker
    worker.cleanup()
    master.cleanup()


@pytest.fixture(scope="session")
def submit_env() -> dict[str, str]:
    """spark-submit's environment: driver bound to loopback, no user Spark settings."""
    return spark_env()


@pytest.fixture
def local_spark() -> SparkSettings:
    # The machine is shared: two local cores, small partition counts so tests stay quick.
    return SparkSettings(master="local[2]", range_num_partitions=4, address_num_partitions=4)


@pytest.fixture
def cluster_spark(spark_cluster: tuple[SparkMaster, SparkWorker]) -> SparkSettings:
    master, _ = spark_cluster
    return SparkSettings(master=master.url, range_num_partitions=3, address_num_partitions=3,
                         conf={"spark.executor.memory": "512m", "spark.cores.max": "1"})
