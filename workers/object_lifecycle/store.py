"""Object lifecycle rules stored on the repository itself, in lakeFS repository metadata (a
``workers.lakefs.documents.PolicyDocument``: its ETag is a hash of the canonical list), beside the branch
lifecycle and cleaning policies, and the lock their editors share."""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

import redis

from workers.lakefs.documents import PolicyDocument
from workers.lakefs.errors import LakeFSError
from workers.locks import named_lock
from workers.object_lifecycle.rules import Rule, RulesValidationError, canonical, etag, parse_rules

if TYPE_CHECKING:
    from workers.services import Services

METADATA_KEY = "lakefs_janitor.object_lifecycle.v1"


class StoredRulesInvalid(LakeFSError):
    """The repository metadata holds something that is not a valid rule list (written around the janitor)."""

    def __init__(self, repository_id: str, problem: str):
        super().__init__(f"the object lifecycle rules stored on {repository_id!r} (repository metadata key "
                         f"{METADATA_KEY!r}) are unusable: {problem}. Replace them with `lakefs-janitor "
                         "object-lifecycle rules set --force` or remove them with `rules clear`; no object expires "
                         "until then", 409)


def _parse(repository_id: str, raw: str) -> list[Rule]:
    try:
        return parse_rules(json.loads(raw))
    except json.JSONDecodeError as exc:
        raise StoredRulesInvalid(repository_id, f"not JSON ({exc})") from None
    except RulesValidationError as exc:
        raise StoredRulesInvalid(repository_id, str(exc).replace("\n", "; ")) from None


RULES = PolicyDocument(METADATA_KEY, what="object lifecycle rules", parse=_parse, body=canonical, etag=etag)
get_rules, set_rules, clear_rules = RULES.get, RULES.set, RULES.clear


class ObjectLifecycleRecords:
    """The object lifecycle's own Redis keys (for now: the lock its rule editors hold)."""

    def __init__(self, client: redis.Redis, prefix: str):
        self.redis = client
        self.prefix = prefix

    @classmethod
    def of(cls, services: Services) -> ObjectLifecycleRecords:
        return cls(services.redis, services.settings.key_prefix)

    def edit_lock(self, repository_id: str) -> AbstractContextManager:
        """Serialises the ETag check and the write among everyone who edits through lakefs-janitor (lakeFS has no
        conditional write for repository metadata)."""
        return named_lock(self.redis, self.prefix, f"object-lifecycle-rules:{repository_id}", seconds=30,
                          blocking_timeout=10)
