"""Plan: which namespace objects a run deletes (pure). Deleted = candidates − kept.

Candidates are the data objects of the namespace (``data/<slice>/…`` and the legacy flat layout at the root),
never anything under ``_lakefs/``, and never an object modified after the safety cutoff: an upload not yet linked,
or written during the run, must survive. Age comes from the modification time, never from the slice name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

METADATA_PREFIX = "_lakefs/"
LEGACY_SKIP = frozenset({"dummy"})


@dataclass(frozen=True, slots=True)
class StoredObject:
    key: str  # relative to the storage namespace
    size: int
    mtime: float  # Unix seconds


@dataclass
class PlanSummary:
    candidates: int = 0
    kept: int = 0
    too_new: int = 0
    deleted: int = 0
    deleted_bytes: int = 0
    by_prefix: dict[str, list[int]] = field(default_factory=dict)  # prefix -> [objects, bytes]


def merge_summaries(parts: Iterable[PlanSummary]) -> PlanSummary:
    """The summary of a plan made in parts (say, one listing slice each): every count added up."""
    out = PlanSummary()
    for part in parts:
        out.candidates += part.candidates
        out.kept += part.kept
        out.too_new += part.too_new
        out.deleted += part.deleted
        out.deleted_bytes += part.deleted_bytes
        for prefix, (objects, size) in part.by_prefix.items():
            counts = out.by_prefix.setdefault(prefix, [0, 0])
            counts[0] += objects
            counts[1] += size
    return out


def is_data_key(key: str) -> bool:
    """A key the GC may consider at all: under data/, or a legacy object at the namespace root."""
    if key.startswith(METADATA_PREFIX) or key == METADATA_PREFIX.rstrip("/"):
        return False
    if key.startswith("data/"):
        return True
    return "/" not in key and key not in LEGACY_SKIP


def plan_deletions(objects: Iterable[StoredObject], kept: set[str], cutoff: float, *,
                   prefix_depth: int = 2) -> tuple[list[StoredObject], PlanSummary]:
    summary = PlanSummary()
    deleted: list[StoredObject] = []
    for obj in objects:
        if not is_data_key(obj.key):
            continue
        summary.candidates += 1
        if obj.key in kept:
            summary.kept += 1
        elif obj.mtime >= cutoff:
            summary.too_new += 1
        else:
            deleted.append(obj)
            summary.deleted += 1
            summary.deleted_bytes += obj.size
            prefix = "/".join(obj.key.split("/")[:prefix_depth]) if "/" in obj.key else "(root)"
            counts = summary.by_prefix.setdefault(prefix, [0, 0])
            counts[0] += 1
            counts[1] += obj.size
    deleted.sort(key=lambda o: o.key)
    return deleted, summary


NO_COMMIT = "(in no commit)"


def by_path_prefix(deleted: Iterable[StoredObject], paths: Mapping[str, str], depth: int) -> dict[str, list[int]]:
    """Deleted objects and bytes per logical path prefix (the first ``depth`` folders of the path a commit gave the
    object; Hudi's partitions), like ``clean showpartitions``. An object no commit names (an upload never
    committed, or the version of a commit no longer listed) counts under ``(in no commit)``."""
    out: dict[str, list[int]] = {}
    for obj in deleted:
        counts = out.setdefault(path_prefix(paths.get(obj.key), depth), [0, 0])
        counts[0] += 1
        counts[1] += obj.size
    return out


def path_prefix(path: str | None, depth: int) -> str:
    """The first ``depth`` folders of ``path`` (``by_path_prefix``'s name for it; None: in no commit)."""
    if path is None:
        return NO_COMMIT
    folders = path.split("/")[:-1]
    return "/".join(folders[:depth]) + "/" if folders else "(top level)"
