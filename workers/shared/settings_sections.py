"""The sections of Settings that stand on their own: the lakeFS connection, how Spark jobs are submitted, and the
cron check every schedule setting uses (checked here, not with Celery's parser, so that the receiver never imports
Celery)."""

from __future__ import annotations

import re

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator


class LakeFSConnection(BaseModel):
    model_config = {"extra": "forbid"}

    endpoint_url: str = Field(
        description="lakeFS server URL, e.g. http://127.0.0.1:8000 (the /api/v1 suffix is optional); also "
                    "LAKECTL_SERVER_ENDPOINT_URL or lakectl's file"
    )
    access_key_id: str = Field(min_length=1, description="the lakeFS access key the workers act with (also "
                               "LAKECTL_CREDENTIALS_ACCESS_KEY_ID or lakectl's file)")
    secret_access_key: SecretStr = Field(description="its secret (also LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY)")

    @field_validator("endpoint_url")
    @classmethod
    def _url(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} must start with http:// or https://")
        return value.removesuffix("/api/v1")

    @property
    def api_url(self) -> str:
        return f"{self.endpoint_url}/api/v1"


_CRON_FIELDS = (("minute", 0, 59, ()), ("hour", 0, 23, ()), ("day of month", 1, 31, ()),
                ("month", 1, 12, ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")),
                ("day of week", 0, 7, ("sun", "mon", "tue", "wed", "thu", "fri", "sat")))


def _cron_value(text: str, low: int, high: int, names: tuple[str, ...]) -> int:
    if text.lower() in names:
        return names.index(text.lower()) + (1 if low == 1 else 0)
    if not text.isdigit() or not low <= int(text) <= high:
        raise ValueError(f"{text!r} is not in {low}-{high}")
    return int(text)


def check_cron(value: str) -> str:
    """Standard 5-field cron, checked here rather than with Celery's parser so that the receiver, which loads the
    same settings, never imports Celery; the worker parses it again when it builds the beat schedule."""
    fields = value.split()
    if len(fields) != 5:
        raise ValueError(f"{value!r} is not a 5-field cron expression (minute hour day month weekday)")
    for text, (name, low, high, names) in zip(fields, _CRON_FIELDS, strict=True):
        for item in text.split(","):
            span, _, step = item.partition("/")
            try:
                if step and (not step.isdigit() or int(step) == 0):
                    raise ValueError(f"step {step!r} must be a positive number")
                if span != "*":
                    first, _, last = span.partition("-")
                    if _cron_value(first, low, high, names) > (_cron_value(last, low, high, names) if last else high):
                        raise ValueError(f"range {span!r} runs backwards")
            except ValueError as exc:
                raise ValueError(f"{value!r} is not a valid cron expression: {name} field {item!r}: {exc}") from None
    return value


class SparkSettings(BaseModel):
    """How the GC's Spark engine submits its jobs (``LAKEFS_JANITOR_SPARK__MASTER`` etc.)."""

    model_config = {"extra": "forbid"}

    master: str = Field(default="local[*]", description="local[N], local[*] or a cluster URL (spark://host:7077)")
    spark_home: str | None = Field(default=None, description="Spark distribution; default: the pyspark package's")
    python: str | None = Field(default=None, description="driver and executor Python; default: this interpreter")
    # The seed's tuning keys, passed as spark.hadoop.lakefs.* and read by the jobs from the Hadoop configuration.
    range_num_partitions: int = Field(default=50, gt=0, description="spark.hadoop.lakefs.gc.range.num_partitions")
    address_num_partitions: int = Field(default=200, gt=0,
                                        description="spark.hadoop.lakefs.gc.address.num_partitions")
    daily_driver_ranges: int = Field(default=128, gt=0, description="spark.hadoop.lakefs.gc.daily.driver_ranges: a "
                                     "daily run's touched ranges the driver compares itself; more go to executors")
    api_read_timeout_seconds: int = Field(default=10, gt=0, description="spark.hadoop.lakefs.api.read.timeout_seconds")
    api_connection_timeout_seconds: int = Field(default=10, gt=0,
                                                description="spark.hadoop.lakefs.api.connection.timeout_seconds")
    conf: dict[str, str] = Field(default_factory=dict, description="extra --conf KEY=VALUE, applied last")
    submit_timeout_seconds: float = Field(default=6 * 3600, gt=0, description="a job running longer is killed")
    deploy_mode: str = Field(default="client", pattern="^(client|cluster)$", description="client: the driver runs "
                             "where spark-submit does (the worker); cluster (k8s:// only): in a pod of its own")

    @field_validator("master")
    @classmethod
    def _master(cls, value: str) -> str:
        local = re.fullmatch(r"local(\[(\d+|\*)(,\d+)?\])?", value)
        if not local and not value.startswith(("spark://", "k8s://", "mesos://")) and value != "yarn":
            raise ValueError(f"{value!r} is not a Spark master (local[*], spark://host:port, yarn, k8s://...)")
        return value

    @model_validator(mode="after")
    def _cluster_mode(self) -> SparkSettings:
        # Spark runs a Python driver in cluster mode only on Kubernetes and YARN; the janitor's driver image is
        # Kubernetes' (deploy/spark/Dockerfile)
        if self.deploy_mode == "cluster" and not self.master.startswith("k8s://"):
            raise ValueError(f"spark.deploy_mode cluster needs a k8s:// master, not {self.master!r} (a standalone "
                             "master cannot run a Python driver in cluster mode; use client)")
        return self
