"""The reconciler: finds writes that fire no lakeFS hook (resets, retargets, staging writes) or whose hook
call was lost, by comparing each branch's HEAD and a fingerprint of its uncommitted changes with what it saw
last time.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime

from workers.clock import BranchClock, ClockStore
from workers.lakefs_client import LakeFS, NotFound
from workers.locks import named_lock, release_quietly
from workers.metrics import Metrics

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
    fingerprint: str  # "" when the branch has no uncommitted changes
    latest_mtime: datetime | None


def _cursor_key(clock: ClockStore, repository_id: str) -> str:
    return f"{clock.prefix}:reconcile-cursor:{repository_id}"


def staged_state(lakefs: LakeFS, repository_id: str, branch_id: str, max_stats: int) -> StagedState:
    """Fingerprint the branch's uncommitted changes; stat up to max_stats objects for checksum and mtime,
    since a diff entry alone cannot tell two same-size overwrites apart."""
    entries: list[list[object]] = []
    latest: datetime | None = None
    for diff in lakefs.paginate("list uncommitted changes", lakefs.branches.diff_branch, repository_id, branch_id):
        entry: list[object] = [diff.type, diff.path, diff.size_bytes]
        if diff.type != "removed" and diff.path_type == "object" and len(entries) < max_stats:
            try:
                stat = lakefs.call("stat staged object", lakefs.objects.stat_object, repository_id, branch_id, diff.path)
            except NotFound:
                continue  # removed while we looked; the next run sees the new state
            entry += [stat.checksum, stat.mtime]
            mtime = datetime.fromtimestamp(stat.mtime, UTC)
            latest = mtime if latest is None else max(latest, mtime)
        entries.append(entry)
    if not entries:
        return StagedState("", None)
    digest = hashlib.sha256(json.dumps(entries, sort_keys=True).encode()).hexdigest()
    return StagedState(digest, latest)


def _later(candidate: datetime | None, than: datetime | None) -> bool:
    return candidate is not None and (than is None or candidate > than)


def detect_writes(clock: BranchClock, head: str, head_created: datetime | None, staged: StagedState,
                  now: datetime, previous_head_created: datetime | None = None) -> list[DetectedWrite]:
    """Pure: which writes the difference between what was seen and what is there now implies."""
    writes: list[DetectedWrite] = []
    last = clock.last_activity
    if clock.head is not None and head != clock.head:
        # Only a commit made after we last saw the old HEAD can be dated by its own time. A reset or retarget,
        # even to a recent commit, happened at some unknown moment since the last look: dated now.
        known = (last, previous_head_created, clock.head_at)
        newest_known = max((t for t in known if t is not None), default=None)
        if _later(head_created, newest_known):
            writes.append(DetectedWrite(clock.branch_id, "commit", head_created))
        else:
            writes.append(DetectedWrite(clock.branch_id, "reset", now))
    if staged.fingerprint != (clock.staged_fingerprint or ""):
        if _later(staged.latest_mtime, last):
            writes.append(DetectedWrite(clock.branch_id, "staged", staged.latest_mtime))
        elif clock.staged_fingerprint is not None:
            # Seen before and changed without a newer mtime: a delete, a reset of staged objects, or an mtime
            # we could not read. Staged changes found on a first look with no newer mtime are no news.
            writes.append(DetectedWrite(clock.branch_id, "staged", now))
    return writes


def _head_created(lakefs: LakeFS, repository_id: str, head: str) -> datetime | None:
    try:
        commit = lakefs.call("get HEAD commit", lakefs.commits.get_commit, repository_id, head)
    except NotFound:
        return None
    return datetime.fromtimestamp(commit.creation_date, UTC)


RECONCILE_LOCK_SECONDS = 900


def reconcile_repository(lakefs: LakeFS, clock: ClockStore, repository_id: str, now: datetime,
                         max_branches: int = 5000, max_stats: int = 1000,
                         metrics: Metrics | None = None) -> ReconcileReport:
    # Overlapping passes would share (and overwrite) one cursor; the lock expires should a worker die.
    lock = named_lock(clock.redis, clock.prefix, f"reconcile:{repository_id}", RECONCILE_LOCK_SECONDS)
    if not lock.acquire():
        return ReconcileReport(repository_id, complete=False, locked_out=True)
    try:
        return _reconcile(lakefs, clock, repository_id, now, max_branches, max_stats, metrics)
    finally:
        release_quietly(lock, f"reconcile {repository_id}")


def _reconcile(lakefs: LakeFS, clock: ClockStore, repository_id: str, now: datetime, max_branches: int,
               max_stats: int, metrics: Metrics | None) -> ReconcileReport:
    report = ReconcileReport(repository_id)
    cursor_key = _cursor_key(clock, repository_id)
    cursor = clock.redis.get(cursor_key)
    cursor = cursor.decode() if isinstance(cursor, bytes) else (cursor or "")
    seen: set[str] = set()
    for branch_id, head in lakefs.branch_heads(repository_id, after=cursor, show_hidden=True):
        if report.branches_seen >= max_branches:
            report.complete = False
            break
        report.branches_seen += 1
        seen.add(branch_id)
        _reconcile_branch(lakefs, clock, repository_id, branch_id, head, now, max_stats, report, metrics)
    if report.complete:
        clock.redis.delete(cursor_key)
        if not cursor:  # a whole pass from the start: anything not listed is gone
            _forget_missing(clock, repository_id, seen, now, report)
    else:
        clock.redis.set(cursor_key, max(seen))
    return report


def _reconcile_branch(lakefs: LakeFS, clock: ClockStore, repository_id: str, branch_id: str, head: str,
                      now: datetime, max_stats: int, report: ReconcileReport, metrics: Metrics | None) -> None:
    current = clock.get(repository_id, branch_id)
    try:
        staged = staged_state(lakefs, repository_id, branch_id, max_stats)
    except NotFound:
        return  # deleted while we looked
    moved = current.head not in (None, head)
    head_created = _head_created(lakefs, repository_id, head) if moved else None
    previous_created = _head_created(lakefs, repository_id, current.head) if moved else None
    for write in detect_writes(current, head, head_created, staged, now, previous_created):
        if clock.record_write(repository_id, branch_id, write.at, "reconciler"):
            report.writes.append(write)
            log.info("reconciler: write on %s/%s (%s at %s)", repository_id, branch_id, write.kind, write.at)
            if metrics:
                metrics.reconcile_writes.labels(repository_id, write.kind).inc()
    clock.observe(repository_id, branch_id, head, staged.fingerprint, now)


def _forget_missing(clock: ClockStore, repository_id: str, seen: set[str], started: datetime,
                    report: ReconcileReport) -> None:
    # The tombstone is dated at the start of the listing, so a branch created since keeps its record.
    for branch_id in sorted(clock.known_branches(repository_id) - seen):
        if clock.record_deleted(repository_id, branch_id, started):
            report.forgotten.append(branch_id)


def writable_repositories(lakefs: LakeFS) -> list[str]:
    """Read-only repositories cannot be written, so they have nothing to reconcile."""
    return [repo.id for repo in lakefs.paginate("list repositories", lakefs.repositories.list_repositories)
            if not getattr(repo, "read_only", False)]
