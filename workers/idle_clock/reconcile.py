"""The reconciler: finds writes that fire no lakeFS hook (resets, retargets, staging writes) or whose hook
call was lost, by comparing each branch's HEAD and a fingerprint of its uncommitted changes with what it saw
last time.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from workers.idle_clock.events import WRITE_EVENTS
from workers.idle_clock.store import BranchClock, ClockStore
from workers.shared.lakefs.client import LakeFS, LakeFSError, NotFound
from workers.shared.locks import release_quietly
from workers.shared.metrics import Metrics

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DetectedWrite:
    branch_id: str
    kind: str  # "commit" (HEAD moved forward), "reset" (HEAD moved elsewhere), "staged"
    at: datetime


@dataclass
class ReconcileReport:
    repository_id: str
    branches_seen: int = 0
    writes: list[DetectedWrite] = field(default_factory=list)
    forgotten: list[str] = field(default_factory=list)
    complete: bool = True  # False when the per-run bound stopped the pass early
    locked_out: bool = False  # another reconcile of this repository was running


@dataclass(frozen=True)
class StagedState:
    """The uncommitted changes of a branch as one look saw them.

    ``entries`` is what the fingerprint hashes, in diff order; ``mtimes`` holds, per entry, the staged object's
    modification time when it could be read (uploads), else None (deletes, entries past the stat budget).
    """

    fingerprint: str  # "" when the branch has no uncommitted changes
    latest_mtime: datetime | None
    entries: tuple[tuple, ...] = ()
    mtimes: tuple[datetime | None, ...] = ()

    def newer_uploads(self, since: datetime) -> tuple[str, datetime | None]:
        """The fingerprint of the entries *not* explained by an upload after ``since``, and the newest such
        upload. A change whose unexplained part matches the previous fingerprint was made only of those uploads."""
        rest = [e for e, m in zip(self.entries, self.mtimes, strict=True) if m is None or m <= since]
        newest = max((m for m in self.mtimes if m is not None and m > since), default=None)
        return _fingerprint(rest), newest


def _fingerprint(entries: list | tuple) -> str:
    if not entries:
        return ""
    return hashlib.sha256(json.dumps(list(entries), sort_keys=True).encode()).hexdigest()


def staged_state(lakefs: LakeFS, repository_id: str, branch_id: str, *, max_stats: int) -> StagedState:
    """Fingerprint the branch's uncommitted changes; stat up to max_stats objects for checksum and mtime,
    since a diff entry alone cannot tell two same-size overwrites apart."""
    entries: list[tuple] = []
    mtimes: list[datetime | None] = []
    stats = 0
    for diff in lakefs.paginate("list uncommitted changes", lakefs.branches.diff_branch, repository_id, branch_id):
        entry: tuple = (diff.type, diff.path, diff.size_bytes)
        mtime: datetime | None = None
        if diff.type != "removed" and diff.path_type == "object" and stats < max_stats:
            stats += 1
            try:
                stat = lakefs.call("stat staged object", lakefs.objects.stat_object, repository_id, branch_id, diff.path)
            except NotFound:
                continue  # removed while we looked; the next run sees the new state
            entry += (stat.checksum, stat.mtime)
            mtime = datetime.fromtimestamp(stat.mtime, UTC)
        entries.append(entry)
        mtimes.append(mtime)
    latest = max((m for m in mtimes if m is not None), default=None)
    return StagedState(_fingerprint(entries), latest, tuple(entries), tuple(mtimes))


# lakeFS's event_time (and so a hook's recorded time) is truncated to the second.
HOOK_TIME_RESOLUTION = timedelta(seconds=1)


def detect_writes(clock: BranchClock, head: str, staged: StagedState, *, now: datetime, head_written_at: datetime | None = None) -> list[DetectedWrite]:
    """Pure: which writes the difference between what was seen and what is there now implies.

    Every write is dated no earlier than it happened (an early date could delete a branch too soon): a time is
    taken from lakeFS only when it provably is the write's own, otherwise the write is dated ``now``, the
    observation, which is late by at most the time since the previous look.
    """
    writes: list[DetectedWrite] = []
    if clock.head is not None and head != clock.head:
        # A HEAD no hook reported: a commit or merge whose hook call was lost (lakeFS's own action run for it
        # on this branch gives its time), or a reset/retarget, which fires no hook and whose target commit's
        # date says nothing about when the branch moved.
        # The run must start clearly after the last time this branch was known to hold another HEAD. A hook's
        # time has whole seconds (the HEAD it reported may have been there until the end of that second), and
        # a post-hook runs in a goroutine that can start late: a run for the same commit from an earlier stay
        # of the branch on it (or a previous life of the branch) then lands in that second.
        if head_written_at is not None and (clock.head_at is None or head_written_at > clock.head_at + HOOK_TIME_RESOLUTION):
            writes.append(DetectedWrite(clock.branch_id, "commit", min(head_written_at, now)))
        else:
            writes.append(DetectedWrite(clock.branch_id, "reset", now))
    previous, previous_at = clock.staged_fingerprint, clock.observed_at
    if previous is None and clock.created_at is not None:
        # A branch starts with nothing staged: whatever its first look finds was written after its creation.
        previous, previous_at = "", clock.created_at
    if previous is not None and staged.fingerprint != previous:
        rest, newest = staged.newer_uploads(previous_at) if previous_at is not None else (None, None)
        if newest is not None and rest == previous:
            writes.append(DetectedWrite(clock.branch_id, "staged", min(newest, now)))
        else:  # a delete, an unstaged or overwritten upload, or an mtime we could not read: dated at observation
            writes.append(DetectedWrite(clock.branch_id, "staged", now))
    return writes


def head_written_at(lakefs: LakeFS, repository_id: str, branch_id: str, *, head: str) -> datetime | None:
    """When lakeFS ran the actions of the write that made ``head`` this branch's HEAD, if it ran any: a hook
    call that was lost still left its run in lakeFS, with the real time of the write."""
    try:
        # lakeFS filters by commit or by branch, not both (400): the branch is checked here.
        runs = lakefs.call("list action runs", lakefs.actions.list_repository_runs, repository_id,
                           commit=head, amount=100)
    except LakeFSError:
        return None  # no evidence: the write is dated at observation
    times = [run.start_time for run in runs.results
             if run.event_type in WRITE_EVENTS and run.branch == branch_id and run.commit_id == head
             and run.start_time is not None]
    return max(times).astimezone(UTC) if times else None


def look_at_branch(lakefs: LakeFS, clock: ClockStore, *, repository_id: str, branch_id: str, head: str,
                   now: datetime, max_stats: int, record: bool = True) -> list[DetectedWrite]:
    """One reconciler look at one branch: the writes it finds, recorded (and the look remembered) unless
    ``record`` is False (a preview or a dry run leaves no trace)."""
    current = clock.get(repository_id, branch_id)
    staged = staged_state(lakefs, repository_id, branch_id, max_stats=max_stats)
    moved = current.head not in (None, head)
    written_at = head_written_at(lakefs, repository_id, branch_id, head=head) if moved else None
    writes = detect_writes(current, head, staged, now=now, head_written_at=written_at)
    if record:
        writes = [w for w in writes if clock.record_write(repository_id, branch_id, w.at, source="reconciler")]
        clock.observe(repository_id, branch_id, head=head, fingerprint=staged.fingerprint, now=now)
    return writes


RECONCILE_LOCK_SECONDS = 900


def reconcile_repository(lakefs: LakeFS, clock: ClockStore, repository_id: str, *, now: datetime, max_branches: int = 5000, max_stats: int = 1000,
                         metrics: Metrics | None = None) -> ReconcileReport:
    # Overlapping passes would share (and overwrite) one cursor; the lock expires should a worker die.
    lock = clock.reconcile_lock(repository_id, RECONCILE_LOCK_SECONDS)
    if not lock.acquire():
        return ReconcileReport(repository_id, complete=False, locked_out=True)
    try:
        return _reconcile(lakefs, clock, repository_id, now, max_branches, max_stats, metrics)
    finally:
        release_quietly(lock, f"reconcile {repository_id}")


def _reconcile(lakefs: LakeFS, clock: ClockStore, repository_id: str, now: datetime, max_branches: int,
               max_stats: int, metrics: Metrics | None) -> ReconcileReport:
    report = ReconcileReport(repository_id)
    cursor = clock.reconcile_cursor(repository_id)
    # What the clock knew before the listing: only those can be missing from it. A branch recorded while the pass
    # looks at the others was created after the listing began (even if recorded with an earlier creation time): the
    # listing could not see it, and forgetting it would lose its creation time, never to be deleted by a policy.
    known = clock.known_branches(repository_id) if not cursor else set()
    seen: set[str] = set()
    for branch_id, head in lakefs.branch_heads(repository_id, after=cursor, show_hidden=True):
        if report.branches_seen >= max_branches:
            report.complete = False
            break
        report.branches_seen += 1
        seen.add(branch_id)
        _reconcile_branch(lakefs, clock, repository_id, branch_id, head, now, max_stats, report, metrics)
    if report.complete:
        clock.set_reconcile_cursor(repository_id, None)
        if not cursor:  # a whole pass from the start: anything known before it and not listed is gone
            _forget_missing(clock, repository_id, known - seen, now, report)
    else:
        clock.set_reconcile_cursor(repository_id, max(seen))
    return report


def _reconcile_branch(lakefs: LakeFS, clock: ClockStore, repository_id: str, branch_id: str, head: str,
                      now: datetime, max_stats: int, report: ReconcileReport, metrics: Metrics | None) -> None:
    try:
        writes = look_at_branch(lakefs, clock, repository_id=repository_id, branch_id=branch_id, head=head,
                                now=now, max_stats=max_stats)
    except NotFound:
        return  # deleted while we looked
    for write in writes:
        report.writes.append(write)
        log.info("reconciler: write on %s/%s (%s at %s)", repository_id, branch_id, write.kind,
                 write.at.isoformat().replace("+00:00", "Z"))
        if metrics:
            metrics.reconcile_writes.labels(repository_id, write.kind).inc()


def _forget_missing(clock: ClockStore, repository_id: str, missing: set[str], started: datetime,
                    report: ReconcileReport) -> None:
    # The tombstone is dated at the start of the listing, so a branch created since keeps its record.
    for branch_id in sorted(missing):
        if clock.record_deleted(repository_id, branch_id, started):
            report.forgotten.append(branch_id)


def writable_repositories(lakefs: LakeFS) -> list[str]:
    """Read-only repositories cannot be written, so they have nothing to reconcile."""
    return [repo.id for repo in lakefs.paginate("list repositories", lakefs.repositories.list_repositories)
            if not getattr(repo, "read_only", False)]
