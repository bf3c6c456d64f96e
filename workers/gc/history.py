"""GC run history and the per-repository run lock, in Redis (this module owns their keys)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import redis

from spark_jobs.core.report import upgrade_record
from workers.gc.lease import Holder, RunLease
from workers.shared.locks import named_lock
from workers.shared.redis_script import Step
from workers.shared.runs import newest_records, push_capped

if TYPE_CHECKING:
    from spark_jobs.engine.runtime.redis_ack import Acknowledged
    from workers.shared.services import Services

HISTORY_LENGTH = 1000

# KEYS: the repository's set of commits reported since its last run. ARGV: commit id. 1 when the commit is new.
COUNT_COMMIT_LUA = "return redis.call('SADD', KEYS[1], ARGV[1])"


class GCRuns:
    def __init__(self, client: redis.Redis, prefix: str, url: str | None = None, *,
                 lock_durability: Acknowledged | None = None):
        self.redis = client
        self.prefix = prefix
        self.url = url  # for the deleters' own connections (Spark executors); None: derived from the client
        self.lock_durability = lock_durability  # when its leases and locks count as taken (workers.gc.lease)

    @classmethod
    def of(cls, services: Services) -> GCRuns:
        """The runs of the services' Redis, under their key prefix: how every entry point gets them."""
        return cls(services.redis, services.settings.key_prefix, services.settings.redis_client_url(),
                   lock_durability=services.settings.redis_durability)

    def _key(self, repository_id: str) -> str:
        return f"{self.prefix}:gc-runs:{repository_id}"

    def edit_lock(self, repository_id: str):
        """Serialises ETag check and write of the cleaning policies (lakeFS has no conditional metadata write)."""
        return named_lock(self.redis, self.prefix, f"gc-policies:{repository_id}", seconds=30, blocking_timeout=10,
                          durability=self.lock_durability)

    def _lease_keys(self, repository_id: str) -> tuple[str, str]:
        return f"{self.prefix}:lock:gc:{repository_id}", f"{self.prefix}:gc-holder:{repository_id}"

    def lease(self, repository_id: str, lease_seconds: float) -> RunLease:
        """One GC per repository at a time, across workers, beat replicas and the CLI (``workers.gc.lease``)."""
        return RunLease(self.redis, repository_id, keys=self._lease_keys(repository_id),
                        lease_seconds=lease_seconds, url=self.url, durability=self.lock_durability)

    def running(self, repository_id: str) -> bool:
        """A run holds the repository's lease."""
        return bool(self.redis.exists(self._lease_keys(repository_id)[0]))

    def lease_state(self, repository_id: str) -> tuple[str, Holder | None]:
        """("idle" | "running" | "died", holder): "died" when a run left its holder record and its lease is gone
        (the next run reports it)."""
        lease, holder_key = self._lease_keys(repository_id)
        held, raw = self.redis.mget(lease, holder_key)
        holder = Holder.parse(raw)
        if held is not None:
            return "running", holder
        return ("died", holder) if holder is not None else ("idle", None)

    def _commits(self, repository_id: str) -> str:
        return f"{self.prefix}:gc-commits-since-run:{repository_id}"

    def commit_step(self, repository_id: str, commit_id: str) -> Step:
        """Count a commit or merge the hooks reported since the last run, as a step of the hook's one atomic call
        (``ClockStore.record``); a set, so a redelivered hook counts once."""
        return Step(COUNT_COMMIT_LUA, (self._commits(repository_id),), (commit_id,))

    def commits_since_run(self) -> dict[str, int]:
        """Repository → commits reported since its last run started, for every repository with any."""
        marker = f"{self.prefix}:gc-commits-since-run:"
        keys = list(self.redis.scan_iter(f"{marker}*"))
        if not keys:
            return {}
        pipe = self.redis.pipeline()
        for key in keys:
            pipe.scard(key)
        return {(k.decode() if isinstance(k, bytes) else k)[len(marker):]: int(n)
                for k, n in zip(keys, pipe.execute(), strict=True)}

    def run_started(self, repository_id: str) -> None:
        """Commits made from now on count towards the next run."""
        self.redis.delete(self._commits(repository_id))

    def record(self, repository_id: str, entry: dict) -> None:
        pipe = self.redis.pipeline()
        push_capped(pipe, self._key(repository_id), json.dumps(entry, sort_keys=True, default=str),
                    length=HISTORY_LENGTH)
        pipe.execute()

    def repository_of(self, run_id: str) -> str | None:
        """The repository a recorded run belongs to (run ids name no repository), or None."""
        marker = f"{self.prefix}:gc-runs:"
        for key in sorted(self.redis.scan_iter(f"{marker}*")):
            name = key.decode() if isinstance(key, bytes) else key
            if any(json.loads(x).get("run_id") == run_id for x in self.redis.lrange(name, 0, -1)):
                return name[len(marker):]
        return None

    def history(self, repository_id: str, limit: int = 50) -> list[dict]:
        """The newest records first; an older version's record reads as a new one (``runner``, not ``engine``)."""
        return [upgrade_record(r) for r in newest_records(self.redis, self._key(repository_id), limit)]
