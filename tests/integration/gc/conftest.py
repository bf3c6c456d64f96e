"""GC fixtures: the one engine on the session lakeFS (local blockstore), on threads or on Spark; the namespace as
it sees it."""

from __future__ import annotations

import os
import sys

import pytest

from spark_jobs.engine.storage import Namespace, StorageConfig
from tests.gc_engine import Collector


@pytest.fixture
def local_root(lakefs_server) -> str:
    return str(lakefs_server.dir / "block")


@pytest.fixture
def gc(lakefs_server) -> Collector:
    return Collector(lakefs_server.endpoint)


@pytest.fixture
def namespace(repo, local_root) -> Namespace:
    return Namespace(StorageConfig(f"local://{repo}", local_root))


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


@pytest.fixture(params=["threads", "spark"])
def any_runner_gc(request, lakefs_server) -> Collector:
    """The engine on each runner in turn."""
    if request.param == "spark":
        from spark_jobs.jobs.gc import SparkRunner  # noqa: PLC0415

        return Collector(lakefs_server.endpoint, runner=SparkRunner(request.getfixturevalue("spark_context")),
                         engine="spark")
    return Collector(lakefs_server.endpoint)
