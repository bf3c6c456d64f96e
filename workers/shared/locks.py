"""Named Redis locks that expire: one run at a time across workers and replicas, never blocked forever by a
crashed holder."""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Protocol

import redis
from redis.lock import Lock

log = logging.getLogger(__name__)


def named_lock(client: redis.Redis, prefix: str, name: str, *, seconds: float,
               blocking_timeout: float | None = None) -> Lock:
    """Without blocking_timeout, acquire() returns False at once when someone else holds it."""
    if blocking_timeout is None:
        return client.lock(f"{prefix}:lock:{name}", timeout=seconds, blocking=False)
    return client.lock(f"{prefix}:lock:{name}", timeout=seconds, blocking_timeout=blocking_timeout)


class EditLocks(Protocol):
    """A domain's store that serialises the edits of a document stored on the repository (lakeFS has no
    conditional write for repository metadata): everyone who edits it through lakefs-janitor holds this lock."""

    def edit_lock(self, repository_id: str) -> AbstractContextManager: ...


def release_quietly(lock: Lock, what: str) -> None:
    """Release at the end of a run; a lock that already expired, or a Redis that is gone, must not replace the
    run's own outcome (the lock expires by itself)."""
    try:
        lock.release()
    except redis.exceptions.LockError:
        log.warning("%s lock expired before the run ended; raise its timeout", what)
    except redis.RedisError as exc:
        log.warning("could not release the %s lock: %s", what, exc)


def still_held(lock: Lock) -> Callable[[], bool]:
    """A check a run asks before each deletion: renews the lock to its full timeout, False once it was lost (the
    run outlived it and another may have started)."""

    def check() -> bool:
        try:
            lock.reacquire()
        except redis.exceptions.LockError:
            return False
        return True

    return check
