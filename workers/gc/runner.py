"""A GC run for one repository as the CLI and the Celery task start it: the namespace opened from settings, the
engine chosen, one run per repository at a time, metrics and history recorded."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta

from spark_jobs.core.report import Summary
from spark_jobs.core.storage import Namespace, StorageError, open_namespace
from workers.durations import parse_duration
from workers.gc import run as engine
from workers.gc.store import GCRuns
from workers.lakefs.client import LakeFS
from workers.lakefs.errors import LakeFSError
from workers.locks import release_quietly
from workers.metrics import Metrics
from workers.settings import GCSettings

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
    engine: str = "inprocess"


def s3_client_factory(gc: GCSettings) -> Callable[[], object]:
    def build():
        import boto3  # noqa: PLC0415 - only for S3 namespaces

        return boto3.client("s3", endpoint_url=gc.s3_endpoint_url, region_name=gc.s3_region or "us-east-1",
                            aws_access_key_id=gc.s3_access_key_id,
                            aws_secret_access_key=gc.s3_secret_access_key.get_secret_value()
                            if gc.s3_secret_access_key else None)
    return build


def open_repository_namespace(lakefs: LakeFS, gc: GCSettings, repository_id: str) -> Namespace:
    repo = lakefs.call("get repository", lakefs.repositories.get_repository, repository_id)
    try:
        return open_namespace(repo.storage_namespace, local_root=gc.local_blockstore_path,
                              s3_client_factory=s3_client_factory(gc))
    except StorageError as exc:
        raise engine.GCError(str(exc), "storage-config") from exc


def min_age_of(gc: GCSettings, given: timedelta | None) -> timedelta | None:
    if given is not None:
        return given
    return parse_duration(gc.min_age, allow_zero=True) if gc.min_age else None


def execute(lakefs: LakeFS, gc: GCSettings, request: GCRequest, *, runs: GCRuns, metrics: Metrics | None = None,
            progress: engine.Progress | None = None) -> Summary:
    """Run one request under the repository's lock; records history and metrics whatever the outcome."""
    repo = request.repository_id
    lock = runs.lock(repo, gc.lock_seconds)
    if not lock.acquire():
        raise Busy(f"another GC of lakefs://{repo} is running; try again later")
    started = time.monotonic()
    entry = {"repository_id": repo, "mode": request.mode, "engine": request.engine, "dry_run": request.dry_run,
             "started_at": datetime.now(UTC).isoformat(), "policy": "gc rules"}
    try:
        ns = open_repository_namespace(lakefs, gc, repo)
        common = {"metadata_source": gc.metadata_source, "threads": gc.threads, "local_root": gc.local_blockstore_path,
                  "progress": progress}
        if request.mode == "sweep":
            summary = engine.sweep(lakefs, ns, repo, request.mark_id or "", **common)
            timings = {}
        elif request.mode == "plan":
            marked = engine.mark(lakefs, ns, repo, now=request.now or datetime.now(UTC),
                                 min_age=min_age_of(gc, request.min_age), dry_run=request.dry_run, **common)
            summary, timings = marked.summary, marked.seconds
        else:
            summary, marked = engine.run(lakefs, ns, repo, now=request.now, min_age=min_age_of(gc, request.min_age),
                                         dry_run=request.dry_run, **common)
            timings = marked.seconds
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
