"""Object lifecycle rules stored on the repository itself, in lakeFS repository metadata (a
``workers.shared.lakefs.documents.PolicyDocument``: its ETag is a hash of the canonical list), beside the branch
lifecycle and cleaning policies, and the lock their editors share."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from workers.object_lifecycle.rules import Rule, RulesValidationError, canonical, etag, parse_rules
from workers.shared.lakefs.documents import PolicyDocument, read_stored
from workers.shared.lakefs.errors import LakeFSError
from workers.shared.runs import LifecycleLocks, push_capped

if TYPE_CHECKING:
    pass

METADATA_KEY = "lakefs_janitor.object_lifecycle.v1"


class StoredRulesInvalid(LakeFSError):
    """The repository metadata holds something that is not a valid rule list (written around the janitor)."""

    def __init__(self, repository_id: str, problem: str):
        super().__init__(f"the object lifecycle rules stored on {repository_id!r} (repository metadata key "
                         f"{METADATA_KEY!r}) are unusable: {problem}. Replace them with `lakefs-janitor "
                         "object-lifecycle rules set --force` or remove them with `rules clear`; no object expires "
                         "until then", 409)


def _parse(repository_id: str, raw: str) -> list[Rule]:
    return read_stored(raw, parse_rules, errors=RulesValidationError,
                       invalid=lambda problem: StoredRulesInvalid(repository_id, problem))


RULES = PolicyDocument(METADATA_KEY, what="object lifecycle rules", parse=_parse, body=canonical, etag=etag)
get_rules, set_rules, clear_rules = RULES.get, RULES.set, RULES.clear


RUN_HISTORY_LENGTH = 1000  # runs kept per repository (each names its commits, for `restore`)


class ObjectLifecycleRecords(LifecycleLocks):
    """The object lifecycle's own Redis keys: the lock its rule editors hold, the one-run-at-a-time locks and the
    history of runs (per repository: newest first, and by run id for `restore`)."""

    EDIT_LOCK = "object-lifecycle-rules"
    RUN_LOCK = "object-lifecycle"

    def _runs(self, repository_id: str) -> str:
        return f"{self.prefix}:object-lifecycle:runs:{repository_id}"

    def _by_id(self, repository_id: str) -> str:
        return f"{self.prefix}:object-lifecycle:run-records:{repository_id}"

    def save_run(self, record: dict) -> None:
        """Write (or rewrite, as a run moves on) the record of a run; a run is listed once, at its first write."""
        repository_id, run_id = record["repository_id"], record["run_id"]
        text = json.dumps(record, sort_keys=True)
        pipe = self.redis.pipeline()
        pipe.hsetnx(self._by_id(repository_id), run_id, "")  # tells save_run whether the run is listed yet
        pipe.hset(self._by_id(repository_id), run_id, text)
        first = pipe.execute()[0]
        if first:
            pipe = self.redis.pipeline()
            push_capped(pipe, self._runs(repository_id), run_id, length=RUN_HISTORY_LENGTH)
            pipe.execute()
            self._forget_trimmed(repository_id)

    def _forget_trimmed(self, repository_id: str) -> None:
        listed = {x.decode() for x in self.redis.lrange(self._runs(repository_id), 0, -1)}
        stored = {x.decode() for x in self.redis.hkeys(self._by_id(repository_id))}
        if gone := stored - listed:
            self.redis.hdel(self._by_id(repository_id), *gone)

    def runs(self, repository_id: str, limit: int = 20) -> list[dict]:
        ids = [x.decode() for x in self.redis.lrange(self._runs(repository_id), 0, limit - 1)]
        if not ids:
            return []
        return [json.loads(raw) for raw in self.redis.hmget(self._by_id(repository_id), ids) if raw]

    def run(self, repository_id: str, run_id: str) -> dict | None:
        raw = self.redis.hget(self._by_id(repository_id), run_id)
        return json.loads(raw) if raw else None

    def count_failure(self, repository_id: str, branch_id: str, *, failed: bool) -> int:
        """Failed runs in a row on the branch, kept in Redis so every worker process counts the same streak."""
        key = f"{self.prefix}:object-lifecycle:failures:{repository_id}:{branch_id}"
        if not failed:
            self.redis.delete(key)
            return 0
        pipe = self.redis.pipeline()
        pipe.incr(key)
        pipe.expire(key, 30 * 86400)  # a branch that stopped being run does not keep its streak forever
        return int(pipe.execute()[0])
