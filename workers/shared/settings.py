"""The one typed settings object, built once at start-up.

Sources, highest priority first: explicit keyword arguments, ``LAKEFS_JANITOR_*`` environment variables,
``LAKECTL_*`` environment variables (lakeFS connection only), the YAML file named by ``LAKEFS_JANITOR_CONFIG``,
and lakectl's own config file (``LAKECTL_CONFIG_FILE`` or ``~/.lakectl.yaml``), so a machine already set up
for lakectl needs no extra lakeFS configuration.
"""

from __future__ import annotations

import logging
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import redis
from pydantic import BaseModel, Field, SecretStr, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from spark_jobs.core import inventory_url
from spark_jobs.core.durations import DurationError, parse_duration
from spark_jobs.engine.runtime.redis_ack import Acknowledged
from spark_jobs.engine.runtime.redis_connect import is_sentinel, parse_sentinel_url
from spark_jobs.engine.stores.base import MAX_IN_FLIGHT
from workers.shared.settings_sections import LakeFSConnection, SparkSettings, check_cron
from workers.shared.settings_sources import (
    ConfigFileSource,
    LakectlEnvSource,
    LakectlFileSource,
    SettingsError,
)

ENV_PREFIX = "LAKEFS_JANITOR_"
log = logging.getLogger(__name__)


# the GC's runner by every name it had: gc.engine and the value inprocess are deprecated spellings
RUNNER_ALIASES = {"threads": "threads", "inprocess": "threads", "spark": "spark", "auto": "auto"}
_warned: set[str] = set()


def _deprecated(what: str, message: str) -> None:
    """Log a deprecated setting's warning once per process."""
    if what not in _warned:
        _warned.add(what)
        log.warning(message)


class GCSettings(BaseModel):
    """Committed garbage collection (``LAKEFS_JANITOR_GC__MIN_AGE`` etc.)."""

    model_config = {"extra": "forbid"}

    schedule: str = Field(default="30 2 * * *", description="cron of the GC over every repository (daily)")
    min_age: str | None = Field(default=None, description="safety cutoff; default: lakeFS's own grace_period (24h)")
    runner: str = Field(default="auto", pattern="^(auto|threads|spark)$", description="where a run runs: threads in "
                        "this process, Spark's executors, or auto (by the repository's size); gc.engine and "
                        "inprocess are deprecated spellings")
    auto_spark_above_ranges: int = Field(default=200, gt=0, description="--runner auto: Spark above this many ranges "
                                         "(≈ 9–10M objects, ≈ 1.1 GiB and ≈ 1 min in process: bench/README.md, "
                                         "scale curve)")
    auto_spark_above_ranges_with_cleaning: int = Field(
        default=120, gt=0, description="--runner auto, for a repository whose cleaning policies keep versions or "
        "scope paths: Spark above this many ranges (in process such a run held ≈ 160 bytes an object over the "
        "process's footprint at 3M objects, 67 ranges, a 599 MiB peak, 1.5× a plain one: 120 ranges ≈ 5.4M objects, "
        "≈ 0.95 GiB projected; bench/results/scale.md, cleaning rows)")
    metadata_source: str = Field(default="storage", pattern="^(storage|lakefs)$",
                                 description="read SSTables from the namespace, or through lakeFS's API")
    local_blockstore_path: str | None = Field(default=None, description="lakeFS's blockstore.local.path; None: learnt from lakeFS")
    # Each store's settings; unset ones fall back to the provider's default credential chain (environment,
    # config files, instance or workload identity), as lakeFS's own GC does.
    s3_endpoint_url: str | None = Field(default=None, description="S3-compatible endpoint; None: AWS")
    s3_region: str | None = Field(default=None, description="S3 region; None: the default chain's")
    s3_access_key_id: str | None = Field(default=None, description="S3 access key; None: the default chain's")
    s3_secret_access_key: SecretStr | None = Field(default=None, description="its secret")
    azure_connection_string: SecretStr | None = Field(default=None, description="Azure Blob connection string "
                                                      "(wins over the account settings)")
    azure_account_name: str | None = Field(default=None, description="None: the account in the namespace's host")
    azure_account_key: SecretStr | None = Field(default=None, description="the account's key")
    azure_endpoint_url: str | None = Field(default=None, description="blob endpoint (lakeFS's "
                                           "blockstore.azure.test_endpoint_url); None: the account's")
    gcs_endpoint_url: str | None = Field(default=None, description="GCS endpoint (an emulator); None: Google's")
    gcs_token: str | None = Field(default=None, description="a service-account JSON file, 'anon', or None: the "
                                  "default credentials")
    gcs_project: str | None = Field(default=None, description="GCS project (gcsfs)")
    store_max_requests: int = Field(default=MAX_IN_FLIGHT, gt=0, le=256, description="requests to the store in flight at once "
                                    "per process (the throttled sweep's cap)")
    store_timeout_seconds: int = Field(default=60, gt=0, le=3600, description="a request to the store (connect "
                                       "or read) that takes longer is retried (5 attempts), then the run fails with reason "
                                       "storage-unavailable")
    range_cache_folder: str = Field(default="~/.cache/lakefs-janitor/ranges", min_length=1, description="where a "
                                    "daily run keeps copies of the range files it compares, so that the next day "
                                    "reads yesterday's from this disk, not the store (~: each process's home, on "
                                    "Spark each executor's; a folder it cannot write: the store is read)")
    range_cache_mib: int = Field(default=2048, ge=0, description="the range cache's size, all repositories "
                                 "together (least recently used copies go first); 0: no copies kept")
    threads: int = Field(default=8, gt=0, le=256, description="the thread runner: reads and deletes in parallel")
    lease_seconds: int = Field(default=60, ge=3, le=3600, description="one GC per repository at a time: the run's "
                               "lease, which its starter renews every 2 s; a dead run frees the repository within "
                               "this (at once on the same host)")
    trigger_commits: int = Field(default=0, ge=0, description="start a repository's GC after this many commits "
                                 "and merges reported by hooks since its last run (0: cron only)")
    trigger_check_seconds: int = Field(default=60, gt=0, description="how often beat looks for due repositories")
    max_deletions_per_run: int = Field(default=1_000_000, gt=0, description="a run deletes at most this many "
                                       "objects; the rest waits for the next run")
    purge_noncurrent: bool = Field(default=False, description="on a versioned bucket (S3 versions, GCS "
                                   "generations), also remove the noncurrent versions of exactly the objects a run "
                                   "deletes, so their bytes are freed at once; no undelete from the store after that "
                                   "(see the storage doctor)")
    full_listing_every: str = Field(default="7d", description="a run lists only what changed since the previous "
                                    "one (its state under _lakefs/); the whole namespace is listed again when the "
                                    "last full listing is this old (0s: every run), and on the first run, on "
                                    "`gc run --full` or when the state cannot be trusted")
    inventory: dict[str, str] = Field(default_factory=dict, description="repository id -> an S3 Inventory report "
                                      "of its namespace's bucket (a manifest.json, or the configuration's folder: "
                                      "its newest complete report) or an Azure Blob Inventory report of its "
                                      "container (a <rule>-manifest.json, or the rule: its newest complete run), "
                                      "read instead of listing the namespace")

    @field_validator("full_listing_every")
    @classmethod
    def _full_listing_every(cls, value: str) -> str:
        try:
            parse_duration(value, allow_zero=True)
        except ValueError as exc:
            raise ValueError(f"gc.full_listing_every (LAKEFS_JANITOR_GC__FULL_LISTING_EVERY): {exc}") from None
        return value

    @field_validator("inventory")
    @classmethod
    def _inventory(cls, value: dict[str, str]) -> dict[str, str]:
        for repository_id, url in value.items():
            if why := inventory_url.problem(url):
                raise ValueError(f"gc.inventory[{repository_id!r}]: {why}")
        return value

    @model_validator(mode="before")
    @classmethod
    def _runner(cls, data: object) -> object:
        """gc.engine (LAKEFS_JANITOR_GC__ENGINE) and the value inprocess: the deprecated spellings of gc.runner and
        threads, still read (one warning per process)."""
        if not isinstance(data, dict) or not ({"engine", "runner"} & data.keys()):
            return data
        data = dict(data)
        old = {}
        if "engine" in data:
            engine = data.pop("engine")
            if engine not in RUNNER_ALIASES:
                raise ValueError(f"gc.engine (deprecated: gc.runner, LAKEFS_JANITOR_GC__RUNNER): {engine!r} is not "
                                 "one of threads, spark, auto")
            old["engine"] = (engine, RUNNER_ALIASES[engine])
        if data.get("runner") == "inprocess":
            old["runner"] = ("inprocess", "threads")
            data["runner"] = "threads"
        if "engine" in old:
            if "runner" in data and data["runner"] != old["engine"][1]:
                raise ValueError(f"gc.runner (LAKEFS_JANITOR_GC__RUNNER) is {data['runner']!r} but the deprecated "
                                 f"gc.engine (LAKEFS_JANITOR_GC__ENGINE) is {old['engine'][0]!r}: set gc.runner only")
            data["runner"] = old["engine"][1]
        for name, (value, new) in old.items():
            spelt = "gc.engine (LAKEFS_JANITOR_GC__ENGINE)" if name == "engine" else f"gc.runner: {value}"
            _deprecated(f"gc.{name}", f"{spelt} is deprecated: use gc.runner: {new} (LAKEFS_JANITOR_GC__RUNNER={new})")
        return data

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: object) -> object:
        if isinstance(data, dict) and "lock_seconds" in data:
            raise ValueError("gc.lock_seconds is gone: a GC run now holds a lease that it renews while it lives "
                             "(gc.lease_seconds, default 60); remove LAKEFS_JANITOR_GC__LOCK_SECONDS")
        return data

    @field_validator("schedule")
    @classmethod
    def _cron(cls, value: str) -> str:
        return check_cron(value)

    @field_validator("s3_endpoint_url", "azure_endpoint_url", "gcs_endpoint_url")
    @classmethod
    def _endpoint(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^https?://[^/\s]+", value):
            raise ValueError(f"{value!r} is not an http(s):// URL")
        return value.rstrip("/") if value else value

    @model_validator(mode="after")
    def _stores(self) -> GCSettings:
        if bool(self.s3_access_key_id) != bool(self.s3_secret_access_key):
            raise ValueError("gc.s3_access_key_id and gc.s3_secret_access_key go together: set both (or neither, "
                             "for the default credential chain)")
        if self.azure_account_key and not (self.azure_account_name or self.azure_connection_string):
            raise ValueError("gc.azure_account_key needs gc.azure_account_name (the key is the account's)")
        if self.gcs_token not in (None, "anon", "google_default", "cloud", "browser") and \
                not Path(self.gcs_token).expanduser().is_file():
            raise ValueError(f"gc.gcs_token: {self.gcs_token!r} is neither 'anon' nor a readable service-account "
                             "JSON file")
        return self

    @field_validator("min_age")
    @classmethod
    def _age(cls, value: str | None) -> str | None:
        if value is not None:
            from spark_jobs.core.durations import parse_duration  # noqa: PLC0415

            parse_duration(value, allow_zero=True)
        return value


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid", validate_default=True
    )

    lakefs: LakeFSConnection
    redis_url: str = Field(default="redis://127.0.0.1:6379/0", description="idle clock, locks, deletion history; "
                           "also Celery's broker and backend. sentinel://:pw@h1:26379/0;sentinel://h2:26379 (Celery's "
                           "form; the password is Redis's) with redis_sentinel_master for a Redis watched by Sentinel")
    broker_url: str | None = Field(default=None, description="Celery broker; defaults to redis_url")
    # A Redis watched by Sentinel: redis_url (and broker_url) as sentinel://[:password@]h1:26379;sentinel://h2:26379
    # (Celery's form), the primary's name here, and the Sentinels' own password if they require one.
    redis_sentinel_master: str | None = Field(default=None, description="with a sentinel:// redis_url (or "
                                              "broker_url): the primary's name in Sentinel")
    redis_sentinel_password: SecretStr | None = Field(default=None, description="the Sentinels' own password, if "
                                                      "they require one")
    # A hook's 200, a lock and a GC lease count only once this many replicas acknowledged the write (Redis WAIT),
    # so a failover keeps them; None: 1 with Sentinel (it has a replica to promote), 0 for a plain Redis.
    redis_replica_acks: int | None = Field(default=None, ge=0, le=5, description="the receiver answers a hook 200, "
                                           "and a lock or GC lease counts as taken or renewed, only once this many "
                                           "replicas acknowledged the write (WAIT); default 1 with Sentinel, else 0")
    # How long such a write is tried (each attempt asks the Sentinels for the primary again) before the receiver
    # answers 503, or a lock or lease counts as not taken (lost, when renewed): keep it inside lakeFS's hook time-out.
    redis_retry_seconds: float = Field(default=3.0, gt=0, le=60, description="how long a write that replicas must "
                                       "acknowledge is tried (each attempt asks the Sentinels for the primary "
                                       "again; the receiver's attempt costs a hung primary 1 s) before the "
                                       "receiver answers 503, or a lock or GC lease counts as not taken; beside "
                                       "Sentinel's down-after-milliseconds")
    key_prefix: str = Field(default="lakefs-janitor", min_length=1, description="prefix of every Redis key")

    # Shared secret lakeFS sends with every hook call (header or query parameter).
    webhook_secret: SecretStr | None = Field(default=None, description="shared secret lakeFS sends with every "
                                             "hook call (required by serve)")
    webhook_max_body_bytes: int = Field(default=256 * 1024, gt=0, description="larger hook bodies get 413")
    lakefs_timeout_seconds: float = Field(default=30.0, gt=0, description="timeout of a request to lakeFS")

    reconcile_schedule: str = Field(default="*/5 * * * *", description="cron of the reconciler")
    reconcile_max_branches: int = Field(default=5000, gt=0, description="branches examined per repository per "
                                        "run; the next run resumes")
    reconcile_max_staged_stats: int = Field(default=1000, ge=0, description="staged objects stat'ed per branch "
                                            "for the fingerprint")

    worker_metrics_port: int | None = Field(default=None, ge=1, le=65535,
                                            description="serve the Celery worker's /metrics on this port")
    worker_metrics_addr: str = Field(default="127.0.0.1", description="the address of the worker's /metrics")

    lifecycle_schedule: str = Field(default="0 * * * *", description="cron of the branch lifecycle run")
    lifecycle_max_deletions: int = Field(default=100, gt=0, description="deletions per repository per run")
    lifecycle_adopt_untracked: bool = Field(default=False, description="treat branches with no recorded creation "
                                            "time as born when first seen")
    lifecycle_lock_seconds: int = Field(default=3600, gt=0, description="expiry of the one-run-at-a-time lock (a "
                                        "crashed run frees it after this)")
    lifecycle_warn_before: str | None = Field(default=None, description="e.g. 24h: expose branches due within this "
                                              "window and warn once")
    lifecycle_notify_url: str | None = Field(default=None, description="POST a JSON warning here, once per branch "
                                             "and deletion time")

    object_lifecycle_schedule: str = Field(default="15 3 * * *", description="cron of the object lifecycle run "
                                           "(every repository, every branch a rule selects)")
    object_lifecycle_max_deletions_per_run: int = Field(default=100_000, gt=0,
                                                        description="objects expired per repository "
                                                        "and run; the rest wait for the next run")
    object_lifecycle_lock_seconds: int = Field(default=3600, gt=0, description="expiry of the object lifecycle's "
                                               "one-run-at-a-time lock")

    spark: SparkSettings = Field(default_factory=SparkSettings)
    gc: GCSettings = Field(default_factory=GCSettings)

    @field_validator("reconcile_schedule", "lifecycle_schedule", "object_lifecycle_schedule")
    @classmethod
    def _cron(cls, value: str) -> str:
        return check_cron(value)

    @field_validator("redis_url", "broker_url")
    @classmethod
    def _redis(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if is_sentinel(value):
            try:
                where = parse_sentinel_url(value)
            except ValueError as exc:
                raise ValueError(f"not a valid sentinel:// URL: {exc}") from None
            if where.master_name or where.sentinel_password:
                raise ValueError("the master name and the Sentinel password are settings of their own: "
                                 "LAKEFS_JANITOR_REDIS_SENTINEL_MASTER, LAKEFS_JANITOR_REDIS_SENTINEL_PASSWORD")
            return value
        if not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must be a redis://, rediss://, unix:// or sentinel:// URL")
        try:
            redis.connection.parse_url(value)
        except ValueError as exc:
            raise ValueError(f"not a valid Redis URL: {exc}") from None
        return value

    @field_validator("redis_sentinel_master", "redis_sentinel_password", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        # compose and Helm pass an empty variable for a setting left out: that is "not set", not an empty name
        return None if value == "" else value

    @field_validator("redis_sentinel_master")
    @classmethod
    def _master(cls, value: str | None, info: ValidationInfo) -> str | None:
        urls = [u for u in (info.data.get("redis_url"), info.data.get("broker_url")) if u]
        if any(is_sentinel(u) for u in urls) and not value:
            raise ValueError("a sentinel:// Redis URL needs the name of the primary Sentinel watches (Sentinel's "
                             "`sentinel monitor <name> …`)")
        if value and not any(is_sentinel(u) for u in urls):
            raise ValueError("set only with a sentinel:// LAKEFS_JANITOR_REDIS_URL or BROKER_URL")
        return value

    @field_validator("lifecycle_notify_url")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} must be an http:// or https:// URL")
        return value

    @field_validator("lifecycle_warn_before")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                parse_duration(value)
            except DurationError as exc:
                raise ValueError(str(exc)) from None
        return value

    @property
    def celery_broker_url(self) -> str:
        return self.broker_url or self.redis_url

    @property
    def replica_acks(self) -> int:
        """Replicas that must acknowledge a hook's write before the receiver answers 200."""
        if self.redis_replica_acks is not None:
            return self.redis_replica_acks
        return 1 if is_sentinel(self.redis_url) else 0

    @property
    def redis_durability(self) -> Acknowledged:
        """When a hook's write, a lock or a GC lease counts (``spark_jobs.engine.runtime.redis_ack``): ``replica_acks``
        replicas, tried for ``redis_retry_seconds``."""
        return Acknowledged(replicas=self.replica_acks, budget_seconds=self.redis_retry_seconds)

    def redis_client_url(self, url: str | None = None) -> str:
        """``url`` (default: redis_url) as one self-contained string: a sentinel:// URL with the master's name and
        the Sentinels' password in its query (``spark_jobs.engine.runtime.redis_connect``); any other unchanged."""
        url = url or self.redis_url
        if not is_sentinel(url):
            return url
        password = self.redis_sentinel_password.get_secret_value() if self.redis_sentinel_password else None
        return replace(parse_sentinel_url(url), master_name=self.redis_sentinel_master,
                       sentinel_password=password).to_url()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (
            init_settings,
            env_settings,
            LakectlEnvSource(settings_cls),
            ConfigFileSource(settings_cls),
            LakectlFileSource(settings_cls),
        )


_HINTS = {
    "lakefs": "set LAKECTL_SERVER_ENDPOINT_URL, LAKECTL_CREDENTIALS_ACCESS_KEY_ID and "
    "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY, or configure ~/.lakectl.yaml",
}


def _env_name(loc: tuple[Any, ...]) -> str:
    return ENV_PREFIX + "__".join(str(part).upper() for part in loc)


def _describe(exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        name = ".".join(str(part) for part in loc)
        hint = _HINTS.get(str(loc[0]), f"environment variable {_env_name(loc)}")
        lines.append(f"  {name}: {err['msg']} ({hint})")
    return "invalid lakefs-janitor settings:\n" + "\n".join(lines)


def load_settings(**overrides: Any) -> Settings:
    """Build the settings or raise SettingsError naming every bad setting."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise SettingsError(_describe(exc)) from None
