"""Thin Celery tasks of the idle clock: the reconciler, per repository and over all of them."""

from __future__ import annotations

from datetime import UTC, datetime

from celery import shared_task

from workers.idle_clock.reconcile import writable_repositories
from workers.idle_clock.store import ClockStore
from workers.shared.task_base import JanitorTask


@shared_task(bind=True, base=JanitorTask, name="workers.idle_clock.tasks.reconcile_repository", max_retries=5)
def reconcile_repository(self: JanitorTask, repository_id: str) -> dict:
    from workers.idle_clock.reconcile import reconcile_repository as run  # noqa: PLC0415

    s = self.services
    with s.metrics.reconcile_seconds.time():
        report = run(s.lakefs, ClockStore.of(s), repository_id, now=datetime.now(UTC),
                     max_branches=s.settings.reconcile_max_branches,
                     max_stats=s.settings.reconcile_max_staged_stats, metrics=s.metrics)
    return {"repository_id": repository_id, "branches_seen": report.branches_seen,
            "writes": len(report.writes), "complete": report.complete, "locked_out": report.locked_out}


@shared_task(bind=True, base=JanitorTask, name="workers.idle_clock.tasks.reconcile_all", max_retries=5)
def reconcile_all(self: JanitorTask) -> list[str]:
    repos = writable_repositories(self.services.lakefs)
    for repository_id in repos:
        reconcile_repository.apply_async((repository_id,))
    return repos
