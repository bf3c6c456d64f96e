"""Beat entries of the GC, next to the tasks they fire."""

from __future__ import annotations

from celery.schedules import crontab

from workers.shared.settings import Settings


def beat_schedule(settings: Settings) -> dict[str, dict]:
    entries = {
        "garbage-collection": {
            "task": "workers.gc.tasks.run_all",
            "schedule": crontab.from_string(settings.gc.schedule),
        },
    }
    if settings.gc.trigger_commits:  # event-driven cleaning: look for due repositories every so often
        entries["garbage-collection-trigger"] = {
            "task": "workers.gc.tasks.trigger_due",
            "schedule": float(settings.gc.trigger_check_seconds),
        }
    return entries
