"""Which commits garbage collection retains: the seed's rule, over the commit graph (pure).

Per branch, walk first parents from HEAD; keep every commit created after ``now - retention(branch)`` and the first
one before it (the branch's HEAD as of that many days ago); a HEAD is always kept. A commit that is no commit's
first parent and no branch's HEAD (the tip of a deleted or merged-and-deleted branch) follows the default
retention, and is itself kept only if it was created inside that window.

lakeFS computes a retained set too, but its walks share visited commits in commit-id order and can stop early
(reference: lakefs-facts §8); this function walks every starting point in full, so it never keeps less.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping
from dataclasses import dataclass, field
from datetime import datetime

DAY = 86400


@dataclass(frozen=True, slots=True)
class Commit:
    id: str
    parents: tuple[str, ...]
    creation_date: int  # Unix seconds, as lakeFS reports it
    meta_range_id: str = ""

    @property
    def first_parent(self) -> str | None:
        return self.parents[0] if self.parents else None


@dataclass(frozen=True)
class GCRules:
    default_retention_days: int
    branch_retention_days: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def from_api(cls, body: Mapping) -> GCRules:
        """From lakeFS's GC rules JSON (``branches`` may be null)."""
        return cls(int(body["default_retention_days"]),
                   {b["branch_id"]: int(b["retention_days"]) for b in body.get("branches") or []})

    def days(self, branch_id: str | None) -> int:
        if branch_id is not None and branch_id in self.branch_retention_days:
            return self.branch_retention_days[branch_id]
        return self.default_retention_days


@dataclass(frozen=True)
class Retained:
    """The retained commits, and for each the reason (the branch or leaf whose walk kept it first)."""

    commits: frozenset[str]
    why: Mapping[str, str]


def ancestry_leaves(commits: Mapping[str, Commit], branch_heads: Iterable[str],
                    not_leaves: Iterable[str] = ()) -> set[str]:
    """Commits that are no commit's first parent and no branch HEAD. ``not_leaves``: commits known for another
    reason only (a tag's commit whose children were not read is no tip of a deleted branch)."""
    first_parents = {c.first_parent for c in commits.values() if c.first_parent}
    return set(commits) - first_parents - set(branch_heads) - set(not_leaves)


def walk(commits: Mapping[str, Commit], start: str, threshold: int, *, keep_start: bool) -> list[str]:
    """The commits one walk keeps: from ``start`` along first parents, each commit's parent while the commit is
    newer than ``threshold``. Stops at a commit missing from the graph (not fetched, or the root)."""
    kept: list[str] = []
    current = commits.get(start)
    if current is None:
        return [start] if keep_start else []
    if keep_start or current.creation_date > threshold:
        kept.append(current.id)
    while current is not None and current.creation_date > threshold and current.first_parent:
        kept.append(current.first_parent)
        current = commits.get(current.first_parent)
    return kept


def retained_commits(*, commits: Mapping[str, Commit], branch_heads: Mapping[str, str], rules: GCRules,
                     now: datetime, skip_branches: Iterable[str] = (), not_leaves: Iterable[str] = ()) -> Retained:
    """The seed's retained set. ``branch_heads`` maps every branch (hidden ones included) to its HEAD; branches in
    ``skip_branches`` (their retention decided elsewhere) are not walked, but their HEADs are still no leaves."""
    now_s = int(now.timestamp())
    why: dict[str, str] = {}
    skip = set(skip_branches)
    for branch_id, head in sorted(branch_heads.items()):
        if branch_id in skip:
            continue
        threshold = now_s - rules.days(branch_id) * DAY
        for commit_id in walk(commits, head, threshold, keep_start=True):
            why.setdefault(commit_id, f"branch {branch_id}")
    default = now_s - rules.default_retention_days * DAY
    for leaf in sorted(ancestry_leaves(commits, branch_heads.values(), not_leaves)):
        for commit_id in walk(commits, leaf, default, keep_start=False):
            why.setdefault(commit_id, f"dangling leaf {leaf[:12]}")
    return Retained(frozenset(why), why)


def commit_from_api(body: Mapping) -> Commit:
    return Commit(body["id"], tuple(body.get("parents") or ()), int(body["creation_date"]),
                  body.get("meta_range_id") or "")


def oldest_retained(commits: Mapping[str, Commit], branch_heads: Mapping[str, str],
                    retained: Iterable[str]) -> dict[str, str]:
    """Per branch, the oldest commit of its first-parent line that the run retains without a gap from HEAD (what
    `gc show` reports, like Hudi's earliest retained commit)."""
    kept = set(retained)
    out = {}
    for branch_id, head in sorted(branch_heads.items()):
        current, oldest = commits.get(head), head
        while current is not None and current.first_parent in kept:
            oldest = current.first_parent
            current = commits.get(current.first_parent)
        out[branch_id] = oldest
    return out


def read_line(log: Iterable[Commit], threshold: int | None, commits: MutableMapping[str, Commit], *,
              depth: MutableMapping[str, float]) -> None:
    """Take a ref's first-parent log (newest first, read lazily) into ``commits``, down to the first commit at or
    before ``threshold`` (the last one retention can keep; None: the whole line). ``depth`` remembers, per
    commit, the lowest threshold a read went on from it with; a read stops early only at a commit an earlier
    read went on from at least as deep, so a long retention is never cut short by a shorter one read first."""
    floor = float("-inf") if threshold is None else threshold
    for commit in log:
        commits[commit.id] = commit
        known = depth.get(commit.id)
        if known is not None and known <= floor:
            return
        depth[commit.id] = floor if known is None else min(known, floor)
        if threshold is not None and commit.creation_date <= threshold:
            return
