"""The base class of every domain's Celery tasks: the retry and acknowledgement options, and the worker's services.

A shared module, so that domains build their tasks without importing the Celery wiring (``workers.celery``)."""

from __future__ import annotations

import redis
from celery import Task

from spark_jobs.engine.runtime.redis_ack import NotReplicated
from workers.shared.lakefs.errors import Unavailable
from workers.shared.services import Services

# redis-py's ConnectionError and TimeoutError do not derive from the builtins of the same name: both are listed,
# or a Redis blip would fail the task instead of retrying it. NotReplicated: a lock or lease no replica acknowledged
# (``workers.shared.locks.Unconfirmed``: a failover under way), not taken; tried again as a blip is.
RETRYABLE = (Unavailable, redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, ConnectionError,
             TimeoutError, NotReplicated)


class JanitorTask(Task):
    """Retried with backoff on the failures that pass, acknowledged once done (a worker lost mid-task redelivers
    it). A task that needs other retry options passes them to ``shared_task`` beside ``base=JanitorTask``."""

    autoretry_for = RETRYABLE
    retry_backoff = True
    max_retries = 3
    acks_late = True

    @property
    def services(self) -> Services:
        """The worker's clients (``workers.celery.app`` hands them to the app)."""
        return self.app.janitor
