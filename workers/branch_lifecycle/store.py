"""Branch lifecycle policies stored on the repository itself, in lakeFS repository metadata (a
``workers.shared.lakefs.documents.PolicyDocument``: its ETag is a hash of the canonical list), and the lifecycle's own
records in Redis.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING

import redis
from redis.lock import Lock

from workers.branch_lifecycle.policies import Policy, PolicyValidationError, canonical, etag, parse_policies
from workers.shared.lakefs.documents import PolicyDocument
from workers.shared.lakefs.errors import LakeFSError
from workers.shared.locks import named_lock

DELETION_LOG_LENGTH = 10_000

if TYPE_CHECKING:
    from workers.idle_clock.store import ClockStore
    from workers.shared.services import Services

METADATA_KEY = "lakefs_janitor.branch_lifecycle.v1"


class StoredPoliciesInvalid(LakeFSError):
    """The repository metadata holds something that is not a valid policy list (written around the janitor)."""

    def __init__(self, repository_id: str, problem: str):
        super().__init__(f"the branch lifecycle policies stored on {repository_id!r} (repository metadata key "
                         f"{METADATA_KEY!r}) are unusable: {problem}. Replace them with `lakefs-janitor "
                         f"branch-lifecycle set --force` or remove them with `clear`; no branch is deleted until then",
                         409)


def _parse(repository_id: str, raw: str) -> list[Policy]:
    try:
        # Stored documents were validated on write; the default branch check is not repeated on read so that a
        # later change of default branch cannot make the stored list unreadable (evaluation exempts it anyway).
        return parse_policies(json.loads(raw), None)
    except json.JSONDecodeError as exc:
        raise StoredPoliciesInvalid(repository_id, f"not JSON ({exc})") from None
    except PolicyValidationError as exc:
        raise StoredPoliciesInvalid(repository_id, str(exc).replace("\n", "; ")) from None


POLICIES = PolicyDocument(METADATA_KEY, what="policies", parse=_parse, body=canonical, etag=etag)
get_policies, set_policies, clear_policies = POLICIES.get, POLICIES.set, POLICIES.clear


class LifecycleRecords:
    """The lifecycle's own Redis keys: deletion log, last deleted HEAD per branch, warnings sent, locks."""

    def __init__(self, client: redis.Redis, prefix: str):
        self.redis = client
        self.prefix = prefix

    @classmethod
    def of(cls, services: Services) -> LifecycleRecords:
        """The records in the services' Redis, under their key prefix."""
        return cls(services.redis, services.settings.key_prefix)

    @classmethod
    def beside(cls, clock: ClockStore) -> LifecycleRecords:
        """In the same Redis, under the same prefix, as the idle clock."""
        return cls(clock.redis, clock.prefix)

    def edit_lock(self, repository_id: str) -> AbstractContextManager:
        """Serialises the ETag check and the write among everyone who edits through lakefs-janitor: lakeFS has no
        conditional write for repository metadata, so without it two writers holding the same ETag could both win."""
        return named_lock(self.redis, self.prefix, f"policies:{repository_id}", seconds=30, blocking_timeout=10)

    def run_lock(self, repository_id: str | None, seconds: float) -> Lock:
        """One real run per repository (or, with None, one pass over all of them) across workers and replicas."""
        name = "lifecycle-all" if repository_id is None else f"lifecycle:{repository_id}"
        return named_lock(self.redis, self.prefix, name, seconds=seconds)

    def _deletions(self, repository_id: str) -> str:
        return f"{self.prefix}:deletions:{repository_id}"

    def _last_deleted(self, repository_id: str) -> str:
        return f"{self.prefix}:deleted-heads:{repository_id}"

    def record_deletion(self, entry: dict, *, logged: bool) -> None:
        """The last record per branch (for restore) and, for a done deletion, the history list."""
        text = json.dumps(entry, sort_keys=True)
        pipe = self.redis.pipeline()
        if logged:
            pipe.lpush(self._deletions(entry["repository_id"]), text)
            pipe.ltrim(self._deletions(entry["repository_id"]), 0, DELETION_LOG_LENGTH - 1)
        pipe.hset(self._last_deleted(entry["repository_id"]), entry["branch_id"], text)
        pipe.execute()

    def deletions(self, repository_id: str, limit: int = 100) -> list[dict]:
        return [json.loads(x) for x in self.redis.lrange(self._deletions(repository_id), 0, limit - 1)]

    def last_deletion(self, repository_id: str, branch_id: str) -> dict | None:
        raw = self.redis.hget(self._last_deleted(repository_id), branch_id)
        return json.loads(raw) if raw else None

    def _warned(self, repository_id: str, branch_id: str, delete_at: datetime) -> str:
        return f"{self.prefix}:warned:{repository_id}:{branch_id}:{int(delete_at.timestamp())}"

    def first_warning(self, repository_id: str, branch_id: str, delete_at: datetime, *, ttl_seconds: int) -> bool:
        """True once per branch and deletion time, however many runs see it coming."""
        key = self._warned(repository_id, branch_id, delete_at)
        return bool(self.redis.set(key, delete_at.isoformat(), nx=True, ex=ttl_seconds))

    def forget_warnings(self, repository_id: str, due: list[tuple[str, datetime]]) -> None:
        """A warning that could not be sent is sent again by the next run."""
        if due:
            self.redis.delete(*[self._warned(repository_id, b, at) for b, at in due])
