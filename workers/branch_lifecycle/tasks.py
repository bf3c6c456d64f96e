"""Thin Celery tasks of the branch lifecycle: one repository, or every repository in turn."""

from __future__ import annotations

from datetime import UTC, datetime

from celery import shared_task

from workers.idle_clock.store import ClockStore
from workers.shared.task_base import JanitorTask


@shared_task(bind=True, base=JanitorTask, name="workers.branch_lifecycle.tasks.run_repository")
def run_repository_task(self: JanitorTask, repository_id: str, dry_run: bool = False) -> dict:
    from workers.branch_lifecycle.run import LifecycleOptions, run_repository  # noqa: PLC0415

    s = self.services
    report = run_repository(s.lakefs, ClockStore.of(s), repository_id, now=datetime.now(UTC),
                            options=LifecycleOptions.from_settings(s.settings), dry_run=dry_run, metrics=s.metrics)
    return _summary(report)


@shared_task(bind=True, base=JanitorTask, name="workers.branch_lifecycle.tasks.run_all")
def run_all_task(self: JanitorTask) -> list[dict] | str:
    from workers.branch_lifecycle.run import LifecycleOptions  # noqa: PLC0415
    from workers.branch_lifecycle.scheduled import run_all  # noqa: PLC0415

    s = self.services
    reports = run_all(s.lakefs, ClockStore.of(s), datetime.now(UTC), options=LifecycleOptions.from_settings(s.settings),
                      metrics=s.metrics)
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
