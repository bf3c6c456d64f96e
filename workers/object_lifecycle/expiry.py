"""How a run expires objects on one branch without committing anyone's staged changes: the expired paths are
deleted on a short-lived hidden branch made from the evaluated HEAD, committed there and squash-merged back with
lakeFS's ``dest-wins`` strategy, so an object written again on the branch since evaluation conflicts with its
deletion and the branch's version stays. lakeFS runs the branch's pre-merge hooks on that merge (a veto leaves the
branch as it was), and the merge refuses a branch with uncommitted changes. What the commit really removed is
worked out from what moved on the branch while the run worked (lakeFS diffs), so the history and the metrics count
that, not the plan.

Requests: a batch delete per 1,000 expired paths, create, commit, merge and delete of the short-lived branch, and,
when the branch moved while the run worked, a diff of what moved (before the deletions, and before the merge).
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from typing import TYPE_CHECKING

import lakefs_sdk

from workers.object_lifecycle.evaluation import Evaluation
from workers.object_lifecycle.outcomes import BranchOutcome, RunReport, tally
from workers.shared.lakefs.client import (
    Conflict,
    Forbidden,
    LakeFS,
    LakeFSError,
    NotFound,
    PreconditionFailed,
    Unauthorized,
)

if TYPE_CHECKING:
    from workers.object_lifecycle.run import RunOptions
    from workers.object_lifecycle.store import ObjectLifecycleRecords

log = logging.getLogger(__name__)

BATCH = 1000  # lakeFS's limit of paths per delete_objects request
TEMP_PREFIX = "janitor-object-lifecycle-"  # the short-lived branches; never evaluated themselves
META = "lakefs_janitor.object_lifecycle."  # commit metadata keys


def _diff_paths(lakefs: LakeFS, repository_id: str, left: str, right: str, *, prefixes: list[str],
                kinds: tuple[str, ...]) -> set[str]:
    paths: set[str] = set()
    for prefix in prefixes:
        for d in lakefs.paginate_json(f"diff {left[:12]}..{right[:12]}", lakefs.refs.diff_refs_with_http_info,
                                      repository_id, left, right, prefix=prefix, type="two_dot"):
            if d.get("path_type", "object") == "object" and d["type"] in kinds:
                paths.add(d["path"])
    return paths


def commit_message(run_id: str, rule_ids: list[str], objects: int) -> str:
    return (f"lakefs-janitor object lifecycle: expire {objects} object{'s' if objects != 1 else ''} "
            f"(rules {', '.join(rule_ids)}; run {run_id})")


def expire(lakefs: LakeFS, report: RunReport, outcome: BranchOutcome, *, evaluation: Evaluation,
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
        drop_branch(lakefs, repo_id, temp)
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
    tally(outcome, done, options.depth)
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


def drop_branch(lakefs: LakeFS, repository_id: str, branch_id: str) -> None:
    try:
        lakefs.call(f"delete branch {branch_id}", lakefs.branches.delete_branch, repository_id, branch_id)
    except NotFound:
        pass
    except LakeFSError as exc:  # harmless but visible: a hidden branch named after the run
        log.warning("object lifecycle: could not delete the short-lived branch %s/%s: %s", repository_id,
                    branch_id, exc)
