"""What wraps a GC run of one repository, as the CLI and the Celery task start it: the run's lock, the runner
chosen (threads in process, or Spark), history and metrics. The run itself is the one engine's
(``spark_jobs.engine``), on either runner."""

from __future__ import annotations

import importlib.util
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta

import redis

from spark_jobs.core.durations import parse_duration
from spark_jobs.core.freeing import Verdict, local_verdict
from spark_jobs.core.report import Summary
from spark_jobs.engine.plan.impact import Impact, branch_impact
from spark_jobs.engine.request import RunRequest
from spark_jobs.engine.run import head_range_count, run_marked
from spark_jobs.engine.runtime.context import GCError, JobConfig
from spark_jobs.engine.runtime.lakefs_api import LakeFSApi, LakeFSApiConfig, LakeFSApiError
from spark_jobs.engine.runtime.parallel import ThreadRunner
from spark_jobs.engine.runtime.range_cache import RangeCacheSettings
from spark_jobs.engine.runtime.repository import cleaning_of
from spark_jobs.engine.stores import StorageConfig, StorageError, open_namespace
from spark_jobs.engine.sweep.lease_watch import LeaseRef
from workers.gc.history import GCRuns
from workers.gc.lease import Busy, Holder
from workers.gc.store_options import storage_options_json
from workers.shared.metrics import Metrics
from workers.shared.settings import GCSettings, LakeFSConnection, SparkSettings

__all__ = ["Busy", "GCError", "GCRequest", "execute", "repository_impact"]
log = logging.getLogger(__name__)
Progress = Callable[[str, int], None]


@dataclass(frozen=True)
class GCRequest:
    repository_id: str
    mode: str = "run"  # run | plan | sweep
    mark_id: str | None = None
    now: datetime | None = None
    min_age: timedelta | None = None
    dry_run: bool = False
    runner: str = "threads"  # threads | spark | auto
    prefix_depth: int = 2  # folders of the plan's by-prefix breakdown
    by_path: bool = False  # name what a plan deletes by path prefix (reads the expired history too)
    cache: bool = True  # the mark cache; False (--no-cache): every range and metarange read
    inventory: str | None = None  # an S3 Inventory report read instead of a listing (default: gc.inventory's)
    full: bool = False  # list the whole namespace even when the previous run's state allows an incremental run


def api_config(connection: LakeFSConnection, timeout: float = 30.0) -> LakeFSApiConfig:
    return LakeFSApiConfig(connection.api_url, connection.access_key_id,
                           connection.secret_access_key.get_secret_value(), read_timeout=timeout)


def storage_config(gc: GCSettings) -> StorageConfig:
    """The stores' settings; the namespace itself is the repository's, read from lakeFS by the engine."""
    return StorageConfig("", gc.local_blockstore_path, storage_options_json(gc), gc.store_max_requests)


def range_cache_of(gc: GCSettings) -> RangeCacheSettings | None:
    return RangeCacheSettings(gc.range_cache_folder, gc.range_cache_mib) if gc.range_cache_mib else None


def min_age_of(gc: GCSettings, given: timedelta | None) -> timedelta | None:
    if given is not None:
        return given
    return parse_duration(gc.min_age, allow_zero=True) if gc.min_age else None


def run_request(gc: GCSettings, request: GCRequest, runner: str, *, lease: LeaseRef | None = None) -> RunRequest:
    mode = {"run": "dry-run" if request.dry_run else "full", "plan": "mark", "sweep": "sweep"}[request.mode]
    return RunRequest(repository_id=request.repository_id, mode=mode, now=request.now, mark_id=request.mark_id,
                      min_age=min_age_of(gc, request.min_age), max_deletions=gc.max_deletions_per_run,
                      prefix_depth=request.prefix_depth, by_path=request.by_path, runner=runner,
                      metadata_from=gc.metadata_source, lease=lease, cache=request.cache,
                      inventory=request.inventory or gc.inventory.get(request.repository_id),
                      listing="full" if request.full else "auto",
                      full_listing_every=parse_duration(gc.full_listing_every, allow_zero=True),
                      purge_noncurrent=gc.purge_noncurrent, range_cache=range_cache_of(gc))


def spark_ready(spark: SparkSettings | None) -> bool:
    return spark is not None and importlib.util.find_spec("pyspark") is not None


def reaches_store(api: LakeFSApiConfig, gc: GCSettings, repository_id: str) -> str | None:
    """Why this process cannot reach the repository's store with the settings given (None: it can). A local
    blockstore whose folder is not configured is learnt during the run, and not probed here."""
    client = LakeFSApi(api)
    try:
        namespace = client.repository(repository_id)["storage_namespace"]
        if namespace.startswith("local://") and not gc.local_blockstore_path:
            return None
        open_namespace(replace(storage_config(gc), namespace=namespace)).probe()
        return None
    except StorageError as exc:
        return str(exc)
    except LakeFSApiError as exc:  # a failure of the run like any other: recorded and counted by execute
        raise GCError(f"--runner auto: reading lakefs://{repository_id} failed: {exc}", exc.reason) from exc
    finally:
        client.close()


def doctor(gc: GCSettings, connection: LakeFSConnection, repository_id: str) -> Verdict:
    """Whether what a GC of the repository deletes is freed, from its namespace's bucket or container settings,
    read with the GC's own credentials (``Namespace.freeing``)."""
    client = LakeFSApi(api_config(connection))
    try:
        namespace = client.repository(repository_id)["storage_namespace"]
        if namespace.startswith("local://"):  # a disk: no need to find its folder to know
            return local_verdict()
        return open_namespace(replace(storage_config(gc), namespace=namespace)).freeing()
    except (LakeFSApiError, StorageError) as exc:
        raise GCError(f"gc doctor lakefs://{repository_id}: {exc}", getattr(exc, "reason", "storage")) from exc
    finally:
        client.close()


def choose_runner(api: LakeFSApiConfig, gc: GCSettings, request: GCRequest, *,
                  spark: SparkSettings | None) -> tuple[str, str]:
    """The runner a request runs on, and why. ``auto`` takes Spark for a repository whose branch HEADs reach more
    than ``auto_spark_above_ranges`` distinct ranges (``auto_threshold``: fewer with heavy cleaning policies), when
    Spark is configured. It never picks a runner that cannot reach the store: when this process cannot, and Spark is
    not configured, it fails and says why."""
    if request.runner != "auto":
        return request.runner, "asked for"
    unreachable = reaches_store(api, gc, request.repository_id)
    if unreachable is not None:
        if spark_ready(spark):
            return "spark", f"this process cannot reach the store ({unreachable})"
        raise GCError(f"--runner auto: no runner can reach the store of lakefs://{request.repository_id}: "
                      f"{unreachable}; fix the gc.* store settings, or configure Spark (spark.master) if only "
                      "the cluster can reach it", "storage-config")
    if request.mode == "sweep":
        return "threads", "a sweep reads only the plan and the HEADs"
    ranges = head_range_count(api, request.repository_id)
    limit, weighed = auto_threshold(api, gc, request.repository_id)
    if ranges <= limit:
        return "threads", f"{ranges} ranges at the branch HEADs (<= {limit}{weighed})"
    if not spark_ready(spark):
        return "threads", (f"{ranges} ranges at the branch HEADs (> {limit}{weighed}), but Spark is "
                           "not configured (spark.master) or pyspark is not installed")
    return "spark", f"{ranges} ranges at the branch HEADs (> {limit}{weighed})"


def auto_threshold(api: LakeFSApiConfig, gc: GCSettings, repository_id: str) -> tuple[int, str]:
    """The ranges above which ``auto`` takes Spark, and why when it is not the plain one: cleaning policies that keep
    versions or scope paths make an in-process run hold per object what their rows need (every version of the
    paths ranked, a scope per entry): ≈ 160 bytes an object over the process's footprint at 3M, 1.5× a plain run's,
    measured (bench/results/scale.md)."""
    client = LakeFSApi(api)
    try:
        policies = cleaning_of(client, repository_id)
    finally:
        client.close()
    heavy = sorted({p.id for p in policies if p.keep_versions is not None or p.paths})
    if not heavy:
        return gc.auto_spark_above_ranges, ""
    limit = min(gc.auto_spark_above_ranges, gc.auto_spark_above_ranges_with_cleaning)
    return limit, f": cleaning policies {', '.join(heavy)} keep versions or scope paths"


def _on_spark(gc: GCSettings, spark: SparkSettings, connection: LakeFSConnection, run: RunRequest,
              progress: Progress | None) -> Summary:
    from workers.gc.submit import run_gc  # noqa: PLC0415 - Spark only when asked for

    def on_event(event: dict) -> None:
        if progress and event.get("event") == "progress" and event.get("phase") != "start":
            progress(str(event.get("phase")), int(event.get("count") or 0))

    try:
        return run_gc(spark=spark, lakefs=connection, request=run, storage=storage_config(gc), on_event=on_event)
    except GCError:
        raise
    except Exception as exc:  # spark-submit failing to start or finish: one failure reason either way
        raise GCError(str(exc), getattr(exc, "reason", "spark")) from exc


def execute(gc: GCSettings, request: GCRequest, *, connection: LakeFSConnection, runs: GCRuns,
            metrics: Metrics | None = None, progress: Progress | None = None,
            spark: SparkSettings | None = None) -> Summary:
    """Run one request under the repository's lease (``workers.gc.lease``); records history and metrics whatever
    the outcome, and reports a previous run that died holding the lease."""
    repo = request.repository_id
    lease = runs.lease(repo, gc.lease_seconds)
    died = lease.acquire(request.mode)
    if died is not None:
        report_died(runs, metrics, repo=repo, died=died)
    started = time.monotonic()
    if request.mode == "run":
        runs.run_started(repo)
    entry = {"repository_id": repo, "mode": request.mode, "runner": request.runner, "dry_run": request.dry_run,
             "started_at": datetime.now(UTC).isoformat()}
    api = api_config(connection)
    try:
        chosen, why = choose_runner(api, gc, request, spark=spark)
        if request.runner == "auto":
            log.info("gc: lakefs://%s runs on the %s runner: %s", repo, chosen, why)
        entry.update(runner=chosen, runner_reason=why)
        run = run_request(gc, request, chosen, lease=lease.ref())
        if chosen == "spark":
            if spark is None:
                raise GCError("the Spark runner needs the Spark settings (spark.master)", "spark")
            summary = _on_spark(gc, spark, connection, run, progress)
        else:
            summary, _ = run_marked(api, storage_config(gc), run, runner=ThreadRunner(gc.threads),
                                    progress=progress or (lambda phase, count: None))
    except GCError as exc:
        entry.update(success=False, error=str(exc), reason=exc.reason, seconds=round(time.monotonic() - started, 3))
        try:
            runs.record(repo, entry)
        except redis.RedisError as lost:  # Redis gone is often why the run failed: its own message says more
            log.warning("gc lakefs://%s: recording the failed run failed: %s", repo, lost)
        if metrics:
            metrics.gc_failures.labels(repo, exc.reason).inc()
        raise
    finally:
        lease.release()
    entry.update(asdict(summary), seconds=round(time.monotonic() - started, 3))
    runs.record(repo, entry)
    if metrics:
        _observe(metrics, repo, request, summary)
    return summary


def report_died(runs: GCRuns, metrics: Metrics | None, *, repo: str, died: Holder) -> None:
    """A run that ended without releasing its lease (killed, OOM, its host gone): into the history, and counted
    as a failure with reason "died". What it deleted before it died was garbage; the new run finishes the rest."""
    log.warning("gc lakefs://%s: the previous run (%s) died before it ended", repo, died.describe())
    runs.record(repo, {"repository_id": repo, "mode": died.mode, "success": False, "reason": "died",
                       "started_at": died.started_at, "detected_at": datetime.now(UTC).isoformat(),
                       "error": f"the run of {died.describe()} stopped renewing its lease before it ended "
                                "(killed, out of memory, or its host went away); the next run finishes its work"})
    if metrics:
        metrics.gc_failures.labels(repo, "died").inc()


def _observe(metrics: Metrics, repo: str, request: GCRequest, summary: Summary) -> None:
    for phase, seconds in (summary.seconds or {}).items():
        metrics.gc_phase_seconds.labels(phase).observe(seconds)
    metrics.gc_objects_kept.labels(repo).set(summary.kept_objects)
    if summary.phase == "swept":
        metrics.gc_objects_deleted.labels(repo).inc(summary.swept)
        metrics.gc_bytes_deleted.labels(repo).inc(summary.deleted_bytes if summary.swept else 0)
        # what the store still bills of it (noncurrent, soft-deleted) until a rule or the retention removes it
        metrics.gc_bytes_freed.labels(repo).inc(summary.bytes_freed)
        metrics.gc_bytes_pending.labels(repo).inc(summary.bytes_pending)
        metrics.gc_storage_backoffs.labels(repo).inc(summary.backoffs)
        metrics.gc_last_success.labels(repo).set(time.time())
    if request.mode != "sweep":
        metrics.gc_objects_too_new.labels(repo).inc(summary.too_new)
        listing = summary.listing or {}
        metrics.gc_runs_by_listing.labels(repo, listing.get("kind", "full")).inc()
        if listing.get("missed_by_incremental") is not None:
            metrics.gc_missed_by_incremental.labels(repo).set(listing["missed_by_incremental"])


def repository_impact(gc: GCSettings, connection: LakeFSConnection, repository_id: str, *,
                      branch_ids: list[str] | None = None, min_age: timedelta | None = None) -> dict[str, Impact]:
    """Impact of deleting each branch (all when None), from one dry mark (its plan goes under _lakefs/ only)."""
    now = datetime.now(UTC)
    api = api_config(connection)
    run = RunRequest(repository_id, "dry-run", now=now, min_age=min_age_of(gc, min_age),
                     metadata_from=gc.metadata_source, listing="full")  # the sizes of what is kept: all listed
    _, marked = run_marked(api, storage_config(gc), run, runner=ThreadRunner(gc.threads))
    client = LakeFSApi(api)
    try:
        config = JobConfig(api, StorageConfig(marked.graph.namespace, marked.graph.local_root,
                                              storage_options_json(gc), gc.store_max_requests),
                           repository_id, gc.metadata_source)
        return branch_impact(client, config, marked, branch_ids=branch_ids or list(marked.graph.heads), now=now)
    except (LakeFSApiError, StorageError) as exc:
        raise GCError(f"impact of lakefs://{repository_id}: {exc}", getattr(exc, "reason", "storage")) from exc
    finally:
        client.close()

