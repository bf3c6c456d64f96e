"""The beat schedule: one declaration, next to the tasks it fires."""

from __future__ import annotations

from celery.schedules import crontab

from workers.settings import Settings


def beat_schedule(settings: Settings) -> dict[str, dict]:
    return {
        "reconcile-idle-clock": {
            "task": "workers.tasks.reconcile_all",
            "schedule": crontab.from_string(settings.reconcile_schedule),
        },
        "branch-lifecycle": {
            "task": "workers.tasks.lifecycle_run_all",
            "schedule": crontab.from_string(settings.lifecycle_schedule),
        },
    }
