"""What the GC benchmarks share: a store of tests/services.py with a lakeFS on it (``World``), the one engine on
either runner (``tests.gc_engine.Collector``: threads in process, or a local-mode SparkContext's executors), and
the stores' view of a namespace (data keys, live keys) for the benchmarks' correctness checks."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import lakefs_sdk  # noqa: E402

from spark_jobs.engine.runtime.parallel import ThreadRunner  # noqa: E402
from tests.gc_engine import Collector  # noqa: E402
from tests.services import (  # noqa: E402
    ADMIN_ACCESS_KEY,
    ADMIN_SECRET_KEY,
    STORES,
    LakeFSServer,
    Store,
    stop_on_sigterm,
)
from workers.shared.lakefs.client import make_lakefs_for  # noqa: E402

STORE_NAMES = {"local": "local disk", "s3": "versitygw (S3)", "azure": "Azurite", "gcs": "fake-gcs-server"}


class CheckFailed(AssertionError):
    """A benchmark's own correctness check failed: it exits 1 and writes no results."""


def check(ok: bool, message: str) -> None:
    if not ok:
        raise CheckFailed(message)


class World:
    """One store (local disk, versitygw, Azurite or fake-gcs-server) and a lakeFS on it, on 127.0.0.1."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        stop_on_sigterm()
        # versitygw as S3 behaves: connections kept open between requests (tests/services.py VersityGW)
        self.store: Store = (STORES[kind](keep_alive=True) if kind == "s3" else STORES[kind]()).start()
        try:
            self.server = LakeFSServer(store=self.store).start()
        except BaseException:
            self.store.cleanup()
            raise
        self.lakefs = make_lakefs_for(self.server.endpoint, ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY, timeout=120)

    def options(self, endpoint: str | None = None) -> dict[str, Any]:
        return {} if self.kind == "local" else {self.kind: self.store.fsspec_options(endpoint)}

    def collector(self, runner: str, spark=None, *, endpoint: str | None = None, threads: int = 8) -> Collector:
        if runner == "spark":
            from spark_jobs.jobs.gc import SparkRunner  # noqa: PLC0415

            return Collector(self.server.endpoint, self.options(endpoint), runner=SparkRunner(spark), runner_name="spark")
        return Collector(self.server.endpoint, self.options(endpoint), runner=ThreadRunner(threads))

    def rules(self, repository_id: str, days: int) -> None:
        self.lakefs.call("rules", self.lakefs.repositories.set_gc_rules, repository_id,
                         lakefs_sdk.GarbageCollectionRules(default_retention_days=days, branches=[]))

    def data_keys(self, namespace: str) -> set[str]:
        """The namespace's objects outside _lakefs/, relative to it, as the store lists them now."""
        fs = self.store.filesystem()
        root = self.store.fsspec_path(namespace).rstrip("/") + "/"
        return {p[len(root):] for p in fs.find(root) if not p[len(root):].startswith("_lakefs/")}

    def live_keys(self, repository_id: str, namespace: str) -> set[str]:
        """The keys, relative to the namespace, of every object the main branch's HEAD (and staging) reaches (as
        lakeFS shows them: a staged local:// address comes back with the blockstore folder in front)."""
        folder = self.store.fsspec_path(namespace).rstrip("/") + "/"
        live, after = set(), ""
        while True:
            page = self.lakefs.objects.list_objects(repository_id, "main", after=after, amount=1000)
            live.update(o.physical_address.rsplit(folder, 1)[-1] for o in page.results)
            if not page.pagination.has_more:
                return live
            after = page.pagination.next_offset

    def close(self) -> None:
        self.lakefs.close()
        self.server.cleanup()
        self.store.cleanup()


def spark_context(cores: int = 2):
    """A real SparkContext in local mode in this process (as tests/integration/gc does): the engine's Spark
    runner spreads its units over Spark's Python workers exactly as in the spark-submit job."""
    import pyspark  # noqa: PLC0415

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    conf = (pyspark.SparkConf().setMaster(f"local[{cores}]").setAppName("lakefs-janitor-bench-gc")
            .set("spark.driver.host", "127.0.0.1").set("spark.driver.bindAddress", "127.0.0.1")
            .set("spark.ui.enabled", "false").set("spark.python.worker.reuse", "true")
            .set("spark.ui.showConsoleProgress", "false"))
    sc = pyspark.SparkContext.getOrCreate(conf)
    sc.setLogLevel("ERROR")
    return sc


def machine(packages: tuple[str, ...]) -> dict[str, Any]:
    try:
        from bench.machine import machine_info  # noqa: PLC0415

        return machine_info(packages)
    except Exception:  # noqa: BLE001 - informational only
        return {"cpus": os.cpu_count()}


def _engine():
    """RunRequest and run_marked of the engine version at hand (the benchmarks also run against older ones): the
    run entry point is engine/run.py, engine/engine.py before it, which also held RunRequest then."""
    try:
        from spark_jobs.engine.request import RunRequest  # noqa: PLC0415
        from spark_jobs.engine.run import run_marked  # noqa: PLC0415
    except ImportError:
        from spark_jobs.engine.engine import RunRequest, run_marked  # noqa: PLC0415
    return RunRequest, run_marked


def gc_run(collector: Collector, repository_id: str, mode: str = "dry-run", *, cache: bool | None = None,
           **kw: Any):
    """One run of the engine as ``collector`` would make it, with ``cache`` (the mark's memory of range files,
    spark_jobs/engine/reach/mark_cache.py) on or off; ``cache=None`` leaves the engine's default. Arguments this
    version of RunRequest does not know are dropped (so the benchmarks run before and after a field lands).
    Returns (Summary, Marked)."""
    import dataclasses  # noqa: PLC0415

    RunRequest, run_marked = _engine()

    known = {f.name for f in dataclasses.fields(RunRequest)}
    if cache is not None:
        kw["cache"] = cache
    if getattr(collector, "range_cache", None) is not None:  # the collector's range cache (daily_bench)
        kw.setdefault("range_cache", collector.range_cache)
    kw = {k: v for k, v in kw.items() if k in known}
    if "runner" in known:
        kw["runner"] = collector.runner_name
    else:  # an engine from before the runner had its name: engine, inprocess for threads
        kw["engine"] = "inprocess" if collector.runner_name == "threads" else collector.runner_name
    request = RunRequest(repository_id=repository_id, mode=mode, range_partitions=4,
                         address_partitions=4, **kw)
    return run_marked(collector.api, collector.storage, request, runner=collector.runner)


def cache_available() -> bool:
    """Whether this engine has the mark cache (RunRequest.cache)."""
    import dataclasses  # noqa: PLC0415

    RunRequest, _ = _engine()
    return "cache" in {f.name for f in dataclasses.fields(RunRequest)}
