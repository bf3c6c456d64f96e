"""The idle clock: each branch's creation time and last write, kept in Redis.

lakeFS OSS records neither, so the service does. Deliveries may be duplicated or reordered, so every update
is a Lua script that only moves a time forward and ignores events older than a deletion it has already seen.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

import redis
from redis.lock import Lock

from workers.shared import redis_script
from workers.shared.locks import named_lock
from workers.shared.redis_script import Step

if TYPE_CHECKING:
    from spark_jobs.engine.runtime.redis_ack import Acknowledged
    from workers.idle_clock.events import ClockKind
    from workers.shared.services import Services

Source = Literal["webhook", "reconciler", "restored"]

# Every script keeps the repository's summary hash (branch -> "created,last_write,first_seen") in step with the
# branch hash, so a lifecycle run reads a whole repository's clocks with one HMGET instead of one HGETALL per branch.
_REFRESH_SUMMARY = """
local function refresh_summary(key, summary, branch)
  local v = redis.call('HMGET', key, 'created_at', 'last_write_at', 'first_seen_at')
  redis.call('HSET', summary, branch, (v[1] or '') .. ',' .. (v[2] or '') .. ',' .. (v[3] or ''))
end
"""

# One change to a branch's clock, as a step of an atomic call (workers.shared.redis_script): a hook's other changes (GC's commit
# count) run in the same script. Written for the receiver's hot path: one HMGET reads all it decides on, one HSET
# writes the branch, and the summary is built from what was read instead of read back.
# KEYS: branch hash, repository summary hash, repository set.
# ARGV: kind (create|write|delete), unix seconds (as _stamp writes them), source, branch id, repository id,
#       head commit ('' if none), tombstone TTL seconds.
RECORD_LUA = """
local key, summary, repos = KEYS[1], KEYS[2], KEYS[3]
local kind, stamp, src, branch, repo, head = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local ts = tonumber(stamp)
local v = redis.call('HMGET', key, 'deleted_at', 'created_at', 'last_write_at', 'first_seen_at', 'head_at')
local deleted, created, written, seen, head_at = v[1], v[2], v[3], v[4], v[5]
if deleted and ts < tonumber(deleted) then return 0 end
if kind == 'delete' then
  -- A creation or write after the deletion belongs to a later life, delivered before this delete: keep it (were
  -- a write of the next life wiped here while its creation is still on the way, the branch would look idle
  -- since its creation). Within one second (lakeFS's event_time has whole seconds) arrival order decides: a
  -- delete and a re-create delivered in order keep the new life; delivered out of order, the new life loses
  -- its creation time and is skipped (or adopted), never deleted early.
  if (created and tonumber(created) > ts) or (written and tonumber(written) > ts) then return 0 end
  redis.call('DEL', key)
  redis.call('HSET', key, 'deleted_at', stamp)
  redis.call('EXPIRE', key, tonumber(ARGV[7]))
  redis.call('HDEL', summary, branch)
  return 1
end
local fields = {}
-- The HEAD a hook reports is news even when its time is not (a write the reconciler already dated in the
-- same second): remembering it keeps the reconciler from counting the same commit again.
-- lakeFS's event_time has whole seconds while a look is timed to the millisecond: within one second the hook's
-- HEAD wins (were it the older one, the next look sees the difference and dates it late, never early).
if head ~= '' and (not head_at or ts >= math.floor(tonumber(head_at))) then
  fields = {'head', head, 'head_at', stamp}
end
local current = created
if kind == 'write' then current = written end
if current and ts <= tonumber(current) then
  if #fields > 0 then redis.call('HSET', key, unpack(fields)) end
  return 0
end
if kind == 'write' then
  written = stamp
  table.insert(fields, 'last_write_at') table.insert(fields, stamp)
  table.insert(fields, 'last_write_src') table.insert(fields, src)
else
  created = stamp
  table.insert(fields, 'created_at') table.insert(fields, stamp)
  table.insert(fields, 'created_src') table.insert(fields, src)
end
redis.call('HSET', key, unpack(fields))
if deleted then
  redis.call('HDEL', key, 'deleted_at')
  redis.call('PERSIST', key)
end
-- The repository set gets every repository with a summary: a summary field is new only next to this SADD (or
-- _OBSERVE's), so an existing one needs none.
if redis.call('HSET', summary, branch, (created or '') .. ',' .. (written or '') .. ',' .. (seen or '')) == 1 then
  redis.call('SADD', repos, repo)
end
return 1
"""

# KEYS: branch hash, repository summary hash, repository set. ARGV: branch, repository, head, fingerprint, now.
_OBSERVE = _REFRESH_SUMMARY + """
local key, summary, repos = KEYS[1], KEYS[2], KEYS[3]
local now = tonumber(ARGV[5])
-- A look that started before a deletion we already know of must not bring the branch back to life.
if now < tonumber(redis.call('HGET', key, 'deleted_at') or '-1') then return 0 end
if now >= tonumber(redis.call('HGET', key, 'head_at') or '-1') then
  redis.call('HSET', key, 'head', ARGV[3], 'head_at', now)
end
-- The next look dates a change of the staged state against observed_at, so it only moves forward. Should two
-- looks land out of order, the older fingerprint stays with the newer time: a change between them then fails
-- to match and is dated at observation, which is late, never early.
redis.call('HSET', key, 'staged', ARGV[4])
if now >= tonumber(redis.call('HGET', key, 'observed_at') or '-1') then
  redis.call('HSET', key, 'observed_at', now)
end
redis.call('HSETNX', key, 'first_seen_at', now)
redis.call('HDEL', key, 'deleted_at')
redis.call('PERSIST', key)
refresh_summary(key, summary, ARGV[1])
redis.call('SADD', repos, ARGV[2])
return 1
"""


@dataclass(frozen=True, slots=True)
class Activity:
    """What a lifecycle evaluation needs of a branch's clock."""

    created_at: datetime | None
    last_write_at: datetime | None
    first_seen_at: datetime | None


TOMBSTONE_TTL_SECONDS = 7 * 24 * 3600


@dataclass(frozen=True)
class BranchClock:
    repository_id: str
    branch_id: str
    created_at: datetime | None = None
    created_src: str | None = None
    last_write_at: datetime | None = None
    last_write_src: str | None = None
    head: str | None = None
    head_at: datetime | None = None  # when that HEAD was reported or observed
    staged_fingerprint: str | None = None
    observed_at: datetime | None = None  # when the reconciler took that fingerprint
    first_seen_at: datetime | None = None

    @property
    def last_activity(self) -> datetime | None:
        """Last write, falling back to creation; a write older than creation belongs to a previous life."""
        times = [t for t in (self.created_at, self.last_write_at) if t is not None]
        return max(times) if times else None


def _stamp(at: datetime) -> str:
    # Milliseconds for what the service itself observes (lakeFS's hook times come in whole seconds).
    return f"{math.floor(at.timestamp() * 1000) / 1000:.3f}"


def _ts(value: str | bytes | None) -> datetime | None:
    return None if value in (None, b"", "") else datetime.fromtimestamp(float(value), UTC)


_NO_ACTIVITY = Activity(None, None, None)


def _activity(value: bytes | None) -> Activity:
    if not value:
        return _NO_ACTIVITY
    created, written, seen = value.split(b",")
    return Activity(_ts(created), _ts(written), _ts(seen))


def _str(value: str | bytes | None) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else value


class ClockStore:
    def __init__(self, client: redis.Redis, prefix: str = "lakefs-janitor", *,
                 lock_durability: Acknowledged | None = None):
        self.redis = client
        self.prefix = prefix
        self.lock_durability = lock_durability  # when its locks count as taken (workers.shared.locks)
        self._observe = client.register_script(_OBSERVE)

    @classmethod
    def of(cls, services: Services) -> ClockStore:
        """The clock in the services' Redis, under their key prefix: how every entry point gets it."""
        return cls(services.redis, services.settings.key_prefix, lock_durability=services.settings.redis_durability)

    def _key(self, repository_id: str, branch_id: str) -> str:
        return f"{self.prefix}:branch:{repository_id}:{branch_id}"

    def _index(self, repository_id: str) -> str:
        return f"{self.prefix}:summary:{repository_id}"

    def _repos(self) -> str:
        return f"{self.prefix}:repositories"

    def change(self, kind: ClockKind, repository_id: str, branch_id: str, *, at: datetime, source: Source = "webhook",
               head: str | None = None) -> Step:
        """One change to a branch's clock (create, write or delete), as a step ``record`` runs, alone or with the
        steps of other stores that the same event changes. Times only move forward; a time older than a deletion
        already seen changes nothing."""
        keys = (self._key(repository_id, branch_id), self._index(repository_id), self._repos())
        return Step(RECORD_LUA, keys, (kind, _stamp(at), source, branch_id, repository_id, head or "",
                                       TOMBSTONE_TTL_SECONDS))

    def record(self, change: Step, *also: Step, durability: Acknowledged | None = None) -> bool:
        """Apply a ``change`` and the other stores' steps ``also``, in one atomic call and one round trip; whether
        the clock moved (False: the change was older than what is known). With ``durability``, done only once
        replicas acknowledged it (``redis_script.run_acknowledged``): the receiver's 200."""
        if durability is None:
            return bool(redis_script.run(self.redis, (change, *also))[0])
        return bool(redis_script.run_acknowledged(self.redis, (change, *also), durability)[0])

    def record_created(self, repository_id: str, branch_id: str, at: datetime, *, source: Source = "webhook",
                       head: str | None = None) -> bool:
        return self.record(self.change("create", repository_id, branch_id, at=at, source=source, head=head))

    def record_write(self, repository_id: str, branch_id: str, at: datetime, *, source: Source = "webhook",
                     head: str | None = None) -> bool:
        return self.record(self.change("write", repository_id, branch_id, at=at, source=source, head=head))

    def record_deleted(self, repository_id: str, branch_id: str, at: datetime) -> bool:
        return self.record(self.change("delete", repository_id, branch_id, at=at))

    def observe(self, repository_id: str, branch_id: str, *, head: str, fingerprint: str, now: datetime) -> bool:
        """Remember what the reconciler saw, and when the branch was first seen at all."""
        keys = [self._key(repository_id, branch_id), self._index(repository_id), self._repos()]
        return bool(self._observe(keys=keys, args=[branch_id, repository_id, head, fingerprint, _stamp(now)]))

    def get(self, repository_id: str, branch_id: str) -> BranchClock:
        return self.get_many(repository_id, [branch_id])[branch_id]

    def get_many(self, repository_id: str, branch_ids: Iterable[str]) -> dict[str, BranchClock]:
        branch_ids = list(branch_ids)
        pipe = self.redis.pipeline(transaction=False)
        for branch_id in branch_ids:
            pipe.hgetall(self._key(repository_id, branch_id))
        return {
            branch_id: self._clock(repository_id, branch_id, raw)
            for branch_id, raw in zip(branch_ids, pipe.execute(), strict=True)
        }

    def activity_many(self, repository_id: str, branch_ids: Iterable[str]) -> dict[str, Activity]:
        """Creation, last write and first sighting of many branches in one round trip."""
        branch_ids = list(branch_ids)
        if not branch_ids:
            return {}
        raw = self.redis.hmget(self._index(repository_id), branch_ids)
        return {branch_id: _activity(value) for branch_id, value in zip(branch_ids, raw, strict=True)}

    def reconcile_lock(self, repository_id: str, seconds: float) -> Lock:
        """One reconcile pass per repository at a time (passes share a cursor)."""
        return named_lock(self.redis, self.prefix, f"reconcile:{repository_id}", seconds=seconds,
                          durability=self.lock_durability)

    def _cursor(self, repository_id: str) -> str:
        return f"{self.prefix}:reconcile-cursor:{repository_id}"

    def reconcile_cursor(self, repository_id: str) -> str:
        """The last branch a bounded reconcile pass reached ('' to start from the first)."""
        return _str(self.redis.get(self._cursor(repository_id))) or ""

    def set_reconcile_cursor(self, repository_id: str, branch_id: str | None) -> None:
        if branch_id:
            self.redis.set(self._cursor(repository_id), branch_id)
        else:
            self.redis.delete(self._cursor(repository_id))

    def known_branches(self, repository_id: str) -> set[str]:
        return {_str(b) for b in self.redis.hkeys(self._index(repository_id))}

    @staticmethod
    def _clock(repository_id: str, branch_id: str, raw: dict) -> BranchClock:
        get = {_str(k): v for k, v in raw.items()}.get
        return BranchClock(
            repository_id=repository_id,
            branch_id=branch_id,
            created_at=_ts(get("created_at")),
            created_src=_str(get("created_src")),
            last_write_at=_ts(get("last_write_at")),
            last_write_src=_str(get("last_write_src")),
            head=_str(get("head")),
            head_at=_ts(get("head_at")),
            staged_fingerprint=_str(get("staged")),
            observed_at=_ts(get("observed_at")),
            first_seen_at=_ts(get("first_seen_at")),
        )
