"""Spark tests: PySpark in local mode and a real standalone cluster (master + one 1-core worker) on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.services import ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY, LakeFSServer
from tests.spark.cluster import SparkMaster, SparkWorker, spark_env
from workers.lakefs.client import LakeFS, make_lakefs_for
from workers.settings import LakeFSConnection, SparkSettings


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/spark/" in str(item.fspath):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark_cluster() -> Iterator[tuple[SparkMaster, SparkWorker]]:
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


@pytest.fixture(scope="session")
def lakefs_server() -> Iterator[LakeFSServer]:
    server = LakeFSServer().start()
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
