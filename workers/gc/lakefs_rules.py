"""lakeFS's own GC rules of a repository (``/settings/gc_rules``), read, validated and written like lakectl's
``gc get-config`` / ``set-config`` / ``delete-config``; and what they say about when the GC frees what a commit
removes from a branch (an object lifecycle preview asks)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from workers.shared.cli_common import short_time
from workers.shared.lakefs.client import LakeFS
from workers.shared.lakefs.errors import NotFound


class BranchRule(BaseModel):
    model_config = ConfigDict(extra="forbid")
    branch_id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_][-A-Za-z0-9_]*$")
    retention_days: int = Field(ge=0)


class GCRulesDocument(BaseModel):
    model_config = ConfigDict(extra="forbid")
    default_retention_days: int = Field(ge=0)
    branches: list[BranchRule] = Field(default_factory=list)


class GCRulesError(ValueError):
    pass


def parse_gc_rules(document: Any) -> GCRulesDocument:
    try:
        doc = GCRulesDocument.model_validate(document)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(document)'}: {e['msg']}"
                             for e in exc.errors())
        raise GCRulesError(f"invalid GC rules: {problems}") from None
    seen = [b.branch_id for b in doc.branches]
    if dupes := sorted({b for b in seen if seen.count(b) > 1}):
        raise GCRulesError(f"invalid GC rules: branch {dupes[0]!r} appears more than once")
    return doc


def get_gc_rules(lakefs: LakeFS, repository_id: str) -> dict | None:
    try:
        response = lakefs.call("get GC rules", lakefs.repositories.get_gc_rules_with_http_info, repository_id,
                               _preload_content=False)
    except NotFound:
        return None
    raw = json.loads(response.raw_data)
    return {"default_retention_days": raw["default_retention_days"], "branches": raw.get("branches") or []}


def set_gc_rules(lakefs: LakeFS, repository_id: str, rules: GCRulesDocument) -> None:
    import lakefs_sdk  # noqa: PLC0415

    lakefs.call("set GC rules", lakefs.repositories.set_gc_rules, repository_id, lakefs_sdk.GarbageCollectionRules(
        default_retention_days=rules.default_retention_days,
        branches=[lakefs_sdk.GarbageCollectionRule(branch_id=b.branch_id, retention_days=b.retention_days)
                  for b in rules.branches]))


def clear_gc_rules(lakefs: LakeFS, repository_id: str) -> None:
    try:
        lakefs.call("delete GC rules", lakefs.repositories.delete_gc_rules, repository_id)
    except NotFound:
        pass  # idempotent


def when_collectable(lakefs: LakeFS, repository_id: str, removed: Mapping[str, int], *,
                     now: datetime) -> dict[str, dict]:
    """When the GC may free what a commit made now removes from each branch (``removed``: bytes per branch): the
    commit moves the objects into the commits before it, which the GC keeps for the branch's retention (lakeFS's GC
    rules) after they stop being its HEAD; other branches, tags and savepoints that still reach an object keep it
    longer."""
    doc = get_gc_rules(lakefs, repository_id)
    out: dict[str, dict] = {}
    for branch_id, size in removed.items():
        if doc is None:
            out[branch_id] = {"bytes": size, "free_from": None, "retention_days": None,
                              "text": f"lakefs://{repository_id} has no GC rules: no garbage collection frees them "
                                      "until they are set (`lakefs-janitor gc rules set`)"}
            continue
        # The short-lived branch's commit is left as a dangling leaf, kept for the default retention: whichever
        # of the two is longer decides.
        days = max(doc["default_retention_days"], next(
            (b["retention_days"] for b in doc["branches"] if b["branch_id"] == branch_id), 0))
        at = now + timedelta(days=days)
        out[branch_id] = {"bytes": size, "free_from": at.isoformat(), "retention_days": days,
                          "text": f"up to {size:,} bytes become collectable from {short_time(at)} ({days}d "
                                  "retention after the commit), unless another branch, tag or savepoint still "
                                  "reaches them"}
    return out
