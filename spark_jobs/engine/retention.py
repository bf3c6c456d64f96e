"""Which commits the GC retains: a pure function over the commit graph (the seed's rule).

Per branch, walk first parents from HEAD: the HEAD is always kept, and a commit's first parent is kept when that
commit was created after ``now - retention(branch)``, i.e. every commit inside the window plus the first one
before it ("the HEAD as of N days ago"). Ancestry leaves that are no branch's HEAD (deleted or merged branches)
are walked the same way with the default retention, but the leaf itself is kept only when it is inside the
window (lakeFS's "hypothetical child" with the leaf's own date).

Unlike lakeFS's walk, a walk never stops early because another walk reached a commit first; it stops only where
the rest of its walk is already covered: at a commit already kept by a walk whose window was at least as long.
So the result is a superset of lakeFS's (lakefs-facts.md section 8 has the cases where lakeFS keeps less).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

DAY = 86400


@dataclass(frozen=True)
class Commit:
    id: str
    parents: tuple[str, ...]
    creation_date: int  # unix seconds
    meta_range_id: str


@dataclass(frozen=True)
class GCRules:
    default_retention_days: int
    branch_retention_days: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def from_api(cls, body: Mapping) -> GCRules:
        return cls(int(body["default_retention_days"]),
                   {b["branch_id"]: int(b["retention_days"]) for b in body.get("branches") or []})

    def days_for(self, branch_id: str) -> int:
        return self.branch_retention_days.get(branch_id, self.default_retention_days)


def ancestry_leaves(commits: Mapping[str, Commit]) -> set[str]:
    """Commits that are no commit's first parent."""
    first_parents = {c.parents[0] for c in commits.values() if c.parents}
    return set(commits) - first_parents


def retained_commits(*, commits: Mapping[str, Commit], branch_heads: Mapping[str, str], rules: GCRules,
                     now: datetime) -> set[str]:
    now_s = int(now.timestamp())
    kept_with: dict[str, int] = {}  # commit -> the oldest threshold of a walk that kept it

    def walk(start: str, threshold: int, keep_start: bool) -> None:
        node, keep = start, keep_start
        while keep and node in commits:
            if node in kept_with and kept_with[node] <= threshold:
                return  # a walk with a window at least as long kept it and went on from here
            kept_with[node] = min(threshold, kept_with.get(node, threshold))
            commit = commits[node]
            keep = commit.creation_date > threshold
            if not commit.parents:
                return
            node = commit.parents[0]

    heads = set()
    for branch_id, head in sorted(branch_heads.items()):
        heads.add(head)
        walk(head, now_s - rules.days_for(branch_id) * DAY, keep_start=True)
    default_threshold = now_s - rules.default_retention_days * DAY
    for leaf in sorted(ancestry_leaves(commits) - heads):
        walk(leaf, default_threshold, keep_start=commits[leaf].creation_date > default_threshold)
    return set(kept_with)


def commit_from_api(body: Mapping) -> Commit:
    return Commit(id=body["id"], parents=tuple(body.get("parents") or ()),
                  creation_date=int(body["creation_date"]), meta_range_id=body.get("meta_range_id") or "")


def metarange_ids(commits: Mapping[str, Commit], retained: Iterable[str]) -> list[str]:
    """Unique metaranges of the retained commits (the first commit's is empty: nothing to read)."""
    return sorted({commits[c].meta_range_id for c in retained if c in commits and commits[c].meta_range_id})


def cutoff(now: datetime, min_age: timedelta) -> datetime:
    return now - min_age
