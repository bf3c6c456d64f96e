"""Writes the lakeFS action file that makes lakeFS report branch activity to the receiver."""

from __future__ import annotations

from dataclasses import dataclass

import yaml

from workers.idle_clock.events import CLOCK_EVENTS
from workers.shared.lakefs.client import Forbidden, LakeFS, LakeFSError, NotFound, PreconditionFailed

ACTION_PATH = "_lakefs_actions/lakefs-janitor.yaml"
ACTION_NAME = "lakefs-janitor"
# lakeFS substitutes {{ ENV.X }} in headers only for variables with this prefix (no S: LAKEFSACTION_).
DEFAULT_SECRET_ENV = "LAKEFSACTION_JANITOR_SECRET"
EVENTS = tuple(CLOCK_EVENTS)  # exactly the events the receiver records


class InstallError(RuntimeError):
    pass


@dataclass(frozen=True)
class InstallResult:
    repository_id: str
    branch_id: str
    path: str
    commit_id: str | None  # None: the file was already up to date

    @property
    def changed(self) -> bool:
        return self.commit_id is not None


def action_file(receiver_url: str, secret_env: str = DEFAULT_SECRET_ENV, timeout: str = "10s") -> str:
    if not secret_env.startswith("LAKEFSACTION_"):
        raise InstallError(f"secret variable {secret_env!r} must start with LAKEFSACTION_: lakeFS substitutes "
                           "only variables with that prefix and silently sends an empty value otherwise")
    if not receiver_url.startswith(("http://", "https://")):
        raise InstallError(f"receiver URL {receiver_url!r} must start with http:// or https://")
    action = {
        "name": ACTION_NAME,
        "description": "Report branch activity to lakefs-janitor (idle clock for branch lifecycle policies)",
        "on": {event: None for event in EVENTS},
        "hooks": [{
            "id": "lakefs_janitor_idle_clock",
            "type": "webhook",
            "description": "Post-hooks never block lakeFS; a failed call is repaired by the reconciler",
            "properties": {
                "url": receiver_url.rstrip("/") + "/webhooks/lakefs",
                "timeout": timeout,
                "headers": {"X-Lakefs-Janitor-Secret": f"{{{{ ENV.{secret_env} }}}}"},
            },
        }],
    }
    return yaml.safe_dump(action, sort_keys=False)


def _committed(lakefs: LakeFS, repository_id: str, branch_id: str) -> str | None:
    # Read at the HEAD commit, not the branch: a staged copy that never got committed does not count.
    head = lakefs.call("get branch", lakefs.branches.get_branch, repository_id, branch_id).commit_id
    try:
        data = lakefs.call("read action file", lakefs.objects.get_object, repository_id, head, ACTION_PATH)
    except NotFound:
        return None
    return data.decode() if isinstance(data, bytes | bytearray) else str(data)


def install(lakefs: LakeFS, repository_id: str, content: str, *, branch_id: str | None = None) -> InstallResult:
    """Commit the action file to the default branch (or branch_id); a no-op when it is already there."""
    repo = lakefs.call("get repository", lakefs.repositories.get_repository, repository_id)
    branch_id = branch_id or repo.default_branch
    if _committed(lakefs, repository_id, branch_id) == content:
        return InstallResult(repository_id, branch_id, ACTION_PATH, None)
    dirty = lakefs.call("check uncommitted changes", lakefs.branches.diff_branch, repository_id, branch_id, amount=1)
    if dirty.results:
        # A commit takes everything staged on the branch; never commit someone else's work along with ours.
        raise InstallError(f"branch {branch_id!r} of {repository_id!r} has uncommitted changes; commit or reset "
                           "them first (a commit would include them)")
    where = f"{repository_id}/{branch_id}"
    try:
        lakefs.upload(repository_id, branch_id, ACTION_PATH, data=content.encode())
    except Forbidden as exc:
        raise InstallError(f"lakeFS refused to write {ACTION_PATH} on {where}: {exc}. Branch protection or your "
                           "permissions block it; ask an admin, or pass --branch and merge it yourself") from None
    except LakeFSError as exc:
        raise InstallError(str(exc)) from None
    try:
        commit = lakefs.call("commit action file", lakefs.commits.commit, repository_id, branch_id,
                             _commit_creation("lakefs-janitor: install idle-clock hooks"))
    except LakeFSError as exc:
        _unstage(lakefs, repository_id, branch_id)  # leave nothing behind for the next committer to pick up
        if isinstance(exc, PreconditionFailed):
            raise InstallError(f"a pre-commit hook on {where} refused the commit of {ACTION_PATH}: {exc}") from None
        if isinstance(exc, Forbidden):
            raise InstallError(f"lakeFS refused the commit on {where}: {exc}. Branch protection or your "
                               "permissions block it; ask an admin, or pass --branch and merge it yourself") from None
        raise InstallError(str(exc)) from None
    return InstallResult(repository_id, branch_id, ACTION_PATH, commit.id)


def _unstage(lakefs: LakeFS, repository_id: str, branch_id: str) -> None:
    import lakefs_sdk  # noqa: PLC0415

    try:
        lakefs.call("reset staged action file", lakefs.branches.reset_branch, repository_id, branch_id,
                    lakefs_sdk.ResetCreation(type="object", path=ACTION_PATH))
    except LakeFSError:
        pass  # best effort: the error that matters is the commit's


def _commit_creation(message: str):
    import lakefs_sdk  # noqa: PLC0415  (SDK models stay at the edge)

    return lakefs_sdk.CommitCreation(message=message, metadata={"lakefs-janitor": "hooks-install"})
