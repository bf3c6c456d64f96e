"""The idle clock: each branch's creation time and last write, kept in Redis.

lakeFS OSS records neither, so the service does. Deliveries may be duplicated or reordered, so every update
is a Lua script that only moves a time forward and ignores events older than a deletion it has already seen.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

import redis

Source = Literal["webhook", "reconciler", "adopted"]

# KEYS: branch hash, repository's branch set, repository set.
# ARGV: kind (create|write|delete), unix seconds, source, branch id, repository id, head commit ('' if none),
#       tombstone TTL seconds.
_RECORD = """
local key, index, repos = KEYS[1], KEYS[2], KEYS[3]
local kind, ts, src, branch, repo, head = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local deleted = tonumber(redis.call('HGET', key, 'deleted_at') or '-1')
if ts < deleted then return 0 end
if kind == 'delete' then
  local created = tonumber(redis.call('HGET', key, 'created_at') or '-1')
  if created > ts then return 0 end
  redis.call('DEL', key)
  redis.call('HSET', key, 'deleted_at', ts)
  redis.call('EXPIRE', key, tonumber(ARGV[7]))
  redis.call('SREM', index, branch)
  return 1
end
local field = 'created_at'
if kind == 'write' then field = 'last_write_at' end
local current = tonumber(redis.call('HGET', key, field) or '-1')
if ts <= current then return 0 end
redis.call('HDEL', key, 'deleted_at')
redis.call('PERSIST', key)
redis.call('HSET', key, field, ts, field == 'created_at' and 'created_src' or 'last_write_src', src)
if head ~= '' then
  local seen = tonumber(redis.call('HGET', key, 'head_at') or '-1')
  if ts >= seen then redis.call('HSET', key, 'head', head, 'head_at', ts) end
end
redis.call('SADD', index, branch)
redis.call('SADD', repos, repo)
return 1
"""

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
    staged_fingerprint: str | None = None
    first_seen_at: datetime | None = None

    @property
    def last_activity(self) -> datetime | None:
        """Last write, falling back to creation; a write older than creation belongs to a previous life."""
        times = [t for t in (self.created_at, self.last_write_at) if t is not None]
        return max(times) if times else None


def _ts(value: str | bytes | None) -> datetime | None:
    return None if value in (None, b"", "") else datetime.fromtimestamp(float(value), UTC)


def _str(value: str | bytes | None) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else value


class ClockStore:
    def __init__(self, client: redis.Redis, prefix: str = "lakefs-janitor"):
        self.redis = client
        self.prefix = prefix
        self._record = client.register_script(_RECORD)

    def _key(self, repository_id: str, branch_id: str) -> str:
        return f"{self.prefix}:branch:{repository_id}:{branch_id}"

    def _index(self, repository_id: str) -> str:
        return f"{self.prefix}:branches:{repository_id}"

    def _repos(self) -> str:
        return f"{self.prefix}:repositories"

    def _run(self, kind: str, repository_id: str, branch_id: str, at: datetime, source: str, head: str | None) -> bool:
        keys = [self._key(repository_id, branch_id), self._index(repository_id), self._repos()]
        args = [kind, int(at.timestamp()), source, branch_id, repository_id, head or "", TOMBSTONE_TTL_SECONDS]
        return bool(self._record(keys=keys, args=args))

    def record_created(self, repository_id: str, branch_id: str, at: datetime, source: Source = "webhook",
                       head: str | None = None) -> bool:
        return self._run("create", repository_id, branch_id, at, source, head)

    def record_write(self, repository_id: str, branch_id: str, at: datetime, source: Source = "webhook",
                     head: str | None = None) -> bool:
        return self._run("write", repository_id, branch_id, at, source, head)

    def record_deleted(self, repository_id: str, branch_id: str, at: datetime) -> bool:
        return self._run("delete", repository_id, branch_id, at, "webhook", None)

    def observe(self, repository_id: str, branch_id: str, head: str, fingerprint: str, now: datetime) -> None:
        """Remember what the reconciler saw, and when the branch was first seen at all."""
        key = self._key(repository_id, branch_id)
        pipe = self.redis.pipeline()
        pipe.hset(key, mapping={"head": head, "head_at": int(now.timestamp()), "staged": fingerprint})
        pipe.hsetnx(key, "first_seen_at", int(now.timestamp()))
        pipe.persist(key)
        pipe.hdel(key, "deleted_at")
        pipe.sadd(self._index(repository_id), branch_id)
        pipe.sadd(self._repos(), repository_id)
        pipe.execute()

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

    def known_branches(self, repository_id: str) -> set[str]:
        return {_str(b) for b in self.redis.smembers(self._index(repository_id))}

    def forget(self, repository_id: str, branch_id: str) -> None:
        """Drop what is known of a branch that no longer exists (seen by the reconciler, no tombstone)."""
        pipe = self.redis.pipeline()
        pipe.delete(self._key(repository_id, branch_id))
        pipe.srem(self._index(repository_id), branch_id)
        pipe.execute()

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
            staged_fingerprint=_str(get("staged")),
            first_seen_at=_ts(get("first_seen_at")),
        )
