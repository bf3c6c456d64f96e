from datetime import UTC, datetime, timedelta

from workers.clock import BranchClock
from workers.reconciler import StagedState, detect_writes

T = datetime(2026, 5, 1, tzinfo=UTC)
NOW = T + timedelta(days=3)
CLEAN = StagedState("", None)


def seen(**kw):
    base = {"repository_id": "r", "branch_id": "b", "created_at": T, "head": "h1", "staged_fingerprint": ""}
    return BranchClock(**{**base, **kw})


def test_nothing_changed_is_no_write():
    assert detect_writes(seen(), "h1", None, CLEAN, NOW) == []


def test_head_moved_forward_is_a_write_at_the_commit_time():
    w = detect_writes(seen(), "h2", T + timedelta(days=1), CLEAN, NOW, previous_head_created=T)
    assert [(x.kind, x.at) for x in w] == [("commit", T + timedelta(days=1))]


def test_head_moved_to_an_older_commit_is_a_reset_now():
    w = detect_writes(seen(last_write_at=T + timedelta(days=2)), "h0", T - timedelta(days=9), CLEAN, NOW,
                      previous_head_created=T + timedelta(days=2))
    assert [(x.kind, x.at) for x in w] == [("reset", NOW)]


def test_reset_to_an_older_commit_counts_even_without_known_activity():
    w = detect_writes(seen(created_at=None), "h0", T - timedelta(days=1), CLEAN, NOW, previous_head_created=T)
    assert [x.kind for x in w] == ["reset"]


def test_first_look_records_no_head_write():
    assert detect_writes(seen(head=None, staged_fingerprint=None), "h1", None, CLEAN, NOW) == []


def test_staged_change_uses_the_newest_mtime_when_newer():
    mtime = T + timedelta(hours=5)
    w = detect_writes(seen(), "h1", None, StagedState("fp", mtime), NOW)
    assert [(x.kind, x.at) for x in w] == [("staged", mtime)]


def test_staged_change_without_newer_mtime_is_now():
    w = detect_writes(seen(last_write_at=T + timedelta(days=2), staged_fingerprint="fp1"), "h1", None,
                      StagedState("fp2", T), NOW)
    assert [(x.kind, x.at) for x in w] == [("staged", NOW)]
    # the staged fingerprint went from "fp" to clean: a reset of staged objects
    w = detect_writes(seen(staged_fingerprint="fp"), "h1", None, CLEAN, NOW)
    assert [(x.kind, x.at) for x in w] == [("staged", NOW)]


def test_staged_found_on_first_look_without_newer_mtime_is_no_news():
    old = T - timedelta(days=1)
    assert detect_writes(seen(staged_fingerprint=None), "h1", None, StagedState("fp", old), NOW) == []


def test_last_activity_ignores_writes_of_a_previous_life():
    c = seen(created_at=T, last_write_at=T - timedelta(days=1))
    assert c.last_activity == T
