"""A job's configuration, read from the Hadoop configuration (`spark.hadoop.lakefs.*` on the command line or in
the properties file), under the names the seed and lakeFS's own Spark client use."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# Hadoop keys (without the `spark.hadoop.` prefix Spark strips when it builds the Hadoop configuration).
API_URL = "lakefs.api.url"
API_ACCESS_KEY = "lakefs.api.access_key"
API_SECRET_KEY = "lakefs.api.secret_key"
API_READ_TIMEOUT = "lakefs.api.read.timeout_seconds"
API_CONNECTION_TIMEOUT = "lakefs.api.connection.timeout_seconds"
RANGE_PARTITIONS = "lakefs.gc.range.num_partitions"
ADDRESS_PARTITIONS = "lakefs.gc.address.num_partitions"
STORAGE_OPTIONS = "lakefs.gc.storage_options"  # JSON object of fsspec options for the namespace's filesystem
# The run's lease (engine.lease.LeaseRef as JSON, Redis credentials included): "token" in the name makes Spark
# redact it in its UI and logs.
LEASE = "lakefs.gc.lease.token"

DEFAULTS = {
    API_READ_TIMEOUT: "10",
    API_CONNECTION_TIMEOUT: "10",
    RANGE_PARTITIONS: "50",
    ADDRESS_PARTITIONS: "200",
}


class JobConfigError(ValueError):
    """A configuration value a job cannot use; the message names the key."""


def _positive_int(key: str, raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise JobConfigError(f"spark.hadoop.{key}={raw!r} is not an integer") from None
    if value <= 0:
        raise JobConfigError(f"spark.hadoop.{key}={raw!r} must be positive")
    return value


@dataclass(frozen=True)
class JobConfig:
    api_url: str | None
    access_key: str | None
    secret_key: str | None
    read_timeout_seconds: int
    connection_timeout_seconds: int
    range_num_partitions: int
    address_num_partitions: int
    storage_options_json: str | None
    lease_json: str | None = None

    @classmethod
    def from_hadoop(cls, get: Callable[[str], str | None]) -> JobConfig:
        def value(key: str) -> str | None:
            found = get(key)
            return found if found not in (None, "") else DEFAULTS.get(key)

        return cls(
            api_url=value(API_URL),
            access_key=value(API_ACCESS_KEY),
            secret_key=value(API_SECRET_KEY),
            read_timeout_seconds=_positive_int(API_READ_TIMEOUT, value(API_READ_TIMEOUT)),
            connection_timeout_seconds=_positive_int(API_CONNECTION_TIMEOUT, value(API_CONNECTION_TIMEOUT)),
            range_num_partitions=_positive_int(RANGE_PARTITIONS, value(RANGE_PARTITIONS)),
            address_num_partitions=_positive_int(ADDRESS_PARTITIONS, value(ADDRESS_PARTITIONS)),
            storage_options_json=value(STORAGE_OPTIONS),
            lease_json=value(LEASE),
        )

    @property
    def timeouts(self) -> tuple[int, int]:
        """(connect, read) as `requests` takes them."""
        return self.connection_timeout_seconds, self.read_timeout_seconds

    def public(self) -> dict[str, Any]:
        """What may be logged: everything but the credentials."""
        return {"api_url": self.api_url, "read_timeout_seconds": self.read_timeout_seconds,
                "connection_timeout_seconds": self.connection_timeout_seconds,
                "range_num_partitions": self.range_num_partitions,
                "address_num_partitions": self.address_num_partitions}


def spark_context():
    """The job's SparkContext; master, application name, conf and py-files all come from spark-submit."""
    from pyspark import SparkContext  # noqa: PLC0415 - importable without pyspark for unit tests

    sc = SparkContext.getOrCreate()
    sc.setLogLevel("WARN")
    return sc


def hadoop_config(sc) -> JobConfig:
    hadoop = sc._jsc.hadoopConfiguration()  # noqa: SLF001 - the documented way to reach it from Python
    return JobConfig.from_hadoop(hadoop.get)
