"""Celery app factory: broker and backend on Redis, UTC beat schedule from settings."""

from __future__ import annotations

from celery import Celery

from workers.runtime import Services
from workers.schedule import beat_schedule
from workers.settings import Settings


def create_celery(settings: Settings, services: Services | None = None) -> Celery:
    app = Celery("lakefs_janitor", set_as_current=False)
    app.conf.update(
        broker_url=settings.celery_broker_url,
        result_backend=settings.redis_url,
        timezone="UTC",
        enable_utc=True,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        # Unacked tasks are redelivered after this; keep it above the longest run.
        broker_transport_options={"visibility_timeout": max(settings.lifecycle_lock_seconds * 2, 7200)},
        result_expires=24 * 3600,
        beat_schedule=beat_schedule(settings),
        broker_connection_retry_on_startup=True,
        imports=("workers.tasks",),
    )
    app.janitor = services or Services(settings)  # type: ignore[attr-defined]
    return app
