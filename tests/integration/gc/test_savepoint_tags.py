"""A tag keeps its commit only when a savepoint pattern matches it (found by our acceptance check: once any cleaning
policy was stored, a tag of any name kept its expired commit and that commit's parent — the tagged commit, read
without its children, looked like the tip of a deleted branch). On both runners."""

from __future__ import annotations

import json
import time
from datetime import timedelta

import lakefs_sdk
import pytest

from spark_jobs.core.cleaning import METADATA_KEY
from tests.integration.conftest import create_branch, upload

DAY = 86400


def _commit(lakefs, repo, days_ago: float) -> str:
    return lakefs.call("commit", lakefs.commits.commit, repo, "main", lakefs_sdk.CommitCreation(
        message=f"{days_ago}d", var_date=int(time.time() - days_ago * DAY))).id


def _address(lakefs, repo, ref) -> str:
    address = lakefs.call("stat", lakefs.objects.stat_object, repo, ref, "a.txt").physical_address
    return address.split(f"/{repo}/", 1)[1] if "://" in address else address


@pytest.mark.parametrize("savepoints", [[], ["release-*"]])
def test_only_a_savepoint_tag_keeps_an_expired_commit(lakefs, repo, any_runner_gc, savepoints):
    lakefs.call("rules", lakefs.repositories.set_gc_rules, repo, lakefs_sdk.GarbageCollectionRules(
        default_retention_days=30, branches=[lakefs_sdk.GarbageCollectionRule(branch_id="main", retention_days=3),
                                             lakefs_sdk.GarbageCollectionRule(branch_id="feat-1", retention_days=30)]))
    versions = {}
    # main's line is read down to v4's commit (the first before its 3-day window): v2's commit, tagged, has no
    # child the mark reads
    for name, days in (("v0", 10), ("v1", 5), ("v2", 4.4), ("v3", 4.2), ("v4", 4), ("v5", 1)):
        upload(lakefs, repo, "main", "a.txt", name.encode())
        commit_id = _commit(lakefs, repo, days)
        versions[name] = (_address(lakefs, repo, commit_id), commit_id)
        if name == "v0":
            create_branch(lakefs, repo, "feat-1", "main")  # keeps v0 for 30 days
    lakefs.call("tag", lakefs.tags.create_tag, repo, lakefs_sdk.TagCreation(id="release-2", ref=versions["v2"][1]))
    policy = {"id": "feat", "patterns": ["feat-1"], "keep_commits": 1}
    if savepoints:
        policy["savepoints"] = savepoints
    lakefs.call("metadata", lakefs.internal.set_repository_metadata, repo, lakefs_sdk.RepositoryMetadataSet(
        metadata={METADATA_KEY: json.dumps({"policies": [policy]})}))
    marked = any_runner_gc.mark(repo, min_age=timedelta(0))
    deleted = {o.key for o in marked.deleted}
    if savepoints:  # the savepoint keeps v2's commit (and only it: not its parent)
        assert deleted == {versions["v1"][0], versions["v3"][0]}, marked.why
        assert marked.why[versions["v2"][1]] == "savepoint release-2"
    else:  # exactly what the rules and the policy say: v0 (feat-1), v4 and v5 (main's 3 days) stay
        assert deleted == {versions["v1"][0], versions["v2"][0], versions["v3"][0]}, marked.why
        assert versions["v2"][1] not in marked.retained
