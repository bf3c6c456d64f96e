"""Cleaning policies stored on the repository, beside the lifecycle policies (lakeFS repository metadata), read
and written with an ETag precondition like them."""

from __future__ import annotations

import hashlib
import json
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING

from spark_jobs.core.cleaning import METADATA_KEY, CleaningPolicy, CleaningPolicyError, parse_cleaning_policies
from workers.lakefs.errors import LakeFSError

if TYPE_CHECKING:
    from workers.lakefs.client import LakeFS




class StaleETag(RuntimeError):
    def __init__(self, given: str, current: str):
        super().__init__(f"the cleaning policies changed since they were read (If-Match {given}, current ETag "
                         f"{current}); read them again, or force the write")
        self.current = current


@dataclass(frozen=True)
class StoredCleaning:
    policies: list[CleaningPolicy]
    etag: str

    def document(self) -> dict:
        return {"policies": [p.document() for p in self.policies]}


def etag(policies: list[CleaningPolicy]) -> str:
    body = json.dumps([p.document() for p in policies], sort_keys=True, separators=(",", ":"))
    return '"' + hashlib.sha256(body.encode()).hexdigest()[:32] + '"'


def get_cleaning(lakefs: LakeFS, repository_id: str) -> StoredCleaning:
    metadata = lakefs.call("read repository metadata", lakefs.repositories.get_repository_metadata, repository_id)
    raw = (metadata or {}).get(METADATA_KEY)
    if not raw:
        return StoredCleaning([], etag([]))
    try:
        policies = parse_cleaning_policies(json.loads(raw))
    except (ValueError, CleaningPolicyError) as exc:
        raise LakeFSError(f"the cleaning policies stored on {repository_id!r} ({METADATA_KEY}) are unusable: {exc}; "
                          "replace them with `gc policy set --force` or remove them with `gc policy clear`; "
                          "no GC runs until then", 409) from None
    return StoredCleaning(policies, etag(policies))


def _check(lakefs: LakeFS, repository_id: str, if_match: str | None) -> None:
    if if_match is not None:
        current = get_cleaning(lakefs, repository_id).etag
        if if_match.strip() not in (current, "*"):
            raise StaleETag(if_match, current)


def set_cleaning(lakefs: LakeFS, repository_id: str, policies: list[CleaningPolicy], *, if_match: str | None = None,
                 lock: AbstractContextManager | None = None) -> StoredCleaning:
    import lakefs_sdk  # noqa: PLC0415

    if not policies:
        return clear_cleaning(lakefs, repository_id, if_match=if_match, lock=lock)
    body = json.dumps({"policies": [p.document() for p in policies]}, sort_keys=True, separators=(",", ":"))
    with lock or nullcontext():
        _check(lakefs, repository_id, if_match)
        lakefs.call("write repository metadata", lakefs.internal.set_repository_metadata, repository_id,
                    lakefs_sdk.RepositoryMetadataSet(metadata={METADATA_KEY: body}))
    return StoredCleaning(policies, etag(policies))


def clear_cleaning(lakefs: LakeFS, repository_id: str, *, if_match: str | None = None,
                   lock: AbstractContextManager | None = None) -> StoredCleaning:
    import lakefs_sdk  # noqa: PLC0415

    with lock or nullcontext():
        _check(lakefs, repository_id, if_match)
        lakefs.call("delete repository metadata", lakefs.internal.delete_repository_metadata, repository_id,
                    lakefs_sdk.RepositoryMetadataKeys(keys=[METADATA_KEY]))
    return StoredCleaning([], etag([]))
