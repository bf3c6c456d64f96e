"""Writes that count only once replicas acknowledged them (Redis ``WAIT``), tried again on the primary the Sentinels
name then.

Here, in ``spark_jobs``, because a GC run's deleters (a Spark executor, the Spark driver's lease guard) confirm the
run's lease this way and must not import ``workers``; the receiver's hooks, the lifecycle locks and the GC lease's
starter use the same functions (``workers.shared.redis_clients`` builds the clients).

Why a replica's acknowledgement: Sentinel's replication is asynchronous. A primary that hangs (SIGSTOP, a VM
pause, a partition) while the Sentinels promote its replica runs its pending commands when it resumes and answers
them as if they counted, until the Sentinels demote it (seconds later) and it throws its data away. A write that a
replica acknowledged is on the node a failover promotes (Sentinel promotes the replica furthest ahead), and a
resumed old primary has no replica left to acknowledge anything.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import redis
from redis.client import Pipeline


class NotReplicated(redis.RedisError):
    """The primary took a write that no replica acknowledged in time: a failover could lose it."""


@dataclass(frozen=True)
class Acknowledged:
    """A write counts once ``replicas`` replicas acknowledged it (Redis WAIT; 0: the primary's answer), tried
    again for up to ``budget_seconds``."""

    replicas: int
    budget_seconds: float


# A primary being demoted, an isolated one that `min-replicas-to-write` stops, a replica still loading: the next
# attempt, on the primary the Sentinels name then, may succeed.
_RETRYABLE_REPLIES = ("NOREPLICAS", "READONLY", "MASTERDOWN", "LOADING")
WAIT_MS = 500  # below the receiver's 1 s socket time-out, far above a healthy replica's lag


def _retryable(exc: Exception) -> bool:
    if isinstance(exc, redis.ConnectionError | redis.TimeoutError | NotReplicated):
        return True
    return isinstance(exc, redis.ResponseError) and str(exc).startswith(_RETRYABLE_REPLIES)


def unconfirmed(exc: Exception) -> bool:
    """Redis answered, but not with a write replicas acknowledged: no replica did in time, or the node refused
    writes for want of replicas or for being one (as opposed to Redis not answering at all)."""
    return isinstance(exc, NotReplicated) or (isinstance(exc, redis.ResponseError) and _retryable(exc))


def write_acknowledged(client: redis.Redis, send: Callable[[redis.Redis | Pipeline], Any], *,
                       durability: Acknowledged, recover: Callable[[Exception], bool] | None = None) -> Any:
    """``send(client)``'s result; with replicas to wait for, ``send`` queues its command on a pipeline followed by
    ``WAIT replicas`` on the same connection, in one round trip, and its result counts once acknowledged. Attempts
    go on for ``budget_seconds``: after a failed one the client's idle connections are dropped, so the next asks the
    Sentinels for the primary again (redis-py's own retries reconnect to the address they had: redis/redis-py#3874).
    The client should make one attempt per command with a short socket time-out (``redis_client(...,
    timeout_seconds=1, retries=False)``): a hung primary then costs one attempt ~1 s. The commands must be safe to
    repeat: an attempt that timed out may have run. ``recover(exc)`` may repair an error and ask for an immediate
    new attempt (a script Redis does not know)."""
    deadline = time.monotonic() + durability.budget_seconds
    delay = 0.05
    while True:
        try:
            if not durability.replicas:
                return send(client)
            pipe = client.pipeline(transaction=False)
            send(pipe)
            result, acknowledged = pipe.wait(durability.replicas, WAIT_MS).execute()
            if acknowledged < durability.replicas:
                raise NotReplicated(f"{acknowledged} of {durability.replicas} replica(s) acknowledged the write "
                                    f"within {WAIT_MS} ms")
            return result
        except Exception as exc:  # noqa: BLE001 - sorted below: retried, or raised as it came
            error = exc
            if recover is not None and time.monotonic() < deadline:
                try:
                    if recover(exc):
                        continue
                except Exception as again:  # noqa: BLE001
                    error = again
            if not _retryable(error) or time.monotonic() + delay >= deadline:
                raise error from (exc if error is not exc else None)
            client.connection_pool.disconnect(inuse_connections=False)
            time.sleep(delay)
            delay = min(delay * 2, 0.4)


def eval_acknowledged(client: redis.Redis, script: str, keys: Sequence[str], *, args: Sequence[Any],
                      durability: Acknowledged | None) -> Any:
    """One Lua script (safe to repeat: see ``write_acknowledged``), acknowledged by ``durability.replicas``
    replicas; without ``durability``, the primary's answer, as a plain EVAL. The script must write something, or
    WAIT has nothing to wait for: a connection that never wrote is "acknowledged" by any replica still linked."""
    if durability is None or not durability.replicas:
        return client.eval(script, len(keys), *keys, *args)
    return write_acknowledged(client, lambda c: c.eval(script, len(keys), *keys, *args), durability=durability)
