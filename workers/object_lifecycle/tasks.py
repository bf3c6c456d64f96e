"""Thin Celery tasks of the object lifecycle: one repository, or every repository in turn."""

from __future__ import annotations

from datetime import UTC, datetime

from celery import shared_task

from workers.object_lifecycle.store import ObjectLifecycleRecords
from workers.shared.task_base import JanitorTask


@shared_task(bind=True, base=JanitorTask, name="workers.object_lifecycle.tasks.run_repository")
def run_repository_task(self: JanitorTask, repository_id: str, dry_run: bool = False) -> dict:
    from workers.object_lifecycle.scheduled import options_from, run_repository  # noqa: PLC0415

    s = self.services
    report = run_repository(s.lakefs, ObjectLifecycleRecords.of(s), repository_id, now=datetime.now(UTC),
                            options=options_from(s.settings), dry_run=dry_run, metrics=s.metrics)
    return report.document()


@shared_task(bind=True, base=JanitorTask, name="workers.object_lifecycle.tasks.run_all")
def run_all_task(self: JanitorTask) -> list[dict] | str:
    from workers.object_lifecycle.scheduled import options_from, run_all  # noqa: PLC0415

    s = self.services
    reports = run_all(s.lakefs, ObjectLifecycleRecords.of(s), datetime.now(UTC), options=options_from(s.settings),
                      metrics=s.metrics)
    if reports is None:
        return "skipped: another object lifecycle run holds the lock"
    return [r.document() for r in reports]
