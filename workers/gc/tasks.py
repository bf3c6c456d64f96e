"""Thin Celery tasks of the GC: one repository (under its lock), and the daily fan-out over all of them."""

from __future__ import annotations

from celery import shared_task

from workers.shared.task_base import JanitorTask


@shared_task(bind=True, base=JanitorTask, name="workers.gc.tasks.run_repository")
def run_repository_task(self: JanitorTask, repository_id: str, dry_run: bool = False) -> dict:
    from workers.gc.history import GCRuns  # noqa: PLC0415
    from workers.gc.run import Busy, GCError, GCRequest, execute  # noqa: PLC0415

    s = self.services
    request = GCRequest(repository_id, "run", dry_run=dry_run, runner=s.settings.gc.runner)
    try:
        summary = execute(s.settings.gc, request, connection=s.settings.lakefs,
                          runs=GCRuns.of(s), metrics=s.metrics, spark=s.settings.spark)
    except Busy as exc:
        return {"repository_id": repository_id, "skipped": str(exc)}
    except GCError as exc:
        if exc.reason == "no-rules":  # nothing is collected without rules: a skip, not a failure
            return {"repository_id": repository_id, "skipped": str(exc)}
        return {"repository_id": repository_id, "success": False, "reason": exc.reason, "error": str(exc)}
    return {"repository_id": repository_id, "success": summary.success, "run_id": summary.run_id,
            "deleted": summary.swept, "deleted_bytes": summary.deleted_bytes, "dry_run": summary.dry_run}


@shared_task(bind=True, base=JanitorTask, name="workers.gc.tasks.run_all")
def run_all_task(self: JanitorTask) -> list[str]:
    from workers.idle_clock.reconcile import writable_repositories  # noqa: PLC0415

    repos = writable_repositories(self.services.lakefs)
    for repository_id in repos:
        run_repository_task.apply_async((repository_id,))
    return repos


@shared_task(bind=True, base=JanitorTask, name="workers.gc.tasks.trigger_due")
def trigger_due_task(self: JanitorTask) -> dict:
    """Event-driven cleaning: start the GC of every repository with enough commits since its last run."""
    from workers.gc.history import GCRuns  # noqa: PLC0415
    from workers.gc.trigger import due  # noqa: PLC0415

    s = self.services
    runs = GCRuns.of(s)
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
