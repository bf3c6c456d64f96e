"""Beat entries of the branch lifecycle, next to the tasks they fire."""

from __future__ import annotations

from celery.schedules import crontab

from workers.shared.settings import Settings


def beat_schedule(settings: Settings) -> dict[str, dict]:
    return {
        "branch-lifecycle": {
            "task": "workers.branch_lifecycle.tasks.run_all",
            "schedule": crontab.from_string(settings.lifecycle_schedule),
        },
    }
