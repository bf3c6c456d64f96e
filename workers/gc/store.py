"""GC run history and the per-repository run lock, in Redis (this module owns their keys)."""

from __future__ import annotations

import json

import redis
from redis.lock import Lock

from workers.locks import named_lock

HISTORY_LENGTH = 1000


class GCRuns:
    def __init__(self, client: redis.Redis, prefix: str):
        self.redis = client
        self.prefix = prefix

    def _key(self, repository_id: str) -> str:
        return f"{self.prefix}:gc-runs:{repository_id}"

    def lock(self, repository_id: str, seconds: float) -> Lock:
        """One GC per repository at a time, across workers, beat replicas and the CLI."""
        return named_lock(self.redis, self.prefix, f"gc:{repository_id}", seconds=seconds)

    def record(self, repository_id: str, entry: dict) -> None:
        pipe = self.redis.pipeline()
        pipe.lpush(self._key(repository_id), json.dumps(entry, sort_keys=True, default=str))
        pipe.ltrim(self._key(repository_id), 0, HISTORY_LENGTH - 1)
        pipe.execute()

    def history(self, repository_id: str, limit: int = 50) -> list[dict]:
        return [json.loads(x) for x in self.redis.lrange(self._key(repository_id), 0, limit - 1)]
