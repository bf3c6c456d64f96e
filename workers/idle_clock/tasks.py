"""Thin Celery tasks of the idle clock: the reconciler, per repository and over all of them."""

from __future__ import annotations

from datetime import UTC, datetime

from celery import Task, shared_task

from workers.celery.base import RETRYABLE, services
from workers.idle_clock.reconcile import writable_repositories


@shared_task(bind=True, name="workers.idle_clock.tasks.reconcile_repository", autoretry_for=RETRYABLE,
             retry_backoff=True, max_retries=5, acks_late=True)
def reconcile_repository(self: Task, repository_id: str) -> dict:
    from workers.idle_clock.reconcile import reconcile_repository as run  # noqa: PLC0415

    s = services(self)
    with s.metrics.reconcile_seconds.time():
        report = run(s.lakefs, s.clock, repository_id, now=datetime.now(UTC),
                     max_branches=s.settings.reconcile_max_branches,
                     max_stats=s.settings.reconcile_max_staged_stats, metrics=s.metrics)
    return {"repository_id": repository_id, "branches_seen": report.branches_seen,
            "writes": len(report.writes), "complete": report.complete, "locked_out": report.locked_out}


@shared_task(bind=True, name="workers.idle_clock.tasks.reconcile_all", autoretry_for=RETRYABLE,
             retry_backoff=True, max_retries=5, acks_late=True)
def reconcile_all(self: Task) -> list[str]:
    s = services(self)
    repos = writable_repositories(s.lakefs)
    for repository_id in repos:
        reconcile_repository.apply_async((repository_id,))
    return repos
