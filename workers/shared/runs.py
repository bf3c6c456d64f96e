"""What the two lifecycles' runs share: the refusal of a real run dated in the future, and the scheduled pass over
every repository, one pass at a time across workers and beat replicas."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from redis.lock import Lock

from workers.shared.lakefs.client import LakeFS
from workers.shared.locks import release_quietly

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
