"""What a branch lifecycle run does to one repository: read policies and clocks, plan (evaluate), then execute:
re-check each due branch, delete it, record it. ``run.run_repository`` wraps it (lock, metrics, warnings).

The decisions come from the pure ``evaluation.evaluate``; this module only gathers its inputs and carries out
its verdicts through the lakeFS API (so pre/post-delete-branch hooks fire).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta

from workers.branch_lifecycle.evaluation import (
    BranchState,
    Decision,
    evaluate,
    written_since,
)
from workers.branch_lifecycle.policies import Policy
from workers.branch_lifecycle.store import LifecycleRecords, get_policies
from workers.idle_clock.reconcile import DetectedWrite, look_at_branch
from workers.idle_clock.store import Activity, BranchClock, ClockStore
from workers.shared.lakefs.client import (
    LakeFS,
    LakeFSError,
    NotFound,
    PreconditionFailed,
    Unavailable,
)
from workers.shared.metrics import Metrics

log = logging.getLogger(__name__)


@dataclass
class Plan:
    repository_id: str
    default_branch: str
    read_only: bool
    policies: list[Policy]
    states: dict[str, BranchState]
    decisions: list[Decision]
    now: datetime
    adopt_untracked: bool = False


@dataclass
class Outcome:
    branch_id: str
    # deleted | would-delete | written-since | vetoed | gone | failed | capped | unavailable | not-attempted
    result: str
    policy_id: str | None
    detail: str = ""


@dataclass
class RunReport:
    repository_id: str
    dry_run: bool
    outcomes: list[Outcome] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    locked_out: bool = False
    aborted: str | None = None  # why the run stopped before trying every due branch

    def count(self, result: str) -> int:
        return sum(o.result == result for o in self.outcomes)

    @property
    def succeeded(self) -> bool:
        return not self.locked_out and self.aborted is None and not self.count("failed")


def _created(clock: BranchClock | Activity, adopt_untracked: bool) -> datetime | None:
    # Opt-in adoption: a branch that predates tracking counts as born when the reconciler first saw it (always
    # the real clock). Nothing is written here, so a preview or a dry run leaves no trace.
    return clock.created_at or (clock.first_seen_at if adopt_untracked else None)


def _branch_states(lakefs: LakeFS, clock: ClockStore, repository_id: str,
                   adopt_untracked: bool) -> dict[str, BranchState]:
    # Hidden branches too: the seed evaluates every branch, and a forgotten hidden branch pins data as any other.
    heads = dict(lakefs.branch_heads(repository_id, show_hidden=True))
    activity = clock.activity_many(repository_id, heads)
    return {
        branch_id: BranchState(branch_id, head, _created(activity[branch_id], adopt_untracked),
                               activity[branch_id].last_write_at)
        for branch_id, head in heads.items()
    }


def plan(lakefs: LakeFS, clock: ClockStore, repository_id: str, *, now: datetime, adopt_untracked: bool = False, policies: list[Policy] | None = None, max_stats: int = 1000,
         record: bool = False) -> Plan:
    """Evaluate every branch; each branch found due is first looked at as the reconciler would, so a write no
    hook reported (a reset, a retarget, a staged change) keeps it. ``record`` writes what that look finds to
    the clock (a real run); a preview or a dry run leaves no trace."""
    # Two independent round trips: overlap them (a scheduled run does this for every repository).
    with ThreadPoolExecutor(max_workers=2) as pool:
        repo_call = pool.submit(lakefs.call, "get repository", lakefs.repositories.get_repository, repository_id)
        if policies is None:
            policies = get_policies(lakefs, repository_id).policies
        repo = repo_call.result()
    read_only = bool(getattr(repo, "read_only", False))
    states = _branch_states(lakefs, clock, repository_id, adopt_untracked) if policies else {}
    decisions = evaluate(states.values(), repo.default_branch, policies, now=now, read_only=read_only)
    decisions = [_look_again(lakefs, clock, repository_id=repository_id, decision=d, state=states.get(d.branch_id),
                             default_branch=repo.default_branch, policies=policies, now=now, max_stats=max_stats,
                             record=record)
                 if d.action == "delete" else d for d in decisions]
    return Plan(repository_id, repo.default_branch, read_only, policies, states, decisions, now, adopt_untracked)


def _look_again(lakefs: LakeFS, clock: ClockStore, *, repository_id: str, decision: Decision,
                state: BranchState | None, default_branch: str, policies: list[Policy], now: datetime,
                max_stats: int, record: bool) -> Decision:
    if state is None or state.head is None:
        return decision
    try:
        writes = look_at_branch(lakefs, clock, repository_id=repository_id, branch_id=state.branch_id,
                                head=state.head, now=now, max_stats=max_stats, record=record)
    except NotFound:
        return decision  # deleted meanwhile; the deletion step reports it as gone
    if not writes:
        return decision
    latest = max(w.at for w in writes)
    written = BranchState(state.branch_id, state.head, state.created_at,
                          max(latest, state.last_write_at) if state.last_write_at else latest)
    again = evaluate([written], default_branch, policies, now=now)[0]
    log.info("lifecycle: %s/%s has a write no hook reported (%s); kept in this run", repository_id,
             state.branch_id, _writes_text(writes))
    return dataclasses.replace(
        again, action="keep", reason="unreported-write", policy_id=decision.policy_id,
        detail=f"written since the idle clock last looked ({_writes_text(writes)}); kept in this run")


def _writes_text(writes: list[DetectedWrite]) -> str:
    return ", ".join(f"{w.kind} at {w.at.isoformat().replace('+00:00', 'Z')}" for w in writes)


def execute(lakefs: LakeFS, clock: ClockStore, the_plan: Plan, *, dry_run: bool = False, max_deletions: int = 100,
            metrics: Metrics | None = None, still_ours: Callable[[], bool] = lambda: True,
            max_stats: int = 1000) -> RunReport:
    """Carry out the plan's deletions; still_ours() is asked before each one (the run's lock)."""
    report = RunReport(the_plan.repository_id, dry_run)
    repo = the_plan.repository_id
    deleted = 0
    for decision in the_plan.decisions:
        if decision.action != "delete":
            report.skipped[decision.reason] = report.skipped.get(decision.reason, 0) + 1
            if metrics:
                metrics.branches_skipped.labels(repo, decision.reason).inc()
            continue
        if report.aborted is None and not still_ours():
            report.aborted = ("the run lost its lock (it outlived lifecycle_lock_seconds, or no replica acknowledged "
                              "its renewal: a Redis failover); stopping")
        if report.aborted:
            outcome = Outcome(decision.branch_id, "not-attempted", decision.policy_id, report.aborted)
        elif deleted >= max_deletions:
            outcome = Outcome(decision.branch_id, "capped", decision.policy_id,
                              f"deletion cap of {max_deletions} per run reached")
        else:
            outcome = _delete_one(lakefs, clock, the_plan, decision, dry_run, metrics, max_stats)
            deleted += outcome.result in ("deleted", "would-delete")
            if outcome.result == "unavailable":
                report.aborted = f"lakeFS is unavailable ({outcome.detail}); stopping"
        if metrics:
            metrics.lifecycle_outcomes.labels(repo, outcome.result).inc()
        report.outcomes.append(outcome)
    return report


def _current(lakefs: LakeFS, clock: ClockStore, the_plan: Plan, branch_id: str) -> tuple[BranchState, BranchClock] | None:
    try:
        ref = lakefs.call("get branch", lakefs.branches.get_branch, the_plan.repository_id, branch_id)
    except NotFound:
        return None
    c = clock.get(the_plan.repository_id, branch_id)
    return BranchState(branch_id, ref.commit_id, _created(c, the_plan.adopt_untracked), c.last_write_at), c


def _written_unreported(lakefs: LakeFS, clock: ClockStore, the_plan: Plan, current: BranchState, *,
                        dry_run: bool, max_stats: int) -> bool:
    """Uploads, deletes and resets fire no hook and reach the clock only through the reconciler: look now."""
    writes = look_at_branch(lakefs, clock, repository_id=the_plan.repository_id, branch_id=current.branch_id,
                            head=current.head, now=the_plan.now, max_stats=max_stats, record=not dry_run)
    return bool(writes)


def _delete_one(lakefs: LakeFS, clock: ClockStore, the_plan: Plan, decision: Decision, dry_run: bool,
                metrics: Metrics | None, max_stats: int) -> Outcome:
    repo, branch = the_plan.repository_id, decision.branch_id
    if branch == the_plan.default_branch:  # evaluation never proposes it; refuse twice all the same
        return Outcome(branch, "failed", decision.policy_id, "refusing to delete the default branch")
    current: BranchState | None = None  # set once the branch has been re-read; the delete call comes after
    try:
        found = _current(lakefs, clock, the_plan, branch)
        if found is None:
            return Outcome(branch, "gone", decision.policy_id, "already deleted")
        current, _ = found
        evaluated = the_plan.states[branch]
        if written_since(evaluated, current) or _written_unreported(lakefs, clock, the_plan, current,
                                                                    dry_run=dry_run, max_stats=max_stats):
            log.info("lifecycle: %s/%s written since evaluation; kept", repo, branch)
            return Outcome(branch, "written-since", decision.policy_id, "written after it was evaluated")
        if dry_run:
            return Outcome(branch, "would-delete", decision.policy_id, decision.detail)
        # Recorded before the call: if the answer is lost, the branch can still be restored at this HEAD.
        record_deletion(clock, repo, branch, head=current.head, decision=decision, now=the_plan.now, status="pending")
        lakefs.call(f"delete branch {branch}", lakefs.branches.delete_branch, repo, branch)
    except PreconditionFailed as exc:
        log.warning("lifecycle: deletion of %s/%s vetoed by a pre-delete-branch hook: %s", repo, branch, exc)
        if current is not None:
            record_deletion(clock, repo, branch, head=current.head, decision=decision, now=the_plan.now, status="vetoed")
        if metrics:
            metrics.deletions_vetoed.labels(repo, decision.policy_id or "").inc()
        return Outcome(branch, "vetoed", decision.policy_id, str(exc))
    except NotFound as exc:
        # lakeFS also answers 404 when a pre-delete-branch hook cannot load its actions: ask whether it is gone.
        if current is not None and _still_exists(lakefs, repo, branch) is not False:
            log.error("lifecycle: deleting %s/%s failed: %s", repo, branch, exc)
            if not dry_run:
                record_deletion(clock, repo, branch, head=current.head, decision=decision, now=the_plan.now, status="failed")
            return Outcome(branch, "failed", decision.policy_id, str(exc))
        return Outcome(branch, "gone", decision.policy_id, "already deleted")
    except Unavailable as exc:
        # The delete call may have gone through before its answer was lost: ask again.
        if current is not None and not dry_run and _still_exists(lakefs, repo, branch) is False:
            return _deleted(clock, the_plan, decision, current.head, metrics)
        return Outcome(branch, "unavailable", decision.policy_id, str(exc))
    except LakeFSError as exc:
        log.error("lifecycle: deleting %s/%s failed: %s", repo, branch, exc)
        if current is not None and not dry_run:
            record_deletion(clock, repo, branch, head=current.head, decision=decision, now=the_plan.now, status="failed")
        return Outcome(branch, "failed", decision.policy_id, str(exc))
    return _deleted(clock, the_plan, decision, current.head, metrics)


def _still_exists(lakefs: LakeFS, repo: str, branch: str) -> bool | None:
    """After a lost answer: True/False when lakeFS can tell, None (treated as 'maybe') when it still cannot."""
    try:
        lakefs.call("get branch", lakefs.branches.get_branch, repo, branch)
    except NotFound:
        return False
    except LakeFSError:
        return None
    return True


def _deleted(clock: ClockStore, the_plan: Plan, decision: Decision, head: str | None,
             metrics: Metrics | None) -> Outcome:
    record_deletion(clock, the_plan.repository_id, decision.branch_id, head=head, decision=decision, now=the_plan.now, status="deleted")
    if metrics:
        metrics.branches_deleted.labels(the_plan.repository_id, decision.policy_id or "").inc()
    return Outcome(decision.branch_id, "deleted", decision.policy_id, decision.detail)


def record_deletion(clock: ClockStore, repository_id: str, branch_id: str, *, head: str | None, decision: Decision,
                    now: datetime, status: str = "deleted") -> None:
    """Keep the branch's last HEAD (for restore) and, once deleted, log it in the history list."""
    entry = {
        "repository_id": repository_id, "branch_id": branch_id, "head": head, "policy_id": decision.policy_id,
        "deleted_at": datetime.now(UTC).isoformat(), "evaluated_at": now.isoformat(), "reason": decision.detail,
        "status": status,
    }
    if status == "deleted":  # enough to restore it by hand: repository, branch, HEAD
        log.warning("lifecycle: deleted branch %s", json.dumps(entry, sort_keys=True))
    LifecycleRecords.beside(clock).record_deletion(entry, logged=status == "deleted")


def pending_within(the_plan: Plan, window: timedelta) -> list[Decision]:
    """Branches that are due now or will be within the window (for the gauge and the warning)."""
    horizon = the_plan.now + window
    return [d for d in the_plan.decisions
            if d.action == "delete" or (d.action == "keep" and d.delete_at is not None and d.delete_at <= horizon)]


def decision_dict(d: Decision) -> dict:
    out = asdict(d)
    for key in ("age", "idle"):
        out[f"{key}_seconds"] = int(out.pop(key).total_seconds()) if out[key] is not None else None
    out["delete_at"] = d.delete_at.isoformat().replace("+00:00", "Z") if d.delete_at else None
    return out
