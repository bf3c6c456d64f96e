"""An object lifecycle run for one repository: evaluate each branch a rule selects at its HEAD, and apply what
expired as one commit per branch, without ever committing a user's staged changes.

How one branch is expired is ``expiry``'s (a short-lived branch, squash-merged back ``dest-wins``); what a run
reports is ``outcomes``'s; undoing a run is ``restore``'s. A branch with uncommitted changes is skipped (they stay
staged; the next run tries again).

Requests: the listing (1 per 1,000 objects) and a handful per branch (branch, protection rules, staged check),
then ``expiry``'s.
"""

from __future__ import annotations

import fnmatch
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from workers.object_lifecycle.evaluation import ObjectInfo, applicable_rules, evaluate
from workers.object_lifecycle.expiry import TEMP_PREFIX, drop_branch, expire
from workers.object_lifecycle.outcomes import BranchOutcome, RunReport, new_run_id, tally
from workers.object_lifecycle.rules import Rule
from workers.object_lifecycle.store import RULES, ObjectLifecycleRecords
from workers.shared.lakefs.client import Forbidden, LakeFS, LakeFSError, Unauthorized, Unavailable
from workers.shared.locks import release_quietly, still_held
from workers.shared.metrics import Metrics
from workers.shared.runs import refuse_future

log = logging.getLogger(__name__)

# The failure streak of a run that fails before any branch; not a branch id (lakeFS's have no parentheses), and not
# "" (Prometheus reads an empty label as no label).
WHOLE_RUN = "(run)"


@dataclass(frozen=True)
class RunOptions:
    max_deletions: int = 100_000
    lock_seconds: int = 3600
    depth: int = 1  # folders of a path that make a prefix in the history
    # Called with (step, branch_id) at "evaluated" and "staged": where a test writes on the branch meanwhile.
    between: Callable[[str, str], None] | None = None


# --- reading lakeFS ------------------------------------------------------------------------------------------


def listing_prefixes(rules: list[Rule]) -> list[str]:
    """The fewest prefixes whose listings hold every path the rules can select ([""]: the whole branch)."""
    kept: list[str] = []
    for prefix in sorted({p for r in rules for p in r.listing_prefixes()}):
        if not any(prefix.startswith(k) for k in kept):
            kept.append(prefix)
    return kept


def branch_objects(lakefs: LakeFS, repository_id: str, ref: str, *, prefixes: list[str],
                   amount: int = 1000) -> Iterator[ObjectInfo]:
    """Every object of the ref under the prefixes (paginated listings, ``amount`` a page; no per-object request)."""
    for prefix in prefixes:
        for stat in lakefs.paginate_json(f"list objects of {ref}", lakefs.objects.list_objects_with_http_info,
                                         repository_id, ref, prefix=prefix, user_metadata=False, amount=amount):
            if stat.get("path_type", "object") == "object":
                yield ObjectInfo(stat["path"], datetime.fromtimestamp(stat["mtime"], UTC), stat.get("size_bytes") or 0)


def protection_pattern(branch_id: str, patterns: list[str]) -> str | None:
    """The branch protection rule that covers the branch, if any (lakeFS matches its patterns as globs)."""
    return next((p for p in patterns if fnmatch.fnmatchcase(branch_id, p)), None)


def _has_staged_changes(lakefs: LakeFS, repository_id: str, branch_id: str) -> bool:
    page = lakefs.call(f"diff branch {branch_id}", lakefs.branches.diff_branch, repository_id, branch_id, amount=1)
    return bool(page.results)


# --- the run -------------------------------------------------------------------------------------------------


def run_repository(lakefs: LakeFS, records: ObjectLifecycleRecords, repository_id: str, *, now: datetime,
                   options: RunOptions, dry_run: bool = False, only_branch: str | None = None,
                   metrics: Metrics | None = None) -> RunReport:
    """One run over the repository's branches (or one branch). A dry run writes nothing anywhere."""
    if not dry_run:
        refuse_future(now, would="would expire objects that have not reached their age yet")
    report = RunReport(new_run_id(now), repository_id, dry_run, now)
    if dry_run:
        _run(lakefs, report, only_branch=only_branch, options=options, still_ours=lambda: True, records=None)
        return report
    lock = records.run_lock(repository_id, options.lock_seconds)
    if not lock.acquire():
        log.info("object lifecycle: another run holds the lock for %s; skipped", repository_id)
        report.locked_out = True
        return report
    started = time.monotonic()
    try:
        _run(lakefs, report, only_branch=only_branch, options=options, still_ours=still_held(lock),
             records=records)
    except Exception:
        if metrics:  # a run that fails before any branch (lakeFS down, unusable rules) is a streak of its own
            streak = records.count_failure(repository_id, WHOLE_RUN, failed=True)
            metrics.object_lifecycle_consecutive_failures.labels(repository_id, WHOLE_RUN).set(streak)
        raise
    finally:
        release_quietly(lock, "object lifecycle")
    if metrics:
        _count(metrics, records, report, time.monotonic() - started)
    return report


def _run(lakefs: LakeFS, report: RunReport, *, only_branch: str | None, options: RunOptions,
         still_ours: Callable[[], bool], records: ObjectLifecycleRecords | None) -> None:
    repo_id = report.repository_id
    repo = lakefs.call("get repository", lakefs.repositories.get_repository, repo_id)
    rules = RULES.get(lakefs, repo_id).policies
    report.rules = [r.id for r in rules if r.enabled]
    if not report.rules:
        return
    if records is not None:  # a real run, holding the repository's lock: no other run is using one
        _drop_leftovers(lakefs, repo_id)
    if only_branch is not None:
        lakefs.call(f"get branch {only_branch}", lakefs.branches.get_branch, repo_id, only_branch)  # 404 → clear error
        branches = [only_branch]
    else:
        branches = [b for b, _ in lakefs.branch_heads(repo_id) if not b.startswith(TEMP_PREFIX)]
    patterns = _protection_patterns(lakefs, repo_id)
    remaining = options.max_deletions
    for branch_id in branches:
        applying = applicable_rules(rules, branch_id, is_default=branch_id == repo.default_branch)
        if not applying:
            continue
        if report.aborted:
            report.branches.append(BranchOutcome(branch_id, "not-attempted", detail=report.aborted))
            continue
        try:
            outcome = _branch(lakefs, report, branch_id=branch_id, rules=rules, applying=applying,
                              default_branch=repo.default_branch, read_only=bool(getattr(repo, "read_only", False)),
                              patterns=patterns, limit=remaining, options=options, still_ours=still_ours,
                              records=records)
        except Unavailable as exc:
            outcome = BranchOutcome(branch_id, "failed", "lakefs-unavailable", str(exc))
            report.aborted = f"lakeFS is unavailable ({exc}); stopping"
        except LakeFSError as exc:
            outcome = BranchOutcome(branch_id, "failed", "lakefs", str(exc))
        remaining -= outcome.objects  # a dry run counts what it would expire against the cap too
        report.branches.append(outcome)
        if records is not None:
            records.save_run(report.document())


def _drop_leftovers(lakefs: LakeFS, repository_id: str) -> None:
    """Short-lived branches of runs that died before deleting them: hidden, but their commits pin data."""
    for branch_id, _ in lakefs.branch_heads(repository_id, show_hidden=True):
        if branch_id.startswith(TEMP_PREFIX):
            log.warning("object lifecycle: deleting %s/%s, left by a run that stopped", repository_id, branch_id)
            drop_branch(lakefs, repository_id, branch_id)


def _protection_patterns(lakefs: LakeFS, repository_id: str) -> list[str] | None:
    """None when the janitor may not read them: every branch is then treated as possibly protected."""
    try:
        rules = lakefs.call("get branch protection rules", lakefs.repositories.get_branch_protection_rules,
                            repository_id)
    except (Forbidden, Unauthorized):
        return None
    return [r.pattern for r in rules or []]


def _branch(lakefs: LakeFS, report: RunReport, *, branch_id: str, rules: list[Rule], applying: list[Rule],
            default_branch: str, read_only: bool, patterns: list[str] | None, limit: int, options: RunOptions,
            still_ours: Callable[[], bool], records: ObjectLifecycleRecords | None) -> BranchOutcome:
    repo_id = report.repository_id
    head = lakefs.call(f"get branch {branch_id}", lakefs.branches.get_branch, repo_id, branch_id).commit_id
    prefixes = listing_prefixes(applying)
    # The committed objects at the HEAD (a commit id, not the branch): staged changes are not the rules' business.
    evaluation = evaluate(rules, branch_objects(lakefs, repo_id, head, prefixes=prefixes), branch_id=branch_id,
                          is_default=branch_id == default_branch, now=report.now, depth=options.depth,
                          limit=max(limit, 0))
    outcome = BranchOutcome(branch_id, "nothing-due", evaluated_commit=head, due=evaluation.objects,
                            capped=evaluation.left_out)
    if not evaluation.expired:
        if evaluation.objects:
            outcome.result, outcome.reason = "skipped", "capped"
            outcome.detail = (f"the cap of {options.max_deletions} objects per run is reached; "
                              f"{evaluation.objects} due objects wait for the next run")
        return outcome
    if skipped := _why_skip(lakefs, repo_id, branch_id, read_only=read_only, patterns=patterns):
        outcome.result, (outcome.reason, outcome.detail) = "skipped", skipped
        return outcome
    if report.dry_run:
        outcome.result = "would-expire"
        tally(outcome, evaluation.expired, options.depth)
        return outcome
    if not still_ours():
        report.aborted = ("the run lost its lock (it outlived object_lifecycle_lock_seconds, or no replica "
                          "acknowledged its renewal: a Redis failover); stopping")
        outcome.result, outcome.detail = "not-attempted", report.aborted
        return outcome
    return expire(lakefs, report, outcome, evaluation=evaluation, prefixes=prefixes, options=options,
                  records=records)


def _why_skip(lakefs: LakeFS, repository_id: str, branch_id: str, *, read_only: bool,
              patterns: list[str] | None) -> tuple[str, str] | None:
    where = f"lakefs://{repository_id}/{branch_id}"
    if read_only:
        return "read-only", f"lakefs://{repository_id} is read-only; nothing can be committed to it"
    if patterns is None:
        return "permission", (f"the janitor's lakeFS user may not read the branch protection rules of "
                              f"lakefs://{repository_id} (needs "
                              "branches:GetBranchProtectionRules); branches are left alone until it may")
    if (pattern := protection_pattern(branch_id, patterns)) is not None:
        return "protected", (f"{where} is protected by the branch protection rule {pattern!r}: its changes go "
                             "through reviewed merges, so the janitor commits nothing to it. Expire on a branch "
                             "that is merged into it, or remove it from the rules' branches")
    if _has_staged_changes(lakefs, repository_id, branch_id):
        return "uncommitted-changes", (f"{where} has uncommitted changes; lakeFS merges only into a clean branch "
                                       "and the janitor never commits someone else's changes. They stay staged; "
                                       "the next run tries again")
    return None


def _count(metrics: Metrics, records: ObjectLifecycleRecords, report: RunReport, seconds: float) -> None:
    repo = report.repository_id
    metrics.object_lifecycle_seconds.observe(seconds)
    for b in report.branches:
        metrics.object_lifecycle_branch_runs.labels(repo, b.result).inc()
        for rule_id, t in b.by_rule.items():
            metrics.object_lifecycle_objects_expired.labels(repo, rule_id).inc(t["objects"])
            metrics.object_lifecycle_bytes_expired.labels(repo, rule_id).inc(t["bytes"])
        if b.result in ("failed", "expired", "nothing-due"):
            streak = records.count_failure(repo, b.branch_id, failed=b.result == "failed")
            metrics.object_lifecycle_consecutive_failures.labels(repo, b.branch_id).set(streak)
    if report.succeeded:
        streak = records.count_failure(repo, WHOLE_RUN, failed=False)
        metrics.object_lifecycle_consecutive_failures.labels(repo, WHOLE_RUN).set(streak)
        metrics.object_lifecycle_last_success.labels(repo).set(time.time())
