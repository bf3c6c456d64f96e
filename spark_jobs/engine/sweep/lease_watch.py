"""The deleting side of a GC run's lease: before each batch of deletions, whoever deletes (a thread in the
worker, a Spark executor, the Spark driver's watch) asks Redis whether the run still holds its repository's
lease and whether the process that started the run renewed it lately.

Only the starter renews the lease (``workers.gc.lease``). A Spark driver whose starter died (SIGKILL, OOM, a node
gone) therefore sees the renewals stop and stops deleting within ``stale_ms``, long before the lease itself
expires and lets the next run in: an orphan never deletes beside a new run. The age of the last renewal is read
from the key's own TTL (``lease_ms - PTTL``), on Redis's clock, so no two machines' clocks are compared.

With ``replica_acks`` (the starter's setting, ``redis_replica_acks``, carried in the reference to both runners), a
check counts only once that many replicas acknowledged it: it rewrites the lease as it is (same token, same
expiry) and waits for the replicas (``redis_ack``). A primary that hung and resumed after the Sentinels promoted its
replica still answers with the lease as it was, for seconds, while the new primary may have let it expire and
given it to the next run; it has no replica left to acknowledge the check, so that answer is never believed.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import redis

from spark_jobs.engine.runtime.redis_ack import Acknowledged, eval_acknowledged
from spark_jobs.engine.runtime.redis_connect import connect

# KEYS: the lease. ARGV: the run's token. The remaining TTL (ms) while the token holds it; -3 when it does not.
CHECK_LUA = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PTTL', KEYS[1]) end return -3"
# The same, as a write that changes nothing (the same value, KEEPTTL: the same expiry), so that WAIT has this
# check's offset to wait for: without a write of its own a connection counts as acknowledged by any replica still
# linked, however far behind, or by the link a resumed old primary has not yet noticed is gone.
CONFIRM_LUA = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -3 end
redis.call('SET', KEYS[1], ARGV[1], 'KEEPTTL')
return redis.call('PTTL', KEYS[1])"""


class LeaseLost(RuntimeError):
    """The run no longer owns its repository's lease, or cannot confirm it: it must not delete any more."""

    reason = "lease-lost"


@dataclass(frozen=True)
class LeaseRef:
    """What a deleter needs to check the lease (picklable; travels to executors inside the task)."""

    url: str  # the Redis holding the lease, redis:// or sentinel:// (credentials included: never logged, never on a command line)
    key: str
    token: str
    lease_ms: int
    stale_ms: int  # the longest a deleter goes on without a renewal by the starter
    replica_acks: int = 0  # replicas that must acknowledge a check (0: the primary's answer)
    confirm_seconds: float = 3.0  # how long a check is tried for that before the lease counts as lost

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> LeaseRef:
        try:
            raw = json.loads(text)
            return cls(str(raw["url"]), str(raw["key"]), str(raw["token"]), int(raw["lease_ms"]),
                       int(raw["stale_ms"]), int(raw.get("replica_acks", 0)),
                       float(raw.get("confirm_seconds", cls.confirm_seconds)))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"not a GC lease reference: {exc}") from None


class LeaseWatch:
    """Checks a ``LeaseRef``; one Redis round trip per check. ``client`` reuses a connection the caller has."""

    def __init__(self, ref: LeaseRef, client: redis.Redis | None = None) -> None:
        self.ref = ref
        self._client = client

    @property
    def client(self) -> redis.Redis:
        if self._client is None:
            self._client = connect(self.ref.url, socket_timeout=5, socket_connect_timeout=5)
        return self._client

    def check(self) -> None:
        """Return when the run may delete one more batch; raise ``LeaseLost`` saying why not."""
        try:
            ttl = int(self._ask())
        except redis.RedisError as exc:
            raise LeaseLost(f"the run's lease could not be confirmed (Redis: {exc}); stopped before deleting "
                            "more, the next run deletes the rest") from None
        if ttl < 0:
            raise LeaseLost("the run no longer holds its repository's lease (it expired, or another run took it "
                            "over); stopped before deleting more, the next run deletes the rest")
        silent = self.ref.lease_ms - ttl
        if silent > self.ref.stale_ms:
            raise LeaseLost(f"the process that started the run has not renewed its lease for {silent / 1000:.1f}s "
                            "(it died, or cannot reach Redis); stopped before deleting more")

    def _ask(self) -> int:
        ref = self.ref
        if not ref.replica_acks:
            return self.client.eval(CHECK_LUA, 1, ref.key, ref.token)
        return eval_acknowledged(self.client, CONFIRM_LUA, (ref.key,), args=(ref.token,),
                                 durability=Acknowledged(ref.replica_acks, ref.confirm_seconds))

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
