"""A GC run for one repository as the CLI and the Celery task start it: the namespace opened from settings, the
engine chosen, one run per repository at a time, metrics and history recorded."""

from __future__ import annotations

import functools
import importlib.util
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta

from spark_jobs.core.durations import parse_duration
from spark_jobs.core.report import Summary
from workers.gc import run as engine
from workers.gc.storage import Namespace, StorageError, open_namespace
from workers.gc.store import GCRuns
from workers.lakefs.client import LakeFS
from workers.lakefs.errors import LakeFSError
from workers.locks import release_quietly
from workers.metrics import Metrics
from workers.settings import GCSettings, LakeFSConnection, SparkSettings

log = logging.getLogger(__name__)


class Busy(RuntimeError):
    """Another GC of the repository holds its lock."""


@dataclass(frozen=True)
class GCRequest:
    repository_id: str
    mode: str = "run"  # run | plan | sweep
    mark_id: str | None = None
    now: datetime | None = None
    min_age: timedelta | None = None
    dry_run: bool = False
    engine: str = "inprocess"  # inprocess | spark | auto
    prefix_depth: int = 2  # folders of the plan's by-path breakdown
    by_path: bool = False  # name what a plan deletes by path prefix (reads the expired history too)


def s3_client_factory(gc: GCSettings) -> Callable[[], object]:
    def build():
        import boto3  # noqa: PLC0415 - only for S3 namespaces

        return boto3.client("s3", endpoint_url=gc.s3_endpoint_url, region_name=gc.s3_region or "us-east-1",
                            aws_access_key_id=gc.s3_access_key_id,
                            aws_secret_access_key=gc.s3_secret_access_key.get_secret_value()
                            if gc.s3_secret_access_key else None)
    return build


def open_repository_namespace(lakefs: LakeFS, gc: GCSettings, repository_id: str) -> tuple[Namespace, str | None]:
    """The repository's storage namespace, and the local blockstore's folder for a ``local://`` one (configured,
    or else learnt from the full addresses lakeFS writes)."""
    repo = lakefs.call("get repository", lakefs.repositories.get_repository, repository_id)
    local_root = gc.local_blockstore_path
    if repo.storage_namespace.startswith("local://") and not local_root:
        if engine.get_rules(lakefs, repository_id) is None:  # lakeFS prepares nothing without rules
            raise engine.NoRules(repository_id)
        local_root = engine.discover_local_root(lakefs, repository_id, repo.storage_namespace)
    try:
        return open_namespace(repo.storage_namespace, local_root=local_root,
                              s3_client_factory=s3_client_factory(gc)), local_root
    except StorageError as exc:
        raise engine.GCError(str(exc), "storage-config") from exc


def min_age_of(gc: GCSettings, given: timedelta | None) -> timedelta | None:
    if given is not None:
        return given
    return parse_duration(gc.min_age, allow_zero=True) if gc.min_age else None


# Spark job progress phase -> (the in-process engine's name for it, the event field holding its count)
SPARK_PHASES = {"commits": ("commits", "retained"), "ranges": ("ranges", "ranges"),
                "listed": ("objects listed", "objects"), "deleted": ("deleted", "deleted")}


def spark_progress(event: dict) -> tuple[str, int] | None:
    """A Spark job's progress event under the in-process engine's phase name, with its count."""
    phase = SPARK_PHASES.get(str(event.get("phase")))
    if event.get("event") != "progress" or phase is None:
        return None
    return phase[0], int(event.get(phase[1], 0) or 0)


def _spark(gc: GCSettings, spark: SparkSettings, connection: LakeFSConnection, request: GCRequest,
           progress: engine.Progress | None) -> Summary:
    """The run as a Spark job (spark_jobs/jobs/gc.py through workers/gc/submit.py), its record read back."""
    from workers.gc.submit import run_gc  # noqa: PLC0415 - Spark only when asked for

    mode = {"run": "dry-run" if request.dry_run else "full", "plan": "mark", "sweep": "sweep"}[request.mode]
    options: dict = {}
    if gc.s3_endpoint_url:
        options["client_kwargs"] = {"endpoint_url": gc.s3_endpoint_url, "region_name": gc.s3_region or "us-east-1"}
    if gc.s3_access_key_id and gc.s3_secret_access_key:
        options.update(key=gc.s3_access_key_id, secret=gc.s3_secret_access_key.get_secret_value())

    def on_event(event: dict) -> None:
        if progress and (step := spark_progress(event)):
            progress(*step)

    try:
        result = run_gc(spark=spark, lakefs=connection, repository_id=request.repository_id, mode=mode,
                        now=request.now, min_age=min_age_of(gc, request.min_age), mark_id=request.mark_id,
                        storage_options=options or None, metadata_from=gc.metadata_source, on_event=on_event)
    except Exception as exc:  # the job's own GCError, or spark-submit failing: one failure reason either way
        reason = getattr(exc, "reason", "spark")
        if reason == "no-rules":  # a skip, as in process (the Celery task reports it as one)
            raise engine.NoRules(request.repository_id) from exc
        raise engine.GCError(str(exc), reason) from exc
    summary = Summary.from_dict(result.get("stored_summary", {}))  # both engines write the same summary.json
    if mode in ("full", "sweep"):
        sweep = result.get("stored_sweep") or result.get("sweep") or {}
        summary.phase, summary.swept = "swept", int(sweep.get("deleted", 0))
        summary.spared_by_recheck = int(sweep.get("became_reachable", 0))
    return summary


def _in_process(lakefs: LakeFS, gc: GCSettings, request: GCRequest, progress: engine.Progress | None,
                namespace: Callable[[], tuple[Namespace, str | None]]) -> tuple[Summary, dict[str, float]]:
    repo = request.repository_id
    ns, local_root = namespace()
    common = {"metadata_source": gc.metadata_source, "threads": gc.threads, "local_root": local_root,
              "progress": progress}
    if request.mode == "sweep":
        summary = engine.sweep(lakefs, ns, repo, run_id=request.mark_id or "", max_deletions=gc.max_deletions_per_run,
                               **common)
        timings = {}
    elif request.mode == "plan":
        marked = engine.mark(lakefs, ns, repo, now=request.now or datetime.now(UTC),
                             min_age=min_age_of(gc, request.min_age), dry_run=request.dry_run,
                             prefix_depth=request.prefix_depth, by_path=request.by_path, **common)
        summary, timings = marked.summary, marked.seconds
    else:
        summary, marked = engine.run(lakefs, ns, repo, now=request.now, min_age=min_age_of(gc, request.min_age),
                                     max_deletions=gc.max_deletions_per_run,
                                     dry_run=request.dry_run, **common)
        timings = marked.seconds
    return summary, timings


def choose_engine(lakefs: LakeFS, gc: GCSettings, request: GCRequest, *, spark_ready: bool,
                  namespace: Callable[[], tuple[Namespace, str | None]] | None = None) -> tuple[str, str]:
    """The engine a request runs on, and why. ``auto`` takes Spark for a repository whose branch HEADs reach more
    than ``auto_spark_above_ranges`` distinct ranges, when Spark is configured and installed; a sweep runs
    in-process."""
    if request.engine != "auto":
        return request.engine, "asked for"
    if request.mode == "sweep":
        return "inprocess", "a sweep reads only the plan and the HEADs"
    if not spark_ready:
        return "inprocess", "Spark is not configured or pyspark is not installed"
    ns, _ = (namespace or (lambda: open_repository_namespace(lakefs, gc, request.repository_id)))()
    ranges = engine.head_range_count(lakefs, ns, request.repository_id, metadata_source=gc.metadata_source)
    if ranges > gc.auto_spark_above_ranges:
        return "spark", f"{ranges} ranges at the branch HEADs (> {gc.auto_spark_above_ranges})"
    return "inprocess", f"{ranges} ranges at the branch HEADs (<= {gc.auto_spark_above_ranges})"


def _spark_ready(spark: SparkSettings | None, connection: LakeFSConnection | None) -> bool:
    return spark is not None and connection is not None and importlib.util.find_spec("pyspark") is not None


def execute(lakefs: LakeFS, gc: GCSettings, request: GCRequest, *, runs: GCRuns, metrics: Metrics | None = None,
            progress: engine.Progress | None = None, spark: SparkSettings | None = None,
            connection: LakeFSConnection | None = None) -> Summary:
    """Run one request under the repository's lock; records history and metrics whatever the outcome."""
    repo = request.repository_id
    lock = runs.lock(repo, gc.lock_seconds)
    if not lock.acquire():
        raise Busy(f"another GC of lakefs://{repo} is running; try again later")
    started = time.monotonic()
    if request.mode == "run":
        runs.run_started(repo)
    entry = {"repository_id": repo, "mode": request.mode, "engine": request.engine, "dry_run": request.dry_run,
             "started_at": datetime.now(UTC).isoformat()}
    try:
        # Opened once: on an unconfigured local blockstore, finding its folder asks lakeFS to prepare GC commits.
        namespace = functools.cache(lambda: open_repository_namespace(lakefs, gc, repo))
        chosen, why = choose_engine(lakefs, gc, request, spark_ready=_spark_ready(spark, connection),
                                    namespace=namespace)
        if request.engine == "auto":
            log.info("gc: lakefs://%s runs on the %s engine: %s", repo, chosen, why)
            entry.update(engine=chosen, engine_reason=why)
            request = replace(request, engine=chosen)
        if request.engine == "spark":
            if spark is None or connection is None:
                raise engine.GCError("the Spark engine needs the Spark settings and the lakeFS connection", "spark")
            summary, timings = _spark(gc, spark, connection, request, progress), {}
        else:
            summary, timings = _in_process(lakefs, gc, request, progress, namespace)
    except (engine.GCError, LakeFSError, StorageError) as exc:
        reason = getattr(exc, "reason", "lakefs" if isinstance(exc, LakeFSError) else "storage")
        entry.update(success=False, error=str(exc), reason=reason, seconds=round(time.monotonic() - started, 3))
        runs.record(repo, entry)
        if metrics:
            metrics.gc_failures.labels(repo, reason).inc()
        if isinstance(exc, StorageError):
            raise engine.GCError(str(exc), reason) from exc
        raise
    finally:
        release_quietly(lock, f"gc {repo}")
    entry.update(asdict(summary), seconds=round(time.monotonic() - started, 3))
    runs.record(repo, entry)
    if metrics:
        for phase, seconds in timings.items():
            metrics.gc_phase_seconds.labels(phase).observe(seconds)
        metrics.gc_objects_kept.labels(repo).set(summary.kept_objects)
        if summary.phase == "swept":
            metrics.gc_objects_deleted.labels(repo).inc(summary.swept)
            metrics.gc_bytes_deleted.labels(repo).inc(summary.deleted_bytes if summary.swept else 0)
            metrics.gc_last_success.labels(repo).set(time.time())
        if request.mode != "sweep":
            metrics.gc_objects_too_new.labels(repo).inc(summary.too_new)
    return summary
