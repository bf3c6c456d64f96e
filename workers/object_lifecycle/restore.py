"""Restore: revert the commits an object lifecycle run made, so that every object it expired is back."""

from __future__ import annotations

from dataclasses import dataclass

import lakefs_sdk

from workers.object_lifecycle.expiry import META
from workers.object_lifecycle.store import ObjectLifecycleRecords
from workers.shared.lakefs.client import LakeFS, LakeFSError


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
