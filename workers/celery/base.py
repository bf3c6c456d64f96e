"""What every domain's Celery tasks share: the worker's services and the errors worth a retry."""

from __future__ import annotations

import redis
from celery import Task

from workers.lakefs.client import Unavailable
from workers.services import Services

# redis-py's ConnectionError and TimeoutError do not derive from the builtins of the same name: both are listed,
# or a Redis blip would fail the task instead of retrying it.
RETRYABLE = (Unavailable, redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, ConnectionError,
             TimeoutError)


def services(task: Task) -> Services:
    return task.app.janitor
