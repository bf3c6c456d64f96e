"""An object lifecycle run for one repository: evaluate each branch a rule selects at its HEAD, and apply what
expired as one commit per branch, without ever committing a user's staged changes.

The expired paths are deleted on a short-lived hidden branch made from the evaluated HEAD, committed there and
squash-merged back with lakeFS's ``dest-wins`` strategy: an object written again on the branch since evaluation
conflicts with its deletion, and the branch's version wins, so it stays. lakeFS runs the branch's pre-merge hooks
on that merge (a veto leaves the branch as it was), and the merge refuses a branch with uncommitted changes, so
those stay staged (the branch is skipped and tried again by the next run). What the commit really removed is worked
out from what moved on the branch while the run worked (lakeFS diffs), so the history and the metrics count that,
not the plan.

Requests: the listing (1 per 1,000 objects), a batch delete per 1,000 expired paths, and a handful per branch
(branch, protection rules, staged check, create, commit, merge, delete); when the branch moved while the run
worked, a diff of what moved (before the deletions, and before the merge).
"""

from __future__ import annotations

import fnmatch
import logging
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta

import lakefs_sdk

from workers.object_lifecycle.evaluation import Evaluation, Expiry, ObjectInfo, applicable_rules, evaluate, prefix_of
from workers.object_lifecycle.rules import Rule
from workers.object_lifecycle.store import RULES, ObjectLifecycleRecords
from workers.shared.lakefs.client import (
    Conflict,
    Forbidden,
    LakeFS,
    LakeFSError,
    NotFound,
    PreconditionFailed,
    Unauthorized,
    Unavailable,
)
from workers.shared.locks import release_quietly, still_held
from workers.shared.metrics import Metrics

log = logging.getLogger(__name__)

BATCH = 1000  # lakeFS's limit of paths per delete_objects request
TEMP_PREFIX = "janitor-object-lifecycle-"  # the short-lived branches; never evaluated themselves
META = "lakefs_janitor.object_lifecycle."  # commit metadata keys
FUTURE_TOLERANCE = timedelta(seconds=5)  # clocks of two hosts may disagree a little
# The failure streak of a run that fails before any branch; not a branch id (lakeFS's have no parentheses), and not
# "" (Prometheus reads an empty label as no label).
WHOLE_RUN = "(run)"


class FutureRunRefused(ValueError):
    """A real run dated in the future: it would expire objects that have not reached their age yet."""


@dataclass(frozen=True)
class RunOptions:
    max_deletions: int = 100_000
    lock_seconds: int = 3600
    depth: int = 1  # folders of a path that make a prefix in the history
    # Called with (step, branch_id) at "evaluated" and "staged": where a test writes on the branch meanwhile.
    between: Callable[[str, str], None] | None = None


@dataclass
class BranchOutcome:
    branch_id: str
    # expired | would-expire | nothing-due | skipped | vetoed | failed | not-attempted
    result: str
    reason: str = ""  # for skipped/failed: protected | uncommitted-changes | permission | read-only | lakefs | ...
    detail: str = ""
    evaluated_commit: str | None = None
    commit_id: str | None = None  # the commit on the branch that removed the objects
    due: int = 0  # objects the rules expired at evaluation
    capped: int = 0  # of those, left for the next run by the cap
    objects: int = 0  # removed by the commit (or, in a dry run, that would be)
    bytes: int = 0
    kept_rewritten: int = 0  # due, but written again on the branch since evaluation: they stay
    failed_paths: int = 0  # lakeFS refused to delete these paths on the short-lived branch
    by_rule: dict[str, dict[str, int]] = field(default_factory=dict)
    by_prefix: list[dict] = field(default_factory=list)


@dataclass
class RunReport:
    run_id: str
    repository_id: str
    dry_run: bool
    now: datetime
    rules: list[str] = field(default_factory=list)
    branches: list[BranchOutcome] = field(default_factory=list)
    locked_out: bool = False
    aborted: str | None = None

    @property
    def succeeded(self) -> bool:
        return not self.locked_out and self.aborted is None and not any(b.result == "failed" for b in self.branches)

    def document(self) -> dict:
        return {"run_id": self.run_id, "repository_id": self.repository_id, "dry_run": self.dry_run,
                "now": self.now.isoformat(), "rules": self.rules, "locked_out": self.locked_out,
                "aborted": self.aborted, "succeeded": self.succeeded,
                "objects": sum(b.objects for b in self.branches), "bytes": sum(b.bytes for b in self.branches),
                "branches": [asdict(b) for b in self.branches]}


def new_run_id(now: datetime) -> str:
    return f"{now.astimezone(UTC):%Y%m%dt%H%M%S}-{secrets.token_hex(3)}"


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


def _diff_paths(lakefs: LakeFS, repository_id: str, left: str, right: str, *, prefixes: list[str],
                kinds: tuple[str, ...]) -> set[str]:
    paths: set[str] = set()
    for prefix in prefixes:
        for d in lakefs.paginate_json(f"diff {left[:12]}..{right[:12]}", lakefs.refs.diff_refs_with_http_info,
                                      repository_id, left, right, prefix=prefix, type="two_dot"):
            if d.get("path_type", "object") == "object" and d["type"] in kinds:
                paths.add(d["path"])
    return paths


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
    if not dry_run and now > datetime.now(UTC) + FUTURE_TOLERANCE:
        raise FutureRunRefused(f"a run dated {now.isoformat()} is in the future and would expire objects that have "
                               "not reached their age yet; only a dry run may look ahead")
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
            _drop_branch(lakefs, repository_id, branch_id)


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
        _tally(outcome, evaluation.expired, options.depth)
        return outcome
    if not still_ours():
        report.aborted = "the run lost its lock (it outlived object_lifecycle_lock_seconds); stopping"
        outcome.result, outcome.detail = "not-attempted", report.aborted
        return outcome
    return _apply(lakefs, report, outcome, evaluation=evaluation, prefixes=prefixes, options=options,
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


def _tally(outcome: BranchOutcome, expiries: list[Expiry], depth: int) -> None:
    by_prefix: dict[tuple[str, str], dict[str, int]] = {}
    for e in expiries:
        outcome.objects += 1
        outcome.bytes += e.size
        for rule_id in e.rule_ids:
            t = outcome.by_rule.setdefault(rule_id, {"objects": 0, "bytes": 0})
            t["objects"] += 1
            t["bytes"] += e.size
            p = by_prefix.setdefault((rule_id, prefix_of(e.path, depth)), {"objects": 0, "bytes": 0})
            p["objects"] += 1
            p["bytes"] += e.size
    outcome.by_prefix = [{"rule_id": r, "prefix": p, **t} for (r, p), t in sorted(by_prefix.items())]


def commit_message(run_id: str, rule_ids: list[str], objects: int) -> str:
    return (f"lakefs-janitor object lifecycle: expire {objects} object{'s' if objects != 1 else ''} "
            f"(rules {', '.join(rule_ids)}; run {run_id})")


def _apply(lakefs: LakeFS, report: RunReport, outcome: BranchOutcome, *, evaluation: Evaluation,
           prefixes: list[str], options: RunOptions, records: ObjectLifecycleRecords | None) -> BranchOutcome:
    repo_id, branch_id, head = report.repository_id, outcome.branch_id, outcome.evaluated_commit
    assert head is not None
    expiries = evaluation.expired
    if options.between:
        options.between("evaluated", branch_id)
    # Written again on the branch since evaluation (committed): left out before anything is staged.
    current = lakefs.call(f"get branch {branch_id}", lakefs.branches.get_branch, repo_id, branch_id).commit_id
    if current != head:
        rewritten = _diff_paths(lakefs, repo_id, head, current, prefixes=prefixes, kinds=("changed", "removed"))
        kept = [e for e in expiries if e.path in rewritten]
        outcome.kept_rewritten += len(kept)
        expiries = [e for e in expiries if e.path not in rewritten]
    if not expiries:
        outcome.result, outcome.detail = "nothing-due", "every due object was written again since evaluation"
        return outcome
    rule_ids = sorted({r for e in expiries for r in e.rule_ids})
    metadata = {f"{META}run_id": report.run_id, f"{META}rules": ",".join(rule_ids),
                f"{META}evaluated_at": report.now.isoformat(), f"{META}evaluated_commit": head}
    temp = f"{TEMP_PREFIX}{report.run_id}-{len(report.branches)}"
    try:
        lakefs.call(f"create branch {temp}", lakefs.branches.create_branch, repo_id,
                    lakefs_sdk.BranchCreation(name=temp, source=head, hidden=True))
    except (Forbidden, Unauthorized) as exc:
        outcome.result, outcome.reason = "skipped", "permission"
        outcome.detail = (f"the janitor's lakeFS user may not create branches in lakefs://{repo_id} ({exc}); it needs "
                          "fs:CreateBranch, fs:DeleteObject, fs:CreateCommit and fs:DeleteBranch there")
        return outcome
    try:
        failed_paths = _delete_in_batches(lakefs, repo_id, temp, [e.path for e in expiries])
        outcome.failed_paths = len(failed_paths)
        message = commit_message(report.run_id, rule_ids, len(expiries) - len(failed_paths))
        if records is not None:
            outcome.result, outcome.detail = "pending", f"staged on {temp}"
            records.save_run(report.document() | {"pending_branch": asdict(outcome)})
        lakefs.call(f"commit {temp}", lakefs.commits.commit, repo_id, temp,
                    lakefs_sdk.CommitCreation(message=message, metadata=metadata))
        if options.between:
            options.between("staged", branch_id)
        merged = lakefs.call(f"merge {temp} into {branch_id}", lakefs.refs.merge_into_branch, repo_id, temp,
                             branch_id, merge=lakefs_sdk.Merge(message=message, metadata=metadata,
                                                               strategy="dest-wins", squash_merge=True))
    except PreconditionFailed as exc:
        outcome.result, outcome.reason, outcome.detail = "vetoed", "hook", f"a lakeFS hook refused: {exc}"
        return outcome
    except (Forbidden, Unauthorized) as exc:
        outcome.result, outcome.reason = "skipped", "permission"
        outcome.detail = f"the janitor's lakeFS user may not change lakefs://{repo_id}/{branch_id}: {exc}"
        return outcome
    except Conflict as exc:
        outcome.result, outcome.reason, outcome.detail = "skipped", "conflict", str(exc)
        return outcome
    except LakeFSError as exc:
        text = str(exc)
        if "dirty branch" in text or "uncommitted changes" in text:
            outcome.result, outcome.reason = "skipped", "uncommitted-changes"
            outcome.detail = (f"lakefs://{repo_id}/{branch_id} got uncommitted changes during the run; they stay "
                              "staged and the next run tries again")
            return outcome
        if "no changes" in text:  # every deletion met a newer write on the branch: the branch won them all
            outcome.result, outcome.detail = "nothing-due", "every due object was written again since evaluation"
            outcome.kept_rewritten += len(expiries)
            return outcome
        raise
    finally:
        _drop_branch(lakefs, repo_id, temp)
    commit_id = merged.reference
    outcome.commit_id = commit_id
    parent = lakefs.call("get commit", lakefs.commits.get_commit, repo_id, commit_id).parents[0]
    left = set(failed_paths)
    if parent != current:
        # The branch moved after the re-check: a path written (or deleted) meanwhile conflicted with its deletion
        # and the branch's version won (dest-wins); every other deletion landed. Only what moved is read: the diff
        # of the re-checked HEAD against the one merged onto, usually a page.
        left |= _diff_paths(lakefs, repo_id, current, parent, prefixes=prefixes, kinds=("changed", "removed"))
    done = [e for e in expiries if e.path not in left]
    outcome.kept_rewritten += len(expiries) - len(done) - outcome.failed_paths
    outcome.result = "expired"
    outcome.detail = ""
    _tally(outcome, done, options.depth)
    log.warning("object lifecycle: lakefs://%s/%s commit %s removed %d objects (%d bytes), run %s", repo_id,
                branch_id, commit_id, outcome.objects, outcome.bytes, report.run_id)
    return outcome


def _delete_in_batches(lakefs: LakeFS, repository_id: str, branch_id: str, paths: list[str]) -> list[str]:
    failed: list[str] = []
    for start in range(0, len(paths), BATCH):
        answer = lakefs.call(f"delete objects on {branch_id}", lakefs.objects.delete_objects, repository_id,
                             branch_id, lakefs_sdk.PathList(paths=paths[start:start + BATCH]))
        for error in getattr(answer, "errors", None) or []:
            if error.status_code != 404:  # already gone from the branch: nothing left to expire
                failed.append(error.path)
                log.warning("object lifecycle: lakeFS did not delete %s: %s", error.path, error.message)
    return failed


def _drop_branch(lakefs: LakeFS, repository_id: str, branch_id: str) -> None:
    try:
        lakefs.call(f"delete branch {branch_id}", lakefs.branches.delete_branch, repository_id, branch_id)
    except NotFound:
        pass
    except LakeFSError as exc:  # harmless but visible: a hidden branch named after the run
        log.warning("object lifecycle: could not delete the short-lived branch %s/%s: %s", repository_id,
                    branch_id, exc)


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


# --- restore -------------------------------------------------------------------------------------------------


@dataclass
class Restored:
    branch_id: str
    commit_id: str  # the run's commit
    revert_commit_id: str | None
    detail: str = ""


def restore(lakefs: LakeFS, records: ObjectLifecycleRecords, repository_id: str, *, run_id: str,
            branch_id: str | None = None) -> list[Restored]:
    """Revert the commits a run made (each branch's, or one branch's): every object it expired is back. The run's
    record names them; without one (Redis lost it, or the run died before writing it) the branches' logs are
    searched for the run's commit metadata."""
    record = records.run(repository_id, run_id)
    if record is None:
        found = _commits_of_run(lakefs, repository_id, run_id, branch_id)
        if not found:
            raise LookupError(f"no object lifecycle run {run_id!r} is recorded for lakefs://{repository_id}, and no "
                              f"commit of the last {LOG_SEARCH} on its branches names it; `lakefs-janitor "
                              f"object-lifecycle history lakefs://{repository_id}` lists the runs")
        record = {"repository_id": repository_id, "run_id": run_id, "branches": found}
    done = [b for b in record["branches"] if b.get("commit_id") and (branch_id is None or b["branch_id"] == branch_id)]
    if not done:
        which = f" on {branch_id}" if branch_id else ""
        raise LookupError(f"run {run_id} made no commit{which} in lakefs://{repository_id}: nothing to restore")
    if again := [b["branch_id"] for b in done if b.get("restored_by")]:
        raise LookupError(f"run {run_id} was already restored on {', '.join(again)} (commit "
                          f"{done[0].get('restored_by', '')[:12]}); reverting it twice would expire its objects again")
    restored = []
    for b in done:
        message = f"lakefs-janitor object lifecycle: restore what run {run_id} expired"
        try:
            lakefs.call(f"revert {b['commit_id'][:12]} on {b['branch_id']}", lakefs.branches.revert_branch,
                        repository_id, b["branch_id"],
                        lakefs_sdk.RevertCreation(ref=b["commit_id"], parent_number=0,
                                                  commit_overrides=lakefs_sdk.CommitOverrides(
                                                      message=message,
                                                      metadata={f"{META}restored_run_id": run_id})))
        except LakeFSError as exc:
            text = str(exc)
            if "dirty branch" in text or "uncommitted changes" in text:
                raise LakeFSError(f"lakefs://{repository_id}/{b['branch_id']} has uncommitted changes: lakeFS "
                                  "reverts only a clean branch. Commit or reset them, then run restore again",
                                  exc.status) from None
            raise
        head = lakefs.call("get branch", lakefs.branches.get_branch, repository_id, b["branch_id"]).commit_id
        b["restored_by"] = head
        if records.run(repository_id, run_id) is not None:
            records.save_run(record)
        restored.append(Restored(b["branch_id"], b["commit_id"], head))
    return restored


LOG_SEARCH = 1000  # commits per branch searched for a run's commit when its record is gone


def _commits_of_run(lakefs: LakeFS, repository_id: str, run_id: str, branch_id: str | None) -> list[dict]:
    branches = [branch_id] if branch_id else [b for b, _ in lakefs.branch_heads(repository_id)]
    found = []
    for branch in branches:
        for n, c in enumerate(lakefs.paginate_json(f"log {branch}", lakefs.refs.log_commits_with_http_info,
                                                   repository_id, branch, amount=100)):
            if n >= LOG_SEARCH:
                break
            if (c.get("metadata") or {}).get(f"{META}run_id") == run_id:
                found.append({"branch_id": branch, "commit_id": c["id"]})
                break
    return found
