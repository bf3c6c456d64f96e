"""Branch lifecycle policies stored on the repository itself, in lakeFS repository metadata (a
``workers.shared.lakefs.documents.PolicyDocument``: its ETag is a hash of the canonical list), and the lifecycle's own
records in Redis.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING

from workers.branch_lifecycle.policies import Policy, PolicyValidationError, canonical, etag, parse_policies
from workers.shared.lakefs.documents import PolicyDocument, read_stored
from workers.shared.lakefs.errors import LakeFSError
from workers.shared.runs import LifecycleLocks, newest_records, push_capped

DELETION_LOG_LENGTH = 10_000

if TYPE_CHECKING:
    from workers.idle_clock.store import ClockStore

METADATA_KEY = "lakefs_janitor.branch_lifecycle.v1"


class StoredPoliciesInvalid(LakeFSError):
    """The repository metadata holds something that is not a valid policy list (written around the janitor)."""

    def __init__(self, repository_id: str, problem: str):
        super().__init__(f"the branch lifecycle policies stored on {repository_id!r} (repository metadata key "
                         f"{METADATA_KEY!r}) are unusable: {problem}. Replace them with `lakefs-janitor "
                         f"branch-lifecycle set --force` or remove them with `clear`; no branch is deleted until then",
                         409)


def _parse(repository_id: str, raw: str) -> list[Policy]:
    # Stored documents were validated on write; the default branch check is not repeated on read so that a later
    # change of default branch cannot make the stored list unreadable (evaluation exempts it anyway).
    return read_stored(raw, lambda document: parse_policies(document, None), errors=PolicyValidationError,
                       invalid=lambda problem: StoredPoliciesInvalid(repository_id, problem))


POLICIES = PolicyDocument(METADATA_KEY, what="policies", parse=_parse, body=canonical, etag=etag)
get_policies, set_policies, clear_policies = POLICIES.get, POLICIES.set, POLICIES.clear


class LifecycleRecords(LifecycleLocks):
    """The lifecycle's own Redis keys: deletion log, last deleted HEAD per branch, warnings sent, locks."""

    EDIT_LOCK = "policies"
    RUN_LOCK = "lifecycle"

    @classmethod
    def beside(cls, clock: ClockStore) -> LifecycleRecords:
        """In the same Redis, under the same prefix, as the idle clock."""
        return cls(clock.redis, clock.prefix, lock_durability=clock.lock_durability)

    def _deletions(self, repository_id: str) -> str:
        return f"{self.prefix}:deletions:{repository_id}"

    def _last_deleted(self, repository_id: str) -> str:
        return f"{self.prefix}:deleted-heads:{repository_id}"

    def record_deletion(self, entry: dict, *, logged: bool) -> None:
        """The last record per branch (for restore) and, for a done deletion, the history list."""
        text = json.dumps(entry, sort_keys=True)
        pipe = self.redis.pipeline()
        if logged:
            push_capped(pipe, self._deletions(entry["repository_id"]), text, length=DELETION_LOG_LENGTH)
        pipe.hset(self._last_deleted(entry["repository_id"]), entry["branch_id"], text)
        pipe.execute()

    def deletions(self, repository_id: str, limit: int = 100) -> list[dict]:
        return newest_records(self.redis, self._deletions(repository_id), limit)

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
