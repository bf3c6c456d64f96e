"""How the reconciler dates the writes no hook reported: never earlier than they happened."""

from datetime import UTC, datetime, timedelta

from workers.idle_clock.reconcile import StagedState, _fingerprint, detect_writes
from workers.idle_clock.store import BranchClock

T = datetime(2026, 5, 1, tzinfo=UTC)
LOOKED = T + timedelta(days=1)  # the previous look
NOW = T + timedelta(days=3)
CLEAN = StagedState("", None)


def staged(*items: tuple[str, datetime | None]) -> StagedState:
    """Entries by path, each with the mtime of its staged object (None: a delete, or not statted)."""
    entries = tuple(("added" if m else "removed", path, 1) for path, m in items)
    mtimes = tuple(m for _, m in items)
    latest = max((m for m in mtimes if m), default=None)
    return StagedState(_fingerprint(entries), latest, entries, mtimes)


def seen(**kw):
    base = {"repository_id": "r", "branch_id": "b", "created_at": T, "head": "h1", "head_at": LOOKED,
            "staged_fingerprint": "", "observed_at": LOOKED}
    return BranchClock(**{**base, **kw})


def kinds(writes):
    return [(w.kind, w.at) for w in writes]


def test_nothing_changed_is_no_write():
    assert detect_writes(seen(), "h1", CLEAN, now=NOW) == []
    before = staged(("a", T + timedelta(hours=1)))
    assert detect_writes(seen(staged_fingerprint=before.fingerprint), "h1", before, now=NOW) == []


def test_unreported_head_move_is_dated_at_observation():
    # A reset or retarget fires no hook: the target commit's own date says nothing about when the branch moved.
    assert kinds(detect_writes(seen(), "h2", CLEAN, now=NOW)) == [("reset", NOW)]
    assert kinds(detect_writes(seen(created_at=None), "h0", CLEAN, now=NOW)) == [("reset", NOW)]


def test_lost_hook_commit_is_dated_by_lakefs_action_run():
    ran = LOOKED + timedelta(hours=2)
    assert kinds(detect_writes(seen(), "h2", CLEAN, now=NOW, head_written_at=ran)) == [("commit", ran)]


def test_action_run_older_than_the_last_look_is_not_evidence():
    # The branch was reset back onto a commit once made on it: that run is not this write.
    old_run = T + timedelta(hours=1)
    assert kinds(detect_writes(seen(), "h0", CLEAN, now=NOW, head_written_at=old_run)) == [("reset", NOW)]


def test_future_times_are_capped_at_now():
    later = NOW + timedelta(days=5)
    assert kinds(detect_writes(seen(), "h2", CLEAN, now=NOW, head_written_at=later)) == [("commit", NOW)]
    assert kinds(detect_writes(seen(), "h1", staged(("a", later)), now=NOW)) == [("staged", NOW)]


def test_first_look_records_no_head_write():
    assert detect_writes(seen(head=None, staged_fingerprint=None, created_at=None), "h1", CLEAN, now=NOW) == []


def test_new_uploads_only_are_dated_at_their_newest_mtime():
    up = LOOKED + timedelta(hours=5)
    assert kinds(detect_writes(seen(), "h1", staged(("a", LOOKED + timedelta(hours=1)), ("b", up)), now=NOW)) == [
        ("staged", up)]


def test_staged_delete_beside_an_older_upload_is_dated_at_observation():
    # Defect: the delete was dated at the remaining upload's mtime, which is older than the delete.
    upload = LOOKED + timedelta(hours=1)
    w = detect_writes(seen(), "h1", staged(("a", upload), ("gone", None)), now=NOW)
    assert kinds(w) == [("staged", NOW)]


def test_changed_upload_beside_older_ones_is_dated_at_its_mtime():
    kept = staged(("a", T + timedelta(hours=1)))
    now_with_b = staged(("a", T + timedelta(hours=1)), ("b", LOOKED + timedelta(hours=3)))
    w = detect_writes(seen(staged_fingerprint=kept.fingerprint), "h1", now_with_b, now=NOW)
    assert kinds(w) == [("staged", LOOKED + timedelta(hours=3))]


def test_unstaged_upload_is_dated_at_observation():
    before = staged(("a", T + timedelta(hours=1)), ("b", T + timedelta(hours=2)))
    after = staged(("a", T + timedelta(hours=1)))
    assert kinds(detect_writes(seen(staged_fingerprint=before.fingerprint), "h1", after, now=NOW)) == [("staged", NOW)]
    assert kinds(detect_writes(seen(staged_fingerprint=before.fingerprint), "h1", CLEAN, now=NOW)) == [("staged", NOW)]


def test_upload_with_an_old_mtime_is_dated_at_observation():
    # A linked object can carry any mtime: one that predates the previous look cannot explain the change.
    assert kinds(detect_writes(seen(), "h1", staged(("a", T)), now=NOW)) == [("staged", NOW)]


def test_fingerprint_without_look_time_is_dated_at_observation():
    before = staged(("a", T))
    w = detect_writes(seen(staged_fingerprint=before.fingerprint, observed_at=None), "h1",
                      staged(("a", T), ("b", LOOKED)), now=NOW)
    assert kinds(w) == [("staged", NOW)]


def test_first_look_at_a_created_branch_counts_what_is_staged():
    # Defect: staged changes on the first look were "no news"; a branch starts clean, so they are writes.
    first = seen(staged_fingerprint=None, observed_at=None, head=None)
    assert kinds(detect_writes(first, "h1", staged(("gone", None)), now=NOW)) == [("staged", NOW)]
    up = T + timedelta(seconds=20)
    assert kinds(detect_writes(first, "h1", staged(("a", up)), now=NOW)) == [("staged", up)]
    assert detect_writes(first, "h1", CLEAN, now=NOW) == []


def test_first_look_at_an_untracked_branch_is_no_news():
    # No creation time: adoption starts the branch's life at this look, so nothing earlier matters.
    untracked = seen(staged_fingerprint=None, observed_at=None, head=None, created_at=None)
    assert detect_writes(untracked, "h1", staged(("gone", None)), now=NOW) == []


def test_last_activity_ignores_writes_of_a_previous_life():
    c = seen(created_at=T, last_write_at=T - timedelta(days=1))
    assert c.last_activity == T


def test_action_run_in_the_second_of_a_hook_reported_head_is_not_evidence():
    # Seen in a random history: the branch was re-created (its creation hook reported HEAD h1 at 12:00:00, a
    # whole second) and at 12:00:00.934 a delayed post-commit run of its previous life, for commit h2, started.
    # Retargeting the branch onto h2 a moment later is not that commit: it is dated at observation.
    hook_second = T.replace(hour=12)
    late_run = hook_second + timedelta(milliseconds=934)
    clock = seen(head_at=hook_second, observed_at=None, staged_fingerprint=None, created_at=hook_second)
    assert kinds(detect_writes(clock, "h2", CLEAN, now=NOW, head_written_at=late_run)) == [("reset", NOW)]
    # A run more than a second after that HEAD was known is still the lost hook's write.
    later_run = hook_second + timedelta(seconds=1, milliseconds=1)
    assert kinds(detect_writes(clock, "h2", CLEAN, now=NOW, head_written_at=later_run)) == [("commit", later_run)]
