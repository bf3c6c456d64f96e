"""Cleaning policies stored on the repository, beside the lifecycle policies (lakeFS repository metadata), read
and written with an ETag precondition like them (a ``workers.shared.lakefs.documents.PolicyDocument``)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from spark_jobs.core.cleaning import METADATA_KEY, CleaningPolicy, CleaningPolicyError, parse_cleaning_policies
from workers.shared.lakefs.documents import PolicyDocument, etag_of
from workers.shared.lakefs.errors import LakeFSError


def _document(policies: Sequence[CleaningPolicy]) -> dict:
    """What is stored, and shown: ``{"policies": [...]}``."""
    return {"policies": [p.document() for p in policies]}


def etag(policies: Sequence[CleaningPolicy]) -> str:
    # The list rather than the stored document, 32 characters and ASCII JSON: how these ETags were first given out.
    return etag_of([p.document() for p in policies], chars=32, ascii_only=True)


def _parse(repository_id: str, raw: str) -> list[CleaningPolicy]:
    try:
        return parse_cleaning_policies(json.loads(raw))
    except (ValueError, CleaningPolicyError) as exc:
        raise LakeFSError(f"the cleaning policies stored on {repository_id!r} ({METADATA_KEY}) are unusable: {exc}; "
                          "replace them with `gc policy set --force` or remove them with `gc policy clear`; "
                          "no GC runs until then", 409) from None


CLEANING = PolicyDocument(METADATA_KEY, what="cleaning policies", parse=_parse, body=_document, etag=etag)
get_cleaning, set_cleaning, clear_cleaning = CLEANING.get, CLEANING.set, CLEANING.clear
