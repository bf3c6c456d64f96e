"""spark-submit entry point of the committed GC: the one engine (spark_jobs.engine.run) on a Spark runner,
every per-unit step on executors: metaranges and ranges spread over lakefs.gc.range.num_partitions
partitions, the namespace listed by slice and the deletions sent in batches of 1,000 over
lakefs.gc.address.num_partitions partitions. The driver computes retention, the plan and the record, exactly
as the thread runner does in process, so both write the same plan.

    spark-submit --py-files spark_jobs.zip spark_jobs/jobs/gc.py --repository-id REPO [--mode full|mark|...]
        [--now ISO-8601] [--min-age SECONDS] [--run-id ID] [--mark-id ID] [--by-path true|false] ...

The arguments are a RunRequest's (engine/request.py: RunRequest.to_args writes them, from_args reads them). The
lakeFS connection, time-outs, partition counts, store settings and lease come from the Hadoop configuration
(spark.hadoop.lakefs.*, jobs/config.py), as workers/gc/submit.py passes them. Progress and the result are
printed as events (spark_jobs/jobs/protocol.py); the plan and report are written to
<ns>/_lakefs/retention/gc/unified/<run_id>/.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any


class SparkRunner:
    """spark_jobs.engine.runtime.parallel.Runner on Spark: one task per partition of units, one context per task."""

    def __init__(self, sc) -> None:
        self.sc = sc

    def datasets(self, config, *, partitions: int):
        from spark_jobs.engine.backends.spark import SparkBackend  # noqa: PLC0415

        return SparkBackend(self.sc, config, partitions=partitions)

    def wants_datasets(self, *, ranges: int, cache: bool, entries=None) -> bool:
        return True  # nothing per object reaches the driver, whatever the repository's size

    def map_units(self, units: Sequence[Any], fn: Callable[[Any, Any], Iterable[Any]],
                  make_context: Callable[[], Any], *, partitions: int) -> list[Any]:
        from spark_jobs.jobs.distribute import flat_map_units, per_unit  # noqa: PLC0415

        units = list(units)
        if not units:
            return []  # no Spark job for no work
        try:
            return flat_map_units(self.sc, units, per_unit(make_context, fn), partitions=partitions).collect()
        except Exception as exc:
            raise executor_error(exc) from None


def executor_error(exc: Exception) -> Exception:
    """What failed on an executor, as the thread runner raises it (the dataset backend's one translation)."""
    from spark_jobs.engine.backends.spark_base import executor_error as translate  # noqa: PLC0415

    return translate(exc)


class LeaseGuard:
    """The driver's side of the run's lease: checks it every second while the job runs, and when the run lost it
    (its starter died, or another run took the repository over) cancels every Spark job at once, so executors
    stop between batches even before their own per-batch check would."""

    def __init__(self, sc, ref, interval: float = 1.0) -> None:
        from spark_jobs.engine.sweep.lease_watch import LeaseWatch  # noqa: PLC0415

        self.sc, self.watch, self.interval = sc, LeaseWatch(ref), interval
        self.lost: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gc-lease-guard", daemon=True)

    def __enter__(self) -> LeaseGuard:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self.watch.close()

    @staticmethod
    def lost_in(exc: Exception) -> str | None:
        """Why an executor's deleter stopped, when its ``LeaseLost`` is what failed the Spark job (it comes back
        from Py4J as the task's traceback text, before this guard's own check saw the loss)."""
        import re  # noqa: PLC0415

        found = re.search(r"spark_jobs\.engine\.sweep\.lease_watch\.LeaseLost: ([^\n]*)", str(exc))
        return found.group(1).strip() if found else None

    def _run(self) -> None:
        from spark_jobs.engine.sweep.lease_watch import LeaseLost  # noqa: PLC0415

        while not self._stop.wait(self.interval):
            try:
                self.watch.check()
            except LeaseLost as exc:
                self.lost = str(exc)
                self.sc.cancelAllJobs()
                return


def main(argv: list[str]) -> int:
    from spark_jobs.engine.request import RunRequest  # noqa: PLC0415
    from spark_jobs.engine.run import run  # noqa: PLC0415
    from spark_jobs.engine.runtime.context import GCError  # noqa: PLC0415
    from spark_jobs.engine.runtime.lakefs_api import LakeFSApiConfig  # noqa: PLC0415
    from spark_jobs.engine.runtime.range_cache import RangeCacheSettings  # noqa: PLC0415
    from spark_jobs.engine.stores import StorageConfig  # noqa: PLC0415
    from spark_jobs.engine.sweep.lease_watch import LeaseRef  # noqa: PLC0415
    from spark_jobs.jobs.config import JobSettingsError, hadoop_config, spark_context  # noqa: PLC0415
    from spark_jobs.jobs.protocol import JobArgumentParser, emit  # noqa: PLC0415

    # bad arguments fail before Spark starts
    request = RunRequest.from_args(argv, parser=JobArgumentParser(prog="gc"), runner="spark")
    sc = spark_context()
    try:
        config = hadoop_config(sc)
        if not (config.api_url and config.access_key and config.secret_key):
            raise JobSettingsError("spark.hadoop.lakefs.api.url, .access_key and .secret_key must be set")
        api = LakeFSApiConfig(config.api_url, config.access_key, config.secret_key,
                              connect_timeout=config.connection_timeout_seconds,
                              read_timeout=config.read_timeout_seconds)
        emit("progress", phase="start", count=0, app_id=sc.applicationId, master=sc.master, config=config.public())
        request = replace(request, range_partitions=config.range_num_partitions,
                          address_partitions=config.address_num_partitions,
                          driver_ranges=config.daily_driver_ranges,
                          range_cache=RangeCacheSettings(config.range_cache_folder, config.range_cache_mib)
                          if config.range_cache_folder else None,
                          lease=LeaseRef.from_json(config.lease_json) if config.lease_json else None)
        storage = StorageConfig("", config.local_root, config.storage_options_json, config.max_in_flight)
        guard = LeaseGuard(sc, request.lease) if request.lease is not None else None
        with guard or contextlib.nullcontext():
            try:
                summary = run(api, storage, request, runner=SparkRunner(sc),
                              progress=lambda phase, count: emit("progress", phase=phase, count=count))
            except Exception as exc:
                # The cancelled jobs' own errors would hide why, and an executor's LeaseLost arrives as Py4J text:
                # either way the run history says lease-lost, as on the thread runner.
                lost = (guard.lost if guard is not None else None) or LeaseGuard.lost_in(exc)
                if lost:
                    raise GCError(lost, "lease-lost") from None
                raise
        emit("result", app_id=sc.applicationId, master=sc.master, success=True, summary=summary.as_dict())
    finally:
        sc.stop()
    return 0


if __name__ == "__main__":
    from spark_jobs.jobs.protocol import run_main

    sys.exit(run_main(main, sys.argv[1:]))
