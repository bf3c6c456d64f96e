"""Thin Celery tasks of the GC: one repository (under its lock), and the daily fan-out over all of them."""

from __future__ import annotations

from celery import Task, shared_task

from workers.celery.base import RETRYABLE, services


@shared_task(bind=True, name="workers.gc.tasks.run_repository", autoretry_for=RETRYABLE, retry_backoff=True,
             max_retries=3, acks_late=True)
def run_repository_task(self: Task, repository_id: str, dry_run: bool = False) -> dict:
    from workers.gc.runner import Busy, GCError, GCRequest, execute  # noqa: PLC0415
    from workers.gc.store import GCRuns  # noqa: PLC0415

    s = services(self)
    request = GCRequest(repository_id, "run", dry_run=dry_run, engine=s.settings.gc.engine)
    try:
        summary = execute(s.settings.gc, request, connection=s.settings.lakefs,
                          runs=GCRuns(s.redis, s.settings.key_prefix, s.settings.redis_url), metrics=s.metrics, spark=s.settings.spark)
    except Busy as exc:
        return {"repository_id": repository_id, "skipped": str(exc)}
    except GCError as exc:
        if exc.reason == "no-rules":  # nothing is collected without rules: a skip, not a failure
            return {"repository_id": repository_id, "skipped": str(exc)}
        return {"repository_id": repository_id, "success": False, "reason": exc.reason, "error": str(exc)}
    return {"repository_id": repository_id, "success": summary.success, "run_id": summary.run_id,
            "deleted": summary.swept, "deleted_bytes": summary.deleted_bytes, "dry_run": summary.dry_run}


@shared_task(bind=True, name="workers.gc.tasks.run_all", autoretry_for=RETRYABLE, retry_backoff=True,
             max_retries=3, acks_late=True)
def run_all_task(self: Task) -> list[str]:
    from workers.idle_clock.reconcile import writable_repositories  # noqa: PLC0415

    repos = writable_repositories(services(self).lakefs)
    for repository_id in repos:
        run_repository_task.apply_async((repository_id,))
    return repos


@shared_task(bind=True, name="workers.gc.tasks.trigger_due", autoretry_for=RETRYABLE, retry_backoff=True,
             max_retries=3, acks_late=True)
def trigger_due_task(self: Task) -> dict:
    """Event-driven cleaning: start the GC of every repository with enough commits since its last run."""
    from workers.gc.store import GCRuns  # noqa: PLC0415
    from workers.gc.trigger import due  # noqa: PLC0415

    s = services(self)
    runs = GCRuns(s.redis, s.settings.key_prefix)
    started, skipped = [], []
    for repository_id in due(runs.commits_since_run(), s.settings.gc.trigger_commits):
        if runs.running(repository_id):  # never two runs of one repository at once
            skipped.append(repository_id)
            s.metrics.gc_trigger_skips.labels(repository_id, "running").inc()
            continue
        runs.run_started(repository_id)  # so the next check does not queue it again
        run_repository_task.apply_async((repository_id,))
        s.metrics.gc_triggers.labels(repository_id).inc()
        started.append(repository_id)
    return {"started": started, "skipped": skipped}
