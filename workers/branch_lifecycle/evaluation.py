"""Decide, for every branch of a repository, whether a lifecycle policy deletes it now.

Pure: the branch states and `now` are handed in, so the same inputs always give the same decisions and a dry run
shows exactly what a real run would do.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from spark_jobs.core.durations import format_duration
from workers.branch_lifecycle.policies import Policy

Action = Literal["delete", "keep", "skip"]


@dataclass(frozen=True, slots=True)
class BranchState:
    branch_id: str
    head: str | None  # HEAD commit id
    created_at: datetime | None
    last_write_at: datetime | None


@dataclass(frozen=True, slots=True)
class Decision:
    branch_id: str
    head: str | None
    action: Action
    reason: str  # default-branch | read-only | no-creation-time | expired | thresholds-not-crossed | no-matching-policy
    detail: str  # one human sentence
    policy_id: str | None  # the deleting policy; for "keep", the first policy matching by name
    age: timedelta | None  # now - created_at
    idle: timedelta | None  # now - last activity
    # Earliest instant at which some name-matching policy has all its thresholds reached. Thresholds must be
    # strictly exceeded, so the branch becomes eligible just *after* this instant, not at it. None: never.
    delete_at: datetime | None


def evaluate(
    branches: Iterable[BranchState],
    default_branch: str,
    policies: Sequence[Policy],
    *, now: datetime,
    read_only: bool = False,
) -> list[Decision]:
    """One decision per branch, in input order."""
    _require_aware(now, "now")
    return [_decide(branch, default_branch, policies, now, read_only) for branch in branches]


def last_activity(branch: BranchState) -> datetime | None:
    """The later of creation and last write.

    Never-written branches fall back to creation time; a write older than the creation belongs to an earlier
    branch of the same name (deleted and recreated) and must not make the new one look idle.
    """
    known = [t for t in (branch.created_at, branch.last_write_at) if t is not None]
    return max(known) if known else None


def written_since(evaluated: BranchState, current: BranchState) -> bool:
    """True if the branch changed between evaluation and the moment of deletion, so deleting must not go on.

    A state that becomes unknown (activity None where it was known, or the reverse) also counts as changed:
    when in doubt, keep the branch.
    """
    if evaluated.head != current.head:
        return True
    before, after = last_activity(evaluated), last_activity(current)
    if before is None or after is None:
        return before is not after
    return after > before


def _decide(branch: BranchState, default_branch: str, policies: Sequence[Policy], now: datetime,
            read_only: bool) -> Decision:
    for value, name in ((branch.created_at, "created_at"), (branch.last_write_at, "last_write_at")):
        if value is not None and (value.tzinfo is None or value.utcoffset() is None):
            _require_aware(value, f"{branch.branch_id!r} {name}")
    activity = last_activity(branch)
    age = now - branch.created_at if branch.created_at is not None else None
    idle = now - activity if activity is not None else None
    # Read-only first: it applies to the whole repository, so it is the more useful thing to tell.
    if read_only:
        return _skip(branch, "read-only", "the repository is read-only, so no branch is deleted", age, idle)
    if branch.branch_id == default_branch:
        return _skip(branch, "default-branch", "the default branch is always exempt", age, idle)
    if branch.created_at is None or activity is None:
        return _skip(branch, "no-creation-time", "lakeFS recorded no creation time, so its age is unknown",
                     age, idle)
    return _match(branch, policies, now, branch.created_at, activity)


def _match(branch: BranchState, policies: Sequence[Policy], now: datetime, created_at: datetime,
           activity: datetime) -> Decision:
    age, idle = now - created_at, now - activity
    matching = [p for p in policies if p.matches(branch.branch_id)]
    delete_at = _earliest_delete_at(matching, created_at, activity)

    def decide(action: Action, reason: str, detail: str, *, policy: Policy | None) -> Decision:
        policy_id = policy.id if policy else None
        return Decision(branch.branch_id, branch.head, action, reason, detail, policy_id, age, idle, delete_at)

    if not matching:
        return decide("keep", "no-matching-policy", "no policy pattern matches this branch", policy=None)
    applicable = next((p for p in matching if _applies(p, age, idle)), None)
    if applicable is not None:
        return decide("delete", "expired", _expired_detail(applicable, age, idle), policy=applicable)
    when = f"it becomes eligible after {delete_at.isoformat()}" if delete_at else "it never becomes eligible"
    detail = f"matches policy {matching[0].id!r} but has not crossed the thresholds yet; {when}"
    return decide("keep", "thresholds-not-crossed", detail, policy=matching[0])


def _applies(policy: Policy, age: timedelta, idle: timedelta) -> bool:
    if policy.max_age is None and policy.max_idle_age is None:
        return False  # nothing to cross; parse_policies never builds this, but a hand-made Policy could
    old = policy.max_age is None or age > policy.max_age
    quiet = policy.max_idle_age is None or idle > policy.max_idle_age
    return old and quiet


def _earliest_delete_at(matching: Sequence[Policy], created_at: datetime,
                        activity: datetime) -> datetime | None:
    instants = [t for t in (_threshold_instant(p, created_at, activity) for p in matching) if t is not None]
    return min(instants) if instants else None


def _threshold_instant(policy: Policy, created_at: datetime, activity: datetime) -> datetime | None:
    """The instant the policy's last threshold is reached (AND: the later of them)."""
    try:
        reached = [start + limit for start, limit in ((created_at, policy.max_age), (activity, policy.max_idle_age))
                   if limit is not None]
    except OverflowError:
        return None  # beyond year 9999: for all practical purposes, never
    return max(reached) if reached else None


def _expired_detail(policy: Policy, age: timedelta, idle: timedelta) -> str:
    crossed = []
    if policy.max_age is not None:
        crossed.append(f"max_age {format_duration(policy.max_age)} (age {_human(age)})")
    if policy.max_idle_age is not None:
        crossed.append(f"max_idle_age {format_duration(policy.max_idle_age)} (idle {_human(idle)})")
    return f"policy {policy.id!r} applies: past {' and '.join(crossed)}"


def _skip(branch: BranchState, reason: str, detail: str, age: timedelta | None,
          idle: timedelta | None) -> Decision:
    return Decision(branch.branch_id, branch.head, "skip", reason, detail, None, age, idle, None)


def _human(td: timedelta) -> str:
    # Clock skew can put a creation time in the future; show it rather than crash on a negative duration.
    return format_duration(td) if td >= timedelta(0) else "-" + format_duration(-td)


def _require_aware(value: datetime, name: str) -> None:
    # Naive datetimes would silently be read as local time; comparing them with aware ones raises anyway.
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be timezone-aware, got naive {value.isoformat()}")
