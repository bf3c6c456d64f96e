"""The impact view: what deleting a branch would free equals what a real deletion followed by a GC run frees."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import lakefs_sdk

from spark_jobs.engine.mark import Marked
from spark_jobs.engine.plan.impact import Impact, branch_impact
from spark_jobs.engine.runtime.context import JobConfig
from spark_jobs.engine.runtime.lakefs_api import LakeFSApi
from spark_jobs.engine.stores import StorageConfig
from tests.gc_engine import Collector
from tests.integration.conftest import commit, create_branch, upload

DAY = 86400


def impact(gc: Collector, marked: Marked, branch_ids: list[str], *, now: datetime) -> dict[str, Impact]:
    """The impact view of one dry mark, as workers.gc.run.repository_impact computes it."""
    api = LakeFSApi(gc.api)
    try:
        storage = StorageConfig(marked.graph.namespace, marked.graph.local_root, gc.storage.options_json)
        return branch_impact(api, JobConfig(gc.api, storage, marked.summary.repository_id), marked, branch_ids=branch_ids,
                             now=now)
    finally:
        api.close()


def test_impact_equals_what_deleting_the_branch_frees(lakefs, gc, repo, namespace, local_root, clock, cli):
    old = int(time.time()) - 30 * DAY
    upload(lakefs, repo, "main", "shared.txt", b"s" * 100)
    commit(lakefs, repo, "main", "base", date=old - DAY)
    create_branch(lakefs, repo, "feature")
    upload(lakefs, repo, "feature", "only-feature.bin", b"f" * 1000)
    upload(lakefs, repo, "feature", "also.bin", b"a" * 300)
    commit(lakefs, repo, "feature", "feature work", date=old)
    upload(lakefs, repo, "feature", "staged.bin", b"x" * 50)  # staged only: freed too once the branch is gone
    create_branch(lakefs, repo, "keeper")
    lakefs.call("rules", lakefs.repositories.set_gc_rules, repo,
                lakefs_sdk.GarbageCollectionRules(default_retention_days=7, branches=[]))
    gc.run(repo, min_age=timedelta(0))  # nothing else left to collect
    now = datetime.now(UTC)
    marked = gc.mark(repo, now=now, min_age=timedelta(0), dry_run=True)
    impacts = impact(gc, marked, ["feature", "keeper", "main"], now=now)
    assert impacts["main"].objects == 0  # main's object is kept by feature's commit too
    assert impacts["keeper"].objects == 0  # keeper (made from main) keeps nothing main does not
    predicted = impacts["feature"]
    lakefs.call("delete", lakefs.branches.delete_branch, repo, "feature")
    summary, _ = gc.run(repo, min_age=timedelta(0))
    assert (predicted.objects, predicted.bytes) == (summary.swept, summary.deleted_bytes)
    assert (predicted.objects, predicted.bytes) == (3, 1350)  # its two committed objects and the staged one


def test_impact_of_a_branch_with_unshared_history(lakefs, gc, repo, namespace, local_root, cli):
    old = int(time.time()) - 30 * DAY
    upload(lakefs, repo, "main", "shared.txt", b"s" * 100)
    commit(lakefs, repo, "main", "base", date=old - DAY)
    create_branch(lakefs, repo, "feature")
    upload(lakefs, repo, "feature", "only-feature.bin", b"f" * 1000)
    commit(lakefs, repo, "feature", "feature work", date=old)
    lakefs.call("rules", lakefs.repositories.set_gc_rules, repo,
                lakefs_sdk.GarbageCollectionRules(default_retention_days=7, branches=[]))
    shown = json.loads(cli("gc", "impact", f"lakefs://{repo}", "--min-age", "0s", "--json").output)
    assert shown["feature"] == {"objects": 1, "bytes": 1000} and shown["main"]["objects"] == 0
    lakefs.call("delete", lakefs.branches.delete_branch, repo, "feature")
    summary, _ = gc.run(repo, min_age=timedelta(0))
    assert (summary.swept, summary.deleted_bytes) == (1, 1000)


def test_lifecycle_preview_shows_the_impact_beside_branches_due(lakefs, repo, clock, cli, tmp_path):
    from workers.branch_lifecycle.policies import parse_policies  # noqa: PLC0415
    from workers.branch_lifecycle.store import set_policies  # noqa: PLC0415

    upload(lakefs, repo, "main", "shared.txt", b"s")
    commit(lakefs, repo, "main", "base", date=int(time.time()) - 40 * DAY)
    create_branch(lakefs, repo, "feature-old")
    upload(lakefs, repo, "feature-old", "big.bin", b"b" * 4096)
    commit(lakefs, repo, "feature-old", "old work", date=int(time.time()) - 30 * DAY)
    clock.record_created(repo, "feature-old", datetime.now(UTC) - timedelta(days=30))
    lakefs.call("rules", lakefs.repositories.set_gc_rules, repo,
                lakefs_sdk.GarbageCollectionRules(default_retention_days=7, branches=[]))
    set_policies(lakefs, repo, parse_policies({"policies": [{"patterns": ["feature-*"], "max_age": "7d"}]}, "main"))
    out = json.loads(cli("branch-lifecycle", "preview", f"lakefs://{repo}", "--impact", "--json").output)
    due = {b["branch_id"]: b for b in out["branches"]}["feature-old"]
    assert due["action"] == "delete"
    # the default 24 h cutoff: the object was written just now, so nothing would be freed yet
    assert due["impact"] == {"objects": 0, "bytes": 0}
    table = cli("branch-lifecycle", "preview", f"lakefs://{repo}", "--impact").output
    assert "frees" in table and "0 obj" in table


def test_impact_under_keep_versions_counts_versions_per_path(lakefs, gc, repo, namespace, local_root):
    """keep_versions: 2 everywhere; main holds three versions of a.txt, a feature branch sits on the oldest. Only
    the feature keeps v1 (main keeps its latest two), so deleting it frees v1: the impact must say so (counting
    each version as a path of its own would keep all three)."""
    from spark_jobs.core.cleaning import parse_cleaning_policies  # noqa: PLC0415
    from workers.gc.cleaning_store import set_cleaning  # noqa: PLC0415

    now_s = int(time.time())
    upload(lakefs, repo, "main", "a.txt", b"v1" * 50)
    commit(lakefs, repo, "main", "v1", date=now_s - 40 * DAY)
    create_branch(lakefs, repo, "feature")
    for version, days in (("v2", 35), ("v3", 30)):
        upload(lakefs, repo, "main", "a.txt", version.encode() * 50)
        commit(lakefs, repo, "main", version, date=now_s - days * DAY)
    lakefs.call("rules", lakefs.repositories.set_gc_rules, repo,
                lakefs_sdk.GarbageCollectionRules(default_retention_days=7, branches=[]))
    set_cleaning(lakefs, repo, parse_cleaning_policies({"policies": [{"patterns": ["*"], "keep_versions": 2}]}))
    now = datetime.now(UTC)
    marked = gc.mark(repo, now=now, min_age=timedelta(0), dry_run=True)
    assert marked.summary.num_deleted_objects == 0  # v3, v2 by main; v1 by the feature's HEAD
    predicted = impact(gc, marked, ["feature"], now=now)["feature"]
    assert (predicted.objects, predicted.bytes) == (1, 100)
    lakefs.call("delete", lakefs.branches.delete_branch, repo, "feature")
    summary, _ = gc.run(repo, min_age=timedelta(0))
    assert (summary.swept, summary.deleted_bytes) == (predicted.objects, predicted.bytes)
