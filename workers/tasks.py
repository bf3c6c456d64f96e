"""Thin Celery tasks: look up the worker's clients, call a domain function, report."""

from __future__ import annotations

from datetime import UTC, datetime

from celery import Task, shared_task

from workers.lakefs_client import Unavailable
from workers.reconciler import writable_repositories
from workers.runtime import Services

RETRYABLE = (Unavailable, ConnectionError, TimeoutError)


def services(task: Task) -> Services:
    return task.app.janitor


@shared_task(bind=True, name="workers.tasks.reconcile_repository", autoretry_for=RETRYABLE,
             retry_backoff=True, max_retries=5, acks_late=True)
def reconcile_repository(self: Task, repository_id: str) -> dict:
    from workers.reconciler import reconcile_repository as run  # noqa: PLC0415

    s = services(self)
    with s.metrics.reconcile_seconds.time():
        report = run(s.lakefs, s.clock, repository_id, datetime.now(UTC), s.settings.reconcile_max_branches,
                     s.settings.reconcile_max_staged_stats, s.metrics)
    return {"repository_id": repository_id, "branches_seen": report.branches_seen,
            "writes": len(report.writes), "complete": report.complete, "locked_out": report.locked_out}


@shared_task(bind=True, name="workers.tasks.reconcile_all", autoretry_for=RETRYABLE,
             retry_backoff=True, max_retries=5, acks_late=True)
def reconcile_all(self: Task) -> list[str]:
    s = services(self)
    repos = writable_repositories(s.lakefs)
    for repository_id in repos:
        reconcile_repository.apply_async((repository_id,))
    return repos


@shared_task(bind=True, name="workers.tasks.lifecycle_run_repository", autoretry_for=RETRYABLE,
             retry_backoff=True, max_retries=3, acks_late=True)
def lifecycle_run_repository(self: Task, repository_id: str, dry_run: bool = False) -> dict:
    from workers.lifecycle_runner import LifecycleOptions, run_repository  # noqa: PLC0415

    s = services(self)
    report = run_repository(s.lakefs, s.clock, repository_id, datetime.now(UTC),
                            LifecycleOptions.from_settings(s.settings), dry_run, s.metrics)
    return _summary(report)


@shared_task(bind=True, name="workers.tasks.lifecycle_run_all", autoretry_for=RETRYABLE,
             retry_backoff=True, max_retries=3, acks_late=True)
def lifecycle_run_all(self: Task) -> list[dict] | str:
    from workers.lifecycle_runner import LifecycleOptions, run_all  # noqa: PLC0415

    s = services(self)
    reports = run_all(s.lakefs, s.clock, datetime.now(UTC), LifecycleOptions.from_settings(s.settings), s.metrics)
    return "skipped: another lifecycle run holds the lock" if reports is None else [_summary(r) for r in reports]


def _summary(report) -> dict:
    return {
        "repository_id": report.repository_id,
        "dry_run": report.dry_run,
        "locked_out": report.locked_out,
        "outcomes": [{"branch_id": o.branch_id, "result": o.result, "policy_id": o.policy_id}
                     for o in report.outcomes],
        "skipped": report.skipped,
    }
