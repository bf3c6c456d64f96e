"""Named Redis locks that expire: one run at a time across workers and replicas, never blocked forever by a
crashed holder.

With replicas to wait for (``Settings.redis_durability``: 1 with Sentinel), a lock is taken and renewed only once
that many replicas acknowledged it (``AcknowledgedLock``): a failover then keeps every lock a holder believes it
has. Without that, a primary that hung and resumed after the Sentinels promoted its replica took and renewed locks
that the new primary never saw, for seconds, beside holders of the same locks on the new primary.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

import redis
from redis.lock import Lock

from spark_jobs.engine.runtime.redis_ack import Acknowledged, NotReplicated, eval_acknowledged, unconfirmed

log = logging.getLogger(__name__)

# KEYS: the lock. ARGV: token, ms. Take it when free, or again when it is already ours (an attempt that timed out
# may have taken it: the next one must not see it as someone else's). 1 taken, 0 held by another.
TAKE_LUA = """
local held = redis.call('GET', KEYS[1])
if held and held ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1"""


class Unconfirmed(NotReplicated):
    """A lock (or GC lease) taken or renewed on the primary that not enough replicas acknowledged in time: a
    failover could lose it, so it counts as not taken (renewed: as lost). The message says which and what to do."""


class AcknowledgedLock(Lock):
    """A redis-py Lock taken and renewed only once ``durability.replicas`` replicas acknowledged it (WAIT), tried
    on the primary the Sentinels name for ``durability.budget_seconds``. Taking it raises ``Unconfirmed`` when that
    cannot be confirmed (after releasing what an attempt may have taken); renewing it does too, and ``still_held``
    counts that as lost. A release is not confirmed: one a failover loses leaves the lock to expire."""

    def __init__(self, client: redis.Redis, name: str, *, durability: Acknowledged, **options: Any) -> None:
        super().__init__(client, name, **options)
        self.durability = durability

    def _ms(self) -> int:
        return int(self.timeout * 1000)

    def do_acquire(self, token: str | bytes) -> bool:
        try:
            return bool(eval_acknowledged(self.redis, TAKE_LUA, (self.name,), args=(token, self._ms()),
                                          durability=self.durability))
        except redis.RedisError as exc:
            self._forget(token)
            if not unconfirmed(exc):
                raise
            raise Unconfirmed(f"the lock {self.name} could not be confirmed ({exc}; Redis failing over, or no "
                              "replica in sync): not taken, nothing was run; the next run tries again") from None

    def do_reacquire(self) -> bool:
        try:
            renewed = eval_acknowledged(self.redis, self.LUA_REACQUIRE_SCRIPT, (self.name,),
                                        args=(self.local.token, self._ms()), durability=self.durability)
        except redis.RedisError as exc:
            if not unconfirmed(exc):
                raise
            raise Unconfirmed(f"the renewal of the lock {self.name} could not be confirmed ({exc}; Redis failing "
                              "over, or no replica in sync): it counts as lost") from None
        if not renewed:
            raise redis.exceptions.LockNotOwnedError("Cannot reacquire a lock that's no longer owned",
                                                     lock_name=self.name)
        return True

    def _forget(self, token: str | bytes) -> None:
        """Best effort: an attempt that ran but was not confirmed leaves no lock to wait for on the primary."""
        try:
            self.lua_release(keys=[self.name], args=[token], client=self.redis)
        except redis.RedisError:
            pass  # it expires by itself


def named_lock(client: redis.Redis, prefix: str, name: str, *, seconds: float,
               blocking_timeout: float | None = None, durability: Acknowledged | None = None) -> Lock:
    """Without blocking_timeout, acquire() returns False at once when someone else holds it. With ``durability``
    asking for replicas, an ``AcknowledgedLock``; otherwise redis-py's own, the primary's answer."""
    options: dict[str, Any] = ({"blocking": False} if blocking_timeout is None
                               else {"blocking_timeout": blocking_timeout})
    if durability is not None and durability.replicas:
        return AcknowledgedLock(client, f"{prefix}:lock:{name}", timeout=seconds, durability=durability, **options)
    return client.lock(f"{prefix}:lock:{name}", timeout=seconds, **options)


class EditLocks(Protocol):
    """A domain's store that serialises the edits of a document stored on the repository (lakeFS has no
    conditional write for repository metadata): everyone who edits it through lakefs-janitor holds this lock."""

    def edit_lock(self, repository_id: str) -> AbstractContextManager: ...


# A Sentinel failover takes a few seconds (down-after-milliseconds, then an election); an unreleased lock blocks
# the next run for its whole timeout (an hour for a lifecycle run), so the release waits out a failover first.
RELEASE_PATIENCE_SECONDS = 30.0


def release_quietly(lock: Lock, what: str, *, patience: float = RELEASE_PATIENCE_SECONDS) -> None:
    """Release at the end of a run, through a connection loss of up to ``patience`` seconds (a failover): a lock
    that already expired, or a Redis still gone after that, must not replace the run's own outcome (the lock
    expires by itself)."""
    token = lock.local.token
    deadline, pause, again = time.monotonic() + patience, 0.25, False
    while True:
        try:
            lock.do_release(token) if again else lock.release()  # release() forgets the token before it asks
            return
        except redis.exceptions.LockError:
            if not again:
                log.warning("%s lock expired before the run ended; raise its timeout", what)
            return  # again: an attempt whose answer was lost released it (or it expired meanwhile)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            if time.monotonic() + pause >= deadline:
                log.warning("could not release the %s lock within %.0fs (it expires by itself): %s", what,
                            patience, exc)
                return
            log.info("releasing the %s lock failed (%s); trying again in %.2fs", what, exc, pause)
        except redis.RedisError as exc:
            log.warning("could not release the %s lock: %s", what, exc)
            return
        time.sleep(pause)
        pause, again = min(pause * 2, 2.0), True


def still_held(lock: Lock) -> Callable[[], bool]:
    """A check a run asks before each deletion: renews the lock to its full timeout, False once it was lost (the
    run outlived it and another may have started) or its renewal could not be confirmed (``AcknowledgedLock``)."""

    def check() -> bool:
        try:
            lock.reacquire()
        except redis.exceptions.LockError:
            return False
        except Unconfirmed as exc:
            log.warning("%s; the run stops", exc)
            return False
        return True

    return check
