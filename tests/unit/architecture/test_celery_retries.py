"""Every task retries on the failures that pass: lakeFS unavailable and Redis blips."""

import redis

from workers.branch_lifecycle import tasks as lifecycle_tasks
from workers.gc import tasks as gc_tasks
from workers.idle_clock import tasks as clock_tasks
from workers.shared.lakefs.errors import Unavailable

TASKS = [clock_tasks.reconcile_repository, clock_tasks.reconcile_all, lifecycle_tasks.run_repository_task,
         lifecycle_tasks.run_all_task, gc_tasks.run_repository_task, gc_tasks.run_all_task, gc_tasks.trigger_due_task]


def test_redis_errors_are_retried():
    # redis-py's ConnectionError/TimeoutError are not the builtins of the same name.
    assert not issubclass(redis.exceptions.ConnectionError, ConnectionError)
    for task in TASKS:
        for exc in (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, Unavailable, TimeoutError):
            assert issubclass(exc, tuple(task.autoretry_for)), (task.name, exc)
