"""Savepoints as Hudi users know them: create, list, delete, restore. A savepoint is a lakeFS tag the repository's
savepoint patterns (``savepoints:`` of its cleaning policies) match, so no clean ever removes its files; its
comment, creator and time are stored beside the policies (repository metadata). Restoring hard-resets a branch to
the savepoint's commit."""

from __future__ import annotations

import json
import re
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from spark_jobs.core.cleaning import CleaningPolicy, savepoint_patterns
from spark_jobs.engine.plan.impact import Impact, savepoint_impact
from spark_jobs.engine.plan.preview import dry_mark
from spark_jobs.engine.runtime.lakefs_api import LakeFSApi, LakeFSApiError
from spark_jobs.engine.runtime.parallel import ThreadRunner
from spark_jobs.engine.stores import StorageError
from workers.gc.cleaning_store import get_cleaning
from workers.gc.run import GCError, api_config, min_age_of, storage_config
from workers.shared.lakefs.documents import MetadataDocument
from workers.shared.lakefs.errors import LakeFSError

if TYPE_CHECKING:
    from workers.shared.lakefs.client import LakeFS
    from workers.shared.settings import GCSettings, LakeFSConnection

METADATA_KEY = "lakefs_janitor.gc_savepoints.v1"
RECORDS = MetadataDocument(METADATA_KEY)  # name -> what the tag does not hold: commit id, comment, creator, time
_TAG = re.compile(r"^\w[-\w.]*$")  # lakeFS's tag ids: like branch ids, dots allowed


class SavepointError(ValueError):
    """A savepoint request a person has to change (the message says how)."""


@dataclass(frozen=True)
class Savepoint:
    name: str
    commit_id: str
    commit_date: int = 0  # the commit's creation date (Unix seconds)
    comment: str = ""
    creator: str = ""
    created_at: str = ""  # when the savepoint was made (ISO-8601), when this service made it


def patterns(policies: list[CleaningPolicy]) -> list[str]:
    """Every policy's savepoint patterns in the order the document lists them: the first one names a savepoint
    made without --name."""
    return savepoint_patterns(policies)


def matching(name: str, globs: list[str]) -> bool:
    import fnmatch  # noqa: PLC0415

    return any(fnmatch.fnmatchcase(name, g) for g in globs)


def default_name(globs: list[str], now: datetime) -> str | None:
    """A name the patterns match: the first pattern, in the order given, whose one '*' can hold a timestamp
    (release-* → release-20260131-120000)."""
    stamp = now.astimezone(UTC).strftime("%Y%m%d-%H%M%S")
    for glob in globs:
        if glob.count("*") == 1 and not re.search(r"[?\[]", glob):
            name = glob.replace("*", stamp)
            if _TAG.match(name):
                return name
    return None


def _records(lakefs: LakeFS, repository_id: str) -> dict[str, dict]:
    try:
        value = json.loads(RECORDS.read(lakefs, repository_id) or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _globs(lakefs: LakeFS, repository_id: str) -> list[str]:
    globs = patterns(get_cleaning(lakefs, repository_id).policies)
    if not globs:
        raise SavepointError(f"no cleaning policy of lakefs://{repository_id} names savepoint patterns, so a tag "
                             "would not keep anything: add e.g. `savepoints: [\"savepoint-*\"]` to a policy "
                             f"(gc policy set -f FILE lakefs://{repository_id}) first")
    return globs


def create(lakefs: LakeFS, repository_id: str, ref: str, *, name: str | None, comment: str, now: datetime,
           lock: AbstractContextManager | None = None) -> Savepoint:
    import lakefs_sdk  # noqa: PLC0415

    globs = _globs(lakefs, repository_id)
    if name is None:
        name = default_name(globs, now)
        if name is None:
            raise SavepointError(f"none of the savepoint patterns {globs} has a single '*' to put a time in: "
                                 "give the savepoint a name they match with --name")
    elif not _TAG.match(name):
        raise SavepointError(f"{name!r} is not a valid lakeFS tag id (letters, digits, _, - and .; not starting "
                             "with - or .)")
    elif not matching(name, globs):
        raise SavepointError(f"{name!r} matches none of the savepoint patterns of lakefs://{repository_id} "
                             f"({', '.join(globs)}): a tag of that name would not be kept by a clean")
    commit = lakefs.call(f"read {ref}", lakefs.commits.get_commit, repository_id, ref)
    user = lakefs.call("who am I", lakefs.auth.get_current_user).user
    with lock or nullcontext():
        lakefs.call(f"create tag {name}", lakefs.tags.create_tag, repository_id,
                    lakefs_sdk.TagCreation(id=name, ref=commit.id))
        records = _records(lakefs, repository_id)
        saved = Savepoint(name, commit.id, int(commit.creation_date), comment, user.id, now.isoformat())
        records[name] = {k: v for k, v in asdict(saved).items() if k in ("commit_id", "comment", "creator",
                                                                         "created_at")}
        RECORDS.write(lakefs, repository_id, records)
    return saved


def list_savepoints(lakefs: LakeFS, repository_id: str) -> list[Savepoint]:
    globs = patterns(get_cleaning(lakefs, repository_id).policies)
    records = _records(lakefs, repository_id)
    out = []
    for tag in lakefs.paginate("list tags", lakefs.tags.list_tags, repository_id):
        if not matching(tag.id, globs):
            continue
        record = records.get(tag.id, {})
        if record.get("commit_id") not in (None, tag.commit_id):
            record = {}  # the tag was deleted and made again elsewhere: the stored words were for another commit
        commit = lakefs.call(f"read {tag.commit_id}", lakefs.commits.get_commit, repository_id, tag.commit_id)
        out.append(Savepoint(tag.id, tag.commit_id, int(commit.creation_date), record.get("comment", ""),
                             record.get("creator", ""), record.get("created_at", "")))
    return out


def delete(lakefs: LakeFS, repository_id: str, name: str, *, lock: AbstractContextManager | None = None) -> None:
    globs = patterns(get_cleaning(lakefs, repository_id).policies)
    if not matching(name, globs):
        raise SavepointError(f"{name!r} is not a savepoint of lakefs://{repository_id} (no savepoint pattern "
                             f"matches it{': ' + ', '.join(globs) if globs else ''}); delete plain tags with lakectl")
    with lock or nullcontext():
        lakefs.call(f"delete tag {name}", lakefs.tags.delete_tag, repository_id, name)
        records = _records(lakefs, repository_id)
        if records.pop(name, None) is not None:
            RECORDS.write(lakefs, repository_id, records)


def uncommitted(lakefs: LakeFS, repository_id: str, branch_id: str) -> int:
    """How many uncommitted changes the branch has (up to one page)."""
    page = lakefs.call(f"diff {branch_id}", lakefs.branches.diff_branch, repository_id, branch_id, amount=100)
    return len(page.results)


def find(lakefs: LakeFS, repository_id: str, name: str) -> Savepoint:
    for saved in list_savepoints(lakefs, repository_id):
        if saved.name == name:
            return saved
    raise SavepointError(f"no savepoint {name!r} in lakefs://{repository_id} (gc savepoint list "
                         f"lakefs://{repository_id} shows them)")


def restore(lakefs: LakeFS, repository_id: str, branch_id: str, *, saved: Savepoint,
            discard_uncommitted: bool = False) -> str:
    """Hard-reset the branch to the savepoint's commit (lakeFS keeps staged changes across a hard reset: they are
    dropped first when asked to); returns the HEAD it had (to undo: reset back to it)."""
    import lakefs_sdk  # noqa: PLC0415

    head = lakefs.call(f"read {branch_id}", lakefs.branches.get_branch, repository_id, branch_id).commit_id
    if discard_uncommitted:
        lakefs.call(f"drop uncommitted changes of {branch_id}", lakefs.branches.reset_branch, repository_id,
                    branch_id, lakefs_sdk.ResetCreation(type="reset"))
    lakefs.call(f"reset {branch_id}", lakefs.experimental.hard_reset_branch, repository_id, branch_id,
                saved.commit_id)
    return head


def impacts(gc: GCSettings, connection: LakeFSConnection, repository_id: str, *, names: list[str],
            min_age: timedelta | None = None, now: datetime | None = None) -> dict[str, Impact]:
    """For each savepoint, the objects and bytes only it keeps alive: what deleting it frees at the next run."""
    now = now or datetime.now(UTC)
    config = api_config(connection)
    api = LakeFSApi(config)
    try:
        marked, job = dry_mark(api, config, storage_config(gc), repository_id=repository_id, now=now,
                               min_age=min_age_of(gc, min_age), runner=ThreadRunner(gc.threads))
        return savepoint_impact(job, marked, tag_ids=[n for n in names if n in marked.graph.tags], now=now)
    except (LakeFSApiError, StorageError) as exc:
        raise GCError(f"savepoints of lakefs://{repository_id}: {exc}", getattr(exc, "reason", "storage")) from exc
    finally:
        api.close()


__all__ = ["LakeFSError", "Savepoint", "SavepointError", "create", "delete", "find", "impacts", "list_savepoints",
           "restore", "uncommitted"]
