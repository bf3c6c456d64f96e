"""Writes no hook reported never lose a branch, and every write is dated no earlier than it happened.

Each test reproduces one wrong-deletion or early-dating defect on a real lakeFS; times are the real clock.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import lakefs_sdk

from tests.integration.conftest import commit, create_branch, upload
from workers.branch_lifecycle.deletions import plan
from workers.branch_lifecycle.policies import parse_policies
from workers.branch_lifecycle.run import LifecycleOptions, run_repository
from workers.branch_lifecycle.store import set_policies
from workers.idle_clock.reconcile import reconcile_repository

OPTIONS = LifecycleOptions(max_deletions=100)


def head_of(lakefs, repo, branch) -> str:
    return lakefs.call("get branch", lakefs.branches.get_branch, repo, branch).commit_id


def hooked_branch(lakefs, clock, repo, name, created: datetime, source: str = "main") -> str:
    """A branch whose post-create-branch hook was recorded at ``created`` (with its HEAD, as lakeFS sends it)."""
    create_branch(lakefs, repo, name, source)
    head = head_of(lakefs, repo, name)
    clock.record_created(repo, name, created, head=head)
    return head


def idle_policy(lakefs, repo, pattern: str, idle: str) -> None:
    set_policies(lakefs, repo, parse_policies({"policies": [{"id": "idle", "patterns": [pattern],
                                                             "max_idle_age": idle}]}, "main"))


def branches(lakefs, repo) -> set[str]:
    return {b for b, _ in lakefs.branch_heads(repo, show_hidden=True)}


def outcome(report, branch):
    return next(o for o in report.outcomes if o.branch_id == branch) if any(
        o.branch_id == branch for o in report.outcomes) else None


def committed_object(lakefs, repo, path="base.txt") -> None:
    upload(lakefs, repo, "main", path, b"base")
    commit(lakefs, repo, "main", "base")


def test_hard_reset_just_before_a_run_keeps_the_branch(lakefs, clock, repo):
    hooked_branch(lakefs, clock, repo, "feature-x", datetime.now(UTC) - timedelta(minutes=5))
    reconcile_repository(lakefs, clock, repo, now=datetime.now(UTC) - timedelta(minutes=4))
    idle_policy(lakefs, repo, "feature-*", "10s")
    upload(lakefs, repo, "main", "new.txt")
    main_head = commit(lakefs, repo, "main", "main moves").id
    lakefs.call("reset", lakefs.experimental.hard_reset_branch, repo, "feature-x", main_head)
    written = datetime.now(UTC).replace(microsecond=0)
    report = run_repository(lakefs, clock, repo, now=datetime.now(UTC), options=OPTIONS)
    assert "feature-x" in branches(lakefs, repo), report
    assert report.skipped.get("unreported-write") == 1
    # The reset was recorded (dated at the look, never before the reset itself).
    c = clock.get(repo, "feature-x")
    assert c.head == main_head and c.last_write_at >= written and c.last_write_src == "reconciler"


def test_retarget_to_another_branch_head_keeps_the_branch(lakefs, clock, repo):
    create_branch(lakefs, repo, "other")
    upload(lakefs, repo, "other", "o.txt")
    other_head = commit(lakefs, repo, "other", "other's work").id
    hooked_branch(lakefs, clock, repo, "feature-r", datetime.now(UTC) - timedelta(minutes=5))
    idle_policy(lakefs, repo, "feature-*", "10s")
    lakefs.call("reset", lakefs.experimental.hard_reset_branch, repo, "feature-r", other_head)
    report = run_repository(lakefs, clock, repo, now=datetime.now(UTC), options=OPTIONS)
    assert "feature-r" in branches(lakefs, repo), report


def test_staged_delete_never_fingerprinted_keeps_the_branch(lakefs, clock, repo):
    committed_object(lakefs, repo)
    hooked_branch(lakefs, clock, repo, "feature-d", datetime.now(UTC) - timedelta(minutes=5))
    idle_policy(lakefs, repo, "feature-*", "10s")
    lakefs.call("delete", lakefs.objects.delete_object, repo, "feature-d", "base.txt")
    report = run_repository(lakefs, clock, repo, now=datetime.now(UTC), options=OPTIONS)
    assert "feature-d" in branches(lakefs, repo), report
    assert clock.get(repo, "feature-d").last_write_src == "reconciler"


def test_dry_run_and_preview_see_the_unreported_write_and_record_nothing(lakefs, clock, repo):
    hooked_branch(lakefs, clock, repo, "feature-p", datetime.now(UTC) - timedelta(minutes=5))
    idle_policy(lakefs, repo, "feature-*", "10s")
    upload(lakefs, repo, "main", "m.txt")
    lakefs.call("reset", lakefs.experimental.hard_reset_branch, repo, "feature-p",
                commit(lakefs, repo, "main", "m").id)
    before = clock.get(repo, "feature-p")
    decision = {d.branch_id: d for d in plan(lakefs, clock, repo, now=datetime.now(UTC)).decisions}["feature-p"]
    assert (decision.action, decision.reason) == ("keep", "unreported-write")
    report = run_repository(lakefs, clock, repo, now=datetime.now(UTC), options=OPTIONS, dry_run=True)
    assert outcome(report, "feature-p") is None and report.skipped.get("unreported-write") == 1
    assert clock.get(repo, "feature-p") == before


def test_branch_looked_at_and_unchanged_is_still_deleted(lakefs, clock, repo):
    # The look before deletion must not keep everything: a quiet branch past its idle time goes.
    hooked_branch(lakefs, clock, repo, "feature-q", datetime.now(UTC) - timedelta(minutes=5))
    reconcile_repository(lakefs, clock, repo, now=datetime.now(UTC) - timedelta(minutes=4))
    idle_policy(lakefs, repo, "feature-*", "10s")
    report = run_repository(lakefs, clock, repo, now=datetime.now(UTC), options=OPTIONS)
    assert outcome(report, "feature-q").result == "deleted"
    assert "feature-q" not in branches(lakefs, repo)


def test_staged_delete_on_first_look_is_a_write_after_creation(lakefs, clock, repo):
    committed_object(lakefs, repo)
    created = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=30)
    hooked_branch(lakefs, clock, repo, "feature-y", created)
    lakefs.call("delete", lakefs.objects.delete_object, repo, "feature-y", "base.txt")
    deleted_at = datetime.now(UTC).replace(microsecond=0)
    report = reconcile_repository(lakefs, clock, repo, now=datetime.now(UTC))
    assert [(w.branch_id, w.kind) for w in report.writes] == [("feature-y", "staged")]
    assert clock.get(repo, "feature-y").last_write_at >= deleted_at
    idle_policy(lakefs, repo, "feature-*", "1h")
    later = created + timedelta(hours=1, seconds=10)
    decision = {d.branch_id: d for d in plan(lakefs, clock, repo, now=later).decisions}["feature-y"]
    assert decision.action == "keep", decision


def test_retarget_is_dated_when_observed_not_at_the_target_commit(lakefs, clock, repo):
    hooked_branch(lakefs, clock, repo, "feature-t", datetime.now(UTC) - timedelta(minutes=5))
    clock.observe(repo, "feature-t", head=head_of(lakefs, repo, "feature-t"), fingerprint="", now=datetime.now(UTC) - timedelta(minutes=4))
    time.sleep(1.1)  # the target commit is newer than everything the clock knows, to the second
    upload(lakefs, repo, "main", "t.txt")
    target = commit(lakefs, repo, "main", "target")
    time.sleep(2.1)  # the retarget happens well after the target commit was made
    retargeted = datetime.now(UTC).replace(microsecond=0)
    lakefs.call("reset", lakefs.experimental.hard_reset_branch, repo, "feature-t", target.id)
    report = reconcile_repository(lakefs, clock, repo, now=datetime.now(UTC))
    (write,) = [w for w in report.writes if w.branch_id == "feature-t"]
    assert write.kind == "reset" and write.at >= retargeted > datetime.fromtimestamp(target.creation_date, UTC)


def test_retarget_to_a_year_old_commit_does_not_look_a_year_idle(lakefs, clock, repo):
    upload(lakefs, repo, "main", "old.txt")
    year_ago = int((datetime.now(UTC) - timedelta(days=365)).timestamp())
    old = lakefs.call("commit", lakefs.commits.commit, repo, "main",
                      lakefs_sdk.CommitCreation(message="a year ago", var_date=year_ago))
    hooked_branch(lakefs, clock, repo, "feature-o", datetime.now(UTC) - timedelta(minutes=5))
    upload(lakefs, repo, "feature-o", "f.txt")
    commit(lakefs, repo, "feature-o", "newer")
    clock.record_write(repo, "feature-o", datetime.now(UTC) - timedelta(minutes=3),
                       head=head_of(lakefs, repo, "feature-o"))
    reconcile_repository(lakefs, clock, repo, now=datetime.now(UTC) - timedelta(minutes=2))
    lakefs.call("reset", lakefs.experimental.hard_reset_branch, repo, "feature-o", old.id)
    observed = datetime.now(UTC).replace(microsecond=0)
    reconcile_repository(lakefs, clock, repo, now=datetime.now(UTC))
    assert clock.get(repo, "feature-o").last_write_at >= observed


def test_staged_delete_is_not_dated_at_an_older_upload(lakefs, clock, repo):
    committed_object(lakefs, repo)
    hooked_branch(lakefs, clock, repo, "feature-s", datetime.now(UTC) - timedelta(minutes=5))
    reconcile_repository(lakefs, clock, repo, now=datetime.now(UTC) - timedelta(minutes=4))
    upload(lakefs, repo, "feature-s", "up.txt")
    time.sleep(2.1)
    deleted_at = datetime.now(UTC).replace(microsecond=0)
    lakefs.call("delete", lakefs.objects.delete_object, repo, "feature-s", "base.txt")
    report = reconcile_repository(lakefs, clock, repo, now=datetime.now(UTC))
    (write,) = [w for w in report.writes if w.branch_id == "feature-s"]
    assert write.at >= deleted_at


def test_new_upload_alone_is_dated_at_its_mtime(lakefs, clock, repo):
    hooked_branch(lakefs, clock, repo, "feature-u", datetime.now(UTC) - timedelta(minutes=5))
    reconcile_repository(lakefs, clock, repo, now=datetime.now(UTC) - timedelta(minutes=4))
    upload(lakefs, repo, "feature-u", "u.txt")
    mtime = lakefs.call("stat", lakefs.objects.stat_object, repo, "feature-u", "u.txt").mtime
    report = reconcile_repository(lakefs, clock, repo, now=datetime.now(UTC) + timedelta(minutes=10))
    (write,) = [w for w in report.writes if w.branch_id == "feature-u"]
    assert int(write.at.timestamp()) == mtime


def test_hidden_branches_are_evaluated_like_every_branch(lakefs, clock, repo):
    lakefs.call("create hidden", lakefs.branches.create_branch, repo,
                lakefs_sdk.BranchCreation(name="tmp-hidden", source="main", hidden=True))
    clock.record_created(repo, "tmp-hidden", datetime.now(UTC) - timedelta(minutes=5),
                         head=head_of(lakefs, repo, "tmp-hidden"))
    idle_policy(lakefs, repo, "tmp-*", "10s")
    decisions = {d.branch_id: d for d in plan(lakefs, clock, repo, now=datetime.now(UTC)).decisions}
    assert decisions["tmp-hidden"].action == "delete"
    report = run_repository(lakefs, clock, repo, now=datetime.now(UTC), options=OPTIONS)
    assert outcome(report, "tmp-hidden").result == "deleted"
    assert "tmp-hidden" not in branches(lakefs, repo)


def test_branch_created_without_a_create_hook_is_adopted_by_the_reconciler(lakefs, clock, repo):
    # As when lakeFS has not loaded a freshly installed action file yet: no hook, so no creation time.
    create_branch(lakefs, repo, "feature-race")
    first_look = datetime.now(UTC) - timedelta(minutes=5)
    reconcile_repository(lakefs, clock, repo, now=first_look)
    idle_policy(lakefs, repo, "feature-*", "10s")
    skipped = {d.branch_id: d for d in plan(lakefs, clock, repo, now=datetime.now(UTC)).decisions}["feature-race"]
    assert skipped.reason == "no-creation-time"
    adopted = {d.branch_id: d for d in plan(lakefs, clock, repo, now=datetime.now(UTC),
                                            adopt_untracked=True).decisions}["feature-race"]
    assert adopted.action == "delete" and adopted.age >= timedelta(minutes=5)


class CountingStats:
    """The real client, counting the staged-object stats a run asks lakeFS for."""

    def __init__(self, lakefs):
        self._lakefs, self.stats = lakefs, 0

    def __getattr__(self, name):
        return getattr(self._lakefs, name)

    def call(self, what, fn, *args, **kwargs):
        if what == "stat staged object":
            self.stats += 1
        return self._lakefs.call(what, fn, *args, **kwargs)

    def paginate(self, what, fn, *args, **kwargs):
        return self._lakefs.paginate(what, fn, *args, **kwargs)


def test_staged_stats_budget_reaches_the_pre_delete_look(lakefs, clock, repo, env):
    from workers.shared.settings import load_settings  # noqa: PLC0415

    hooked_branch(lakefs, clock, repo, "feature-b", datetime.now(UTC) - timedelta(minutes=5))
    for i in range(3):
        upload(lakefs, repo, "feature-b", f"s{i}.txt")
    idle_policy(lakefs, repo, "feature-*", "10s")
    import os  # noqa: PLC0415

    old = dict(os.environ)
    os.environ.update({**env, "LAKEFS_JANITOR_RECONCILE_MAX_STAGED_STATS": "0"})
    try:
        options = LifecycleOptions.from_settings(load_settings())
    finally:
        os.environ.clear()
        os.environ.update(old)
    counting = CountingStats(lakefs)
    run_repository(counting, clock, repo, now=datetime.now(UTC), options=options, dry_run=True)
    assert counting.stats == 0
    run_repository(counting, clock, repo, now=datetime.now(UTC), options=LifecycleOptions(max_stats=2), dry_run=True)
    assert counting.stats == 2  # the budget, at the look that keeps the branch (its staged uploads are news)
