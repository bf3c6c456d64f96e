"""A job's settings, carried in the Hadoop configuration (`spark.hadoop.lakefs.*` in the properties file
spark-submit is given), under the names the seed and lakeFS's own Spark client use. One table maps each setting to
its key, both ways: the submitter writes a JobSettings out (``properties``), the job reads it back (``from_hadoop``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from spark_jobs.engine.stores.base import MAX_IN_FLIGHT

# JobSettings's field → its Hadoop key (without the `spark.hadoop.` prefix Spark strips when it builds the Hadoop
# configuration).
KEYS = {
    "api_url": "lakefs.api.url",
    "access_key": "lakefs.api.access_key",
    "secret_key": "lakefs.api.secret_key",
    "read_timeout_seconds": "lakefs.api.read.timeout_seconds",
    "connection_timeout_seconds": "lakefs.api.connection.timeout_seconds",
    "range_num_partitions": "lakefs.gc.range.num_partitions",
    "address_num_partitions": "lakefs.gc.address.num_partitions",
    # a daily run's touched ranges (dead and new) the driver compares itself; more are compared by executors
    "daily_driver_ranges": "lakefs.gc.daily.driver_ranges",
    "storage_options_json": "lakefs.gc.storage_options",  # JSON object of fsspec options per store
    "local_root": "lakefs.gc.local_root",  # lakeFS's local blockstore folder (unset: learnt from lakeFS)
    "max_in_flight": "lakefs.gc.store.max_in_flight",  # requests to the store at once, per process
    # where a daily run keeps copies of the range files it compares (unset: none kept) and the folder's size
    "range_cache_folder": "lakefs.gc.range_cache.folder",
    "range_cache_mib": "lakefs.gc.range_cache.mib",
    # The run's lease (engine.lease.LeaseRef as JSON, Redis credentials included): "token" in the name makes Spark
    # redact it in its UI and logs.
    "lease_json": "lakefs.gc.lease.token",
}
PUBLIC = ("api_url", "read_timeout_seconds", "connection_timeout_seconds", "range_num_partitions",
          "address_num_partitions", "daily_driver_ranges", "range_cache_folder", "range_cache_mib")


class JobSettingsError(ValueError):
    """A configuration value a job cannot use; the message names the key."""


def _positive_int(key: str, raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise JobSettingsError(f"spark.hadoop.{key}={raw!r} is not an integer") from None
    if value <= 0:
        raise JobSettingsError(f"spark.hadoop.{key}={raw!r} must be positive")
    return value


@dataclass(frozen=True)
class JobSettings:
    """Every setting of KEYS; an unset or empty key takes the default here, and a number must be positive."""

    api_url: str | None = None
    access_key: str | None = None
    secret_key: str | None = None
    read_timeout_seconds: int = 10
    connection_timeout_seconds: int = 10
    range_num_partitions: int = 50
    address_num_partitions: int = 200
    daily_driver_ranges: int = 128
    storage_options_json: str | None = None
    local_root: str | None = None
    max_in_flight: int = MAX_IN_FLIGHT
    range_cache_folder: str | None = None
    range_cache_mib: int = 2048
    lease_json: str | None = None

    @classmethod
    def from_hadoop(cls, get: Callable[[str], str | None]) -> JobSettings:
        values: dict[str, Any] = {}
        for field in fields(cls):
            key = KEYS[field.name]
            found = get(key)
            if found in (None, ""):
                continue
            values[field.name] = _positive_int(key, found) if isinstance(field.default, int) else found
        return cls(**values)

    def properties(self) -> dict[str, str]:
        """The settings as Spark properties (`spark.hadoop.<key>`); unset ones left out."""
        return {f"spark.hadoop.{KEYS[f.name]}": str(value) for f in fields(self)
                if (value := getattr(self, f.name)) is not None}

    @property
    def timeouts(self) -> tuple[int, int]:
        """(connect, read) as `requests` takes them."""
        return self.connection_timeout_seconds, self.read_timeout_seconds

    def public(self) -> dict[str, Any]:
        """What may be logged: the address, time-outs and partition counts (no credentials, lease or store options)."""
        return {name: getattr(self, name) for name in PUBLIC}


def spark_context():
    """The job's SparkContext; master, application name, conf and py-files all come from spark-submit."""
    from pyspark import SparkContext  # noqa: PLC0415 - importable without pyspark for unit tests

    sc = SparkContext.getOrCreate()
    sc.setLogLevel("WARN")
    return sc


def hadoop_config(sc) -> JobSettings:
    hadoop = sc._jsc.hadoopConfiguration()  # noqa: SLF001 - the documented way to reach it from Python
    return JobSettings.from_hadoop(hadoop.get)
