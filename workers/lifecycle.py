"""A branch lifecycle run for one repository: read policies and clocks, evaluate, re-check, delete, record.

The decisions come from the pure ``evaluation.evaluate``; this module only gathers its inputs and carries out
its verdicts through the lakeFS API (so pre/post-delete-branch hooks fire).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta

from workers.clock import ClockStore
from workers.evaluation import BranchState, Decision, evaluate, written_since
from workers.lakefs_client import LakeFS, LakeFSError, NotFound, PreconditionFailed
from workers.metrics import Metrics
from workers.policies import Policy
from workers.policy_store import get_policies

log = logging.getLogger(__name__)
DELETION_LOG_LENGTH = 10_000


@dataclass
class Plan:
    repository_id: str
    default_branch: str
    read_only: bool
    policies: list[Policy]
    states: dict[str, BranchState]
    decisions: list[Decision]
    now: datetime


@dataclass
class Outcome:
    branch_id: str
    result: str  # deleted | would-delete | written-since | vetoed | gone | failed | capped
    policy_id: str | None
    detail: str = ""


@dataclass
class RunReport:
    repository_id: str
    dry_run: bool
    outcomes: list[Outcome] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    locked_out: bool = False

    def count(self, result: str) -> int:
        return sum(o.result == result for o in self.outcomes)


def _branch_states(lakefs: LakeFS, clock: ClockStore, repository_id: str, adopt_untracked: bool,
                   now: datetime) -> dict[str, BranchState]:
    heads = dict(lakefs.branch_heads(repository_id))
    clocks = clock.activity_many(repository_id, heads)
    states = {}
    for branch_id, head in heads.items():
        c = clocks[branch_id]
        created = c.created_at
        if created is None and adopt_untracked:
            # Opt-in: a branch that predates tracking is born when the service first saw it.
            created = c.first_seen_at or now
            clock.record_created(repository_id, branch_id, created, "adopted")
        states[branch_id] = BranchState(branch_id, head, created, c.last_write_at)
    return states


def plan(lakefs: LakeFS, clock: ClockStore, repository_id: str, now: datetime,
         adopt_untracked: bool = False, policies: list[Policy] | None = None) -> Plan:
    repo = lakefs.call("get repository", lakefs.repositories.get_repository, repository_id)
    if policies is None:
        policies = get_policies(lakefs, repository_id).policies
    read_only = bool(getattr(repo, "read_only", False))
    states = _branch_states(lakefs, clock, repository_id, adopt_untracked, now) if policies else {}
    decisions = evaluate(states.values(), repo.default_branch, policies, now, read_only=read_only)
    return Plan(repository_id, repo.default_branch, read_only, policies, states, decisions, now)


def _current_state(lakefs: LakeFS, clock: ClockStore, repository_id: str, branch_id: str) -> BranchState | None:
    try:
        ref = lakefs.call("get branch", lakefs.branches.get_branch, repository_id, branch_id)
    except NotFound:
        return None
    c = clock.get(repository_id, branch_id)
    return BranchState(branch_id, ref.commit_id, c.created_at, c.last_write_at)


def execute(lakefs: LakeFS, clock: ClockStore, the_plan: Plan, dry_run: bool = False, max_deletions: int = 100,
            metrics: Metrics | None = None) -> RunReport:
    report = RunReport(the_plan.repository_id, dry_run)
    repo = the_plan.repository_id
    deleted = 0
    for decision in the_plan.decisions:
        if decision.action != "delete":
            report.skipped[decision.reason] = report.skipped.get(decision.reason, 0) + 1
            if metrics:
                metrics.branches_skipped.labels(repo, decision.reason).inc()
            continue
        if deleted >= max_deletions:
            report.outcomes.append(Outcome(decision.branch_id, "capped", decision.policy_id,
                                           f"deletion cap of {max_deletions} per run reached"))
            continue
        outcome = _delete_one(lakefs, clock, the_plan, decision, dry_run, metrics)
        deleted += outcome.result in ("deleted", "would-delete")
        report.outcomes.append(outcome)
    return report


def _delete_one(lakefs: LakeFS, clock: ClockStore, the_plan: Plan, decision: Decision, dry_run: bool,
                metrics: Metrics | None) -> Outcome:
    repo, branch = the_plan.repository_id, decision.branch_id
    if branch == the_plan.default_branch:  # evaluation never proposes it; refuse twice all the same
        return Outcome(branch, "failed", decision.policy_id, "refusing to delete the default branch")
    try:
        current = _current_state(lakefs, clock, repo, branch)
        if current is None:
            return Outcome(branch, "gone", decision.policy_id, "already deleted")
        if written_since(the_plan.states[branch], current):
            log.info("lifecycle: %s/%s written since evaluation; kept", repo, branch)
            return Outcome(branch, "written-since", decision.policy_id, "written after it was evaluated")
        if dry_run:
            return Outcome(branch, "would-delete", decision.policy_id, decision.detail)
        lakefs.call(f"delete branch {branch}", lakefs.branches.delete_branch, repo, branch)
    except PreconditionFailed as exc:
        log.warning("lifecycle: deletion of %s/%s vetoed by a pre-delete-branch hook: %s", repo, branch, exc)
        if metrics:
            metrics.deletions_vetoed.labels(repo, decision.policy_id or "").inc()
        return Outcome(branch, "vetoed", decision.policy_id, str(exc))
    except NotFound:
        return Outcome(branch, "gone", decision.policy_id, "already deleted")
    except LakeFSError as exc:
        log.error("lifecycle: deleting %s/%s failed: %s", repo, branch, exc)
        return Outcome(branch, "failed", decision.policy_id, str(exc))
    record_deletion(clock, repo, branch, current.head, decision, the_plan.now)
    if metrics:
        metrics.branches_deleted.labels(repo, decision.policy_id or "").inc()
    return Outcome(branch, "deleted", decision.policy_id, decision.detail)


def _deletions_key(clock: ClockStore, repository_id: str) -> str:
    return f"{clock.prefix}:deletions:{repository_id}"


def _last_deletion_key(clock: ClockStore, repository_id: str) -> str:
    return f"{clock.prefix}:deleted-heads:{repository_id}"


def record_deletion(clock: ClockStore, repository_id: str, branch_id: str, head: str | None, decision: Decision,
                    now: datetime) -> None:
    entry = {
        "repository_id": repository_id, "branch_id": branch_id, "head": head, "policy_id": decision.policy_id,
        "deleted_at": datetime.now(UTC).isoformat(), "evaluated_at": now.isoformat(), "reason": decision.detail,
    }
    text = json.dumps(entry, sort_keys=True)
    log.warning("lifecycle: deleted branch %s", text)  # enough to restore it by hand: repository, branch, HEAD
    pipe = clock.redis.pipeline()
    pipe.lpush(_deletions_key(clock, repository_id), text)
    pipe.ltrim(_deletions_key(clock, repository_id), 0, DELETION_LOG_LENGTH - 1)
    pipe.hset(_last_deletion_key(clock, repository_id), branch_id, text)
    pipe.execute()


def deletions(clock: ClockStore, repository_id: str, limit: int = 100) -> list[dict]:
    return [json.loads(x) for x in clock.redis.lrange(_deletions_key(clock, repository_id), 0, limit - 1)]


def last_deletion(clock: ClockStore, repository_id: str, branch_id: str) -> dict | None:
    raw = clock.redis.hget(_last_deletion_key(clock, repository_id), branch_id)
    return json.loads(raw) if raw else None


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
