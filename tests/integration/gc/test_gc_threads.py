"""Committed GC on the thread runner against a real lakeFS (local blockstore): what is kept, what goes, and the safety
rules."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import lakefs_sdk
import pytest

from spark_jobs.engine.runtime.context import GCError
from tests.integration.conftest import commit, create_branch, upload
from workers.shared.lakefs.errors import LakeFSError

DAY = 86400


def rules(lakefs, repo, default=1, **branches):
    lakefs.call("set rules", lakefs.repositories.set_gc_rules, repo, lakefs_sdk.GarbageCollectionRules(
        default_retention_days=default,
        branches=[lakefs_sdk.GarbageCollectionRule(branch_id=b, retention_days=d) for b, d in branches.items()]))


def read(lakefs, repo, ref, path) -> bytes | int:
    try:
        return lakefs.call("get", lakefs.objects.get_object, repo, ref, path)
    except LakeFSError as exc:
        return exc.status or 0


def physical(lakefs, repo, ref, path) -> str:
    return lakefs.call("stat", lakefs.objects.stat_object, repo, ref, path).physical_address


def old_commit(lakefs, repo, branch, days_ago, msg="old"):
    return commit(lakefs, repo, branch, msg, date=int(time.time()) - days_ago * DAY)


def test_no_rules_is_a_clear_skip_and_deletes_nothing(lakefs, gc, repo, namespace, local_root):
    upload(lakefs, repo, "main", "a.txt", b"v1")
    commit(lakefs, repo, "main")
    with pytest.raises(GCError, match="no GC rules"):
        gc.run(repo, min_age=timedelta(0))
    assert read(lakefs, repo, "main", "a.txt") == b"v1"


def test_overwritten_objects_outside_retention_go_and_everything_kept_reads_back(lakefs, gc, repo, namespace,
                                                                                 local_root):
    upload(lakefs, repo, "main", "a.txt", b"v1")
    upload(lakefs, repo, "main", "keep.txt", b"k")
    first = old_commit(lakefs, repo, "main", 30)
    upload(lakefs, repo, "main", "a.txt", b"v2")
    second = old_commit(lakefs, repo, "main", 20)
    upload(lakefs, repo, "main", "a.txt", b"v3")
    upload(lakefs, repo, "main", "staged.txt", b"s")  # uncommitted: always kept
    third = old_commit(lakefs, repo, "main", 1, "recent")
    upload(lakefs, repo, "main", "staged.txt", b"s2")
    rules(lakefs, repo, default=7)
    summary, marked = gc.run(repo, min_age=timedelta(0))
    assert summary.success and summary.phase == "swept"
    # main retains third and, as its HEAD 7 days ago, second; first's v1 of a.txt is gone
    assert {third.id, second.id} <= marked.retained and first.id not in marked.retained
    assert read(lakefs, repo, first.id, "a.txt") == 410
    assert read(lakefs, repo, second.id, "a.txt") == b"v2"
    assert read(lakefs, repo, "main", "a.txt") == b"v3"
    assert read(lakefs, repo, "main", "keep.txt") == b"k"
    assert read(lakefs, repo, "main", "staged.txt") == b"s2"
    assert summary.swept == 1
    # nothing under _lakefs/ was touched: every commit's metadata still reads
    assert lakefs.call("log", lakefs.refs.log_commits, repo, "main").results


def test_dry_run_deletes_nothing_and_writes_only_under_lakefs(lakefs, gc, repo, namespace, local_root):
    upload(lakefs, repo, "main", "a.txt", b"v1")
    first = old_commit(lakefs, repo, "main", 30)
    upload(lakefs, repo, "main", "a.txt", b"v2")
    old_commit(lakefs, repo, "main", 20)
    rules(lakefs, repo, default=1)
    before = {o.key for o in namespace.list_data()}
    summary, _ = gc.run(repo, min_age=timedelta(0), dry_run=True)
    assert summary.num_deleted_objects == 1 and summary.dry_run
    assert {o.key for o in namespace.list_data()} == before
    assert read(lakefs, repo, first.id, "a.txt") == b"v1"
    with pytest.raises(GCError, match="dry run"):
        gc.sweep(repo, summary.run_id)


def test_objects_newer_than_the_cutoff_survive(lakefs, gc, repo, namespace, local_root):
    upload(lakefs, repo, "main", "a.txt", b"v1")
    first = old_commit(lakefs, repo, "main", 30)
    upload(lakefs, repo, "main", "a.txt", b"v2")
    old_commit(lakefs, repo, "main", 20)
    rules(lakefs, repo, default=1)
    summary, _ = gc.run(repo, min_age=timedelta(hours=1))
    assert summary.too_new >= 1 and summary.swept == 0
    assert read(lakefs, repo, first.id, "a.txt") == b"v1"


def test_branch_reset_during_the_run_loses_nothing(lakefs, gc, repo, namespace, local_root):
    upload(lakefs, repo, "main", "a.txt", b"v1")
    first = old_commit(lakefs, repo, "main", 30)
    upload(lakefs, repo, "main", "a.txt", b"v2")
    old_commit(lakefs, repo, "main", 20)
    create_branch(lakefs, repo, "late")
    rules(lakefs, repo, default=1)
    marked = gc.mark(repo, now=datetime.now(UTC), min_age=timedelta(0))
    assert marked.summary.num_deleted_objects == 1
    # between mark and sweep someone resets a branch onto the old commit
    lakefs.call("reset", lakefs.experimental.hard_reset_branch, repo, "late", first.id)
    summary = gc.sweep(repo, marked.summary.run_id)
    assert summary.spared_by_recheck == 1 and summary.swept == 0
    assert read(lakefs, repo, "late", "a.txt") == b"v1"


def test_crash_after_mark_then_sweep_by_id_gives_the_same_result(lakefs, gc, repo, namespace, local_root):
    upload(lakefs, repo, "main", "a.txt", b"v1")
    first = old_commit(lakefs, repo, "main", 30)
    upload(lakefs, repo, "main", "a.txt", b"v2")
    old_commit(lakefs, repo, "main", 20)
    rules(lakefs, repo, default=1)
    marked = gc.mark(repo, now=datetime.now(UTC), min_age=timedelta(0))
    # a new process, knowing only the mark id
    summary = gc.sweep(repo, marked.summary.run_id)
    assert summary.swept == 1 and read(lakefs, repo, first.id, "a.txt") == 410
    again = gc.sweep(repo, marked.summary.run_id)  # already gone: fine
    assert again.success


def test_deleted_branch_follows_the_default_retention(lakefs, gc, repo, namespace, local_root):
    upload(lakefs, repo, "main", "base.txt", b"b")
    old_commit(lakefs, repo, "main", 40)
    create_branch(lakefs, repo, "gone")
    upload(lakefs, repo, "gone", "g.txt", b"g-old")
    g1 = old_commit(lakefs, repo, "gone", 30)
    upload(lakefs, repo, "gone", "g.txt", b"g-new")
    g2 = old_commit(lakefs, repo, "gone", 2)
    lakefs.call("delete", lakefs.branches.delete_branch, repo, "gone")
    rules(lakefs, repo, default=7, gone=60)
    summary, marked = gc.run(repo, min_age=timedelta(0))
    assert g2.id in marked.retained and g1.id in marked.retained  # g2's line, first commit before the window
    assert read(lakefs, repo, g2.id, "g.txt") == b"g-new"
    assert read(lakefs, repo, g1.id, "g.txt") == b"g-old"
