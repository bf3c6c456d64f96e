"""Beat entries of the GC, next to the tasks they fire."""

from __future__ import annotations

from celery.schedules import crontab

from workers.settings import Settings


def beat_schedule(settings: Settings) -> dict[str, dict]:
    return {
        "garbage-collection": {
            "task": "workers.gc.tasks.run_all",
            "schedule": crontab.from_string(settings.gc.schedule),
        },
    }
