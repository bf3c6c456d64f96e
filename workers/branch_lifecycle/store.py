"""Branch lifecycle policies stored on the repository itself, in lakeFS repository metadata.

Reading needs read access to the repository and writing needs UpdateRepository, both checked by lakeFS
against whoever's credentials the given client carries. The ETag is a hash of the canonical list.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING

import redis

from workers.branch_lifecycle.policies import Policy, PolicyValidationError, canonical, etag, parse_policies
from workers.lakefs.errors import LakeFSError
from workers.locks import named_lock

if TYPE_CHECKING:
    from workers.lakefs.client import LakeFS

METADATA_KEY = "lakefs_janitor.branch_lifecycle.v1"


class StaleETag(RuntimeError):
    """The policies changed since the caller read them."""

    def __init__(self, given: str, current: str):
        super().__init__(f"the policies changed since they were read (If-Match {given}, current ETag {current}); "
                         "read them again, or force the write")
        self.current = current


@dataclass(frozen=True)
class StoredPolicies:
    policies: list[Policy]
    etag: str


class StoredPoliciesInvalid(LakeFSError):
    """The repository metadata holds something that is not a valid policy list (written around the janitor)."""

    def __init__(self, repository_id: str, problem: str):
        super().__init__(f"the branch lifecycle policies stored on {repository_id!r} (repository metadata key "
                         f"{METADATA_KEY!r}) are unusable: {problem}. Replace them with `lakefs-janitor "
                         f"branch-lifecycle set --force` or remove them with `clear`; no branch is deleted until then",
                         409)


def get_policies(lakefs: LakeFS, repository_id: str) -> StoredPolicies:
    metadata = lakefs.call("read repository metadata", lakefs.repositories.get_repository_metadata, repository_id)
    raw = (metadata or {}).get(METADATA_KEY)
    if not raw:
        return StoredPolicies([], etag([]))
    try:
        # Stored documents were validated on write; the default branch check is not repeated on read so that a
        # later change of default branch cannot make the stored list unreadable (evaluation exempts it anyway).
        policies = parse_policies(json.loads(raw), None)
    except json.JSONDecodeError as exc:
        raise StoredPoliciesInvalid(repository_id, f"not JSON ({exc})") from None
    except PolicyValidationError as exc:
        raise StoredPoliciesInvalid(repository_id, str(exc).replace("\n", "; ")) from None
    return StoredPolicies(policies, etag(policies))


def _check(lakefs: LakeFS, repository_id: str, if_match: str | None) -> None:
    if if_match is None:
        return
    current = get_policies(lakefs, repository_id).etag
    if if_match.strip() not in (current, "*"):
        raise StaleETag(if_match, current)


def edit_lock(client: redis.Redis, prefix: str, repository_id: str) -> AbstractContextManager:
    """Serialises the ETag check and the write among everyone who edits through lakefs-janitor: lakeFS has no
    conditional write for repository metadata, so without it two writers holding the same ETag could both win."""
    return named_lock(client, prefix, f"policies:{repository_id}", 30, blocking_timeout=10)


def set_policies(lakefs: LakeFS, repository_id: str, policies: Sequence[Policy], if_match: str | None = None,
                 lock: AbstractContextManager | None = None) -> StoredPolicies:
    """Store the list; with if_match, only if the stored list still has that ETag."""
    if not policies:
        return clear_policies(lakefs, repository_id, if_match, lock)
    body = json.dumps(canonical(policies), sort_keys=True, separators=(",", ":"))
    with lock or nullcontext():
        _check(lakefs, repository_id, if_match)
        lakefs.call("write repository metadata", lakefs.internal.set_repository_metadata, repository_id,
                    _sdk().RepositoryMetadataSet(metadata={METADATA_KEY: body}))
    return StoredPolicies(list(policies), etag(policies))


def clear_policies(lakefs: LakeFS, repository_id: str, if_match: str | None = None,
                   lock: AbstractContextManager | None = None) -> StoredPolicies:
    """Remove every policy; clearing a repository with none is not an error."""
    with lock or nullcontext():
        _check(lakefs, repository_id, if_match)
        lakefs.call("delete repository metadata", lakefs.internal.delete_repository_metadata, repository_id,
                    _sdk().RepositoryMetadataKeys(keys=[METADATA_KEY]))
    return StoredPolicies([], etag([]))


def _sdk():
    import lakefs_sdk  # noqa: PLC0415 - the receiver loads this module; the SDK only when a policy is written

    return lakefs_sdk
