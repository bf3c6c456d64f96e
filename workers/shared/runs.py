"""What the domains' runs share: the refusal of a real run dated in the future, the scheduled pass over every
repository (one pass at a time across workers and beat replicas), the locks of a lifecycle's records, and the
shape of a run history in Redis (a list, newest first, capped)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, TypeVar

import redis
from redis.lock import Lock

from workers.shared.locks import named_lock, release_quietly

if TYPE_CHECKING:
    from typing import Self

    from spark_jobs.engine.runtime.redis_ack import Acknowledged
    from workers.shared.lakefs.client import LakeFS
    from workers.shared.services import Services

T = TypeVar("T")

# Clocks of two hosts may disagree a little; more than this ahead is a date typed by someone.
FUTURE_TOLERANCE = timedelta(seconds=5)


class FutureRunRefused(ValueError):
    """A real run dated in the future: it would delete what has not reached its age yet."""


def refuse_future(now: datetime, *, would: str) -> None:
    """Raise FutureRunRefused for a real run dated ahead of this host's clock; ``would`` says what it would do."""
    if now > datetime.now(UTC) + FUTURE_TOLERANCE:
        raise FutureRunRefused(f"a run dated {now.isoformat()} is in the future and {would}; only a dry run may "
                               "look ahead")


def run_all(lakefs: LakeFS, lock: Lock, run: Callable[[str], T], *, what: str) -> list[T] | None:
    """``run(repository_id)`` for every repository in turn while holding ``lock`` (the pass's own, not a
    repository's); None when another pass holds it. A repository whose run fails is logged and left out."""
    if not lock.acquire():
        return None
    try:
        return lakefs.each_repository(run, what=what)
    finally:
        release_quietly(lock, what)


class LifecycleLocks:
    """The locks a lifecycle keeps in Redis: its document editors' and its runs'. A domain's records class names
    them (``EDIT_LOCK``, ``RUN_LOCK``) and adds its own keys."""

    EDIT_LOCK: str
    RUN_LOCK: str

    def __init__(self, client: redis.Redis, prefix: str, *, lock_durability: Acknowledged | None = None):
        self.redis = client
        self.prefix = prefix
        self.lock_durability = lock_durability  # when its locks count as taken (workers.shared.locks)

    @classmethod
    def of(cls, services: Services) -> Self:
        """The records in the services' Redis, under their key prefix."""
        return cls(services.redis, services.settings.key_prefix, lock_durability=services.settings.redis_durability)

    def edit_lock(self, repository_id: str) -> Lock:
        """Serialises the ETag check and the write among everyone who edits through lakefs-janitor: lakeFS has no
        conditional write for repository metadata, so without it two writers holding the same ETag could both win."""
        return named_lock(self.redis, self.prefix, f"{self.EDIT_LOCK}:{repository_id}", seconds=30,
                          blocking_timeout=10, durability=self.lock_durability)

    def run_lock(self, repository_id: str | None, seconds: float) -> Lock:
        """One real run per repository (or, with None, one pass over all of them) across workers and replicas."""
        name = f"{self.RUN_LOCK}-all" if repository_id is None else f"{self.RUN_LOCK}:{repository_id}"
        return named_lock(self.redis, self.prefix, name, seconds=seconds, durability=self.lock_durability)


def push_capped(pipe: redis.client.Pipeline, key: str, text: str, *, length: int) -> None:
    """Add ``text`` at the head of the history list ``key`` and keep its ``length`` newest (in ``pipe``)."""
    pipe.lpush(key, text)
    pipe.ltrim(key, 0, length - 1)


def newest_records(client: redis.Redis, key: str, limit: int) -> list[dict]:
    """The ``limit`` newest JSON records of the history list ``key``, newest first."""
    return [json.loads(x) for x in client.lrange(key, 0, limit - 1)]
