"""Beat entries of the idle clock, next to the tasks they fire."""

from __future__ import annotations

from celery.schedules import crontab

from workers.shared.settings import Settings


def beat_schedule(settings: Settings) -> dict[str, dict]:
    return {
        "reconcile-idle-clock": {
            "task": "workers.idle_clock.tasks.reconcile_all",
            "schedule": crontab.from_string(settings.reconcile_schedule),
        },
    }
