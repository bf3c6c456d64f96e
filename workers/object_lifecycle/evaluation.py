"""Which objects of a branch the rules expire, as of ``now`` (pure: rules, a branch and its objects in, a verdict
out; no I/O).

An object expires when any enabled rule that selects its branch and its path has a ``max_age`` it has outlived
(``mtime + max_age <= now``); it is reported under every such rule. An object no rule expires yet, but some
rule selects, becomes due at the earliest of those rules' ``mtime + max_age``: the next ones due are the earliest
of these, per rule and per prefix.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from workers.object_lifecycle.rules import Rule

# lakeFS reads the branch's hooks from here: expiring them by age would silently switch off its hooks, the vetoes
# included, so no rule selects them, however broad.
ACTIONS_PREFIX = "_lakefs_actions/"


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    path: str
    mtime: datetime  # when the object was last written on the branch (lakeFS's mtime), timezone-aware
    size: int


@dataclass(frozen=True, slots=True)  # a run holds up to a cap's worth (100k by default): no more than it needs
class Expiry:
    path: str
    size: int
    rule_ids: tuple[str, ...]  # every enabled rule that expires it, in document order (one tuple per combination)


@dataclass
class Tally:
    """Objects and bytes a rule expires (under one prefix, or in all), and when its next object is due."""

    objects: int = 0
    bytes: int = 0
    next_due: datetime | None = None
    next_path: str | None = None

    def add(self, size: int) -> None:
        self.objects += 1
        self.bytes += size

    def due(self, at: datetime, path: str) -> None:
        if self.next_due is None or (at, path) < (self.next_due, self.next_path or ""):
            self.next_due, self.next_path = at, path

    def document(self) -> dict[str, Any]:
        return {"objects": self.objects, "bytes": self.bytes,
                "next_due": self.next_due.isoformat() if self.next_due else None, "next_path": self.next_path}


@dataclass
class Evaluation:
    branch_id: str
    now: datetime
    rule_ids: tuple[str, ...]  # the enabled rules that select the branch, in document order
    expired: list[Expiry] = field(default_factory=list)  # in the order the objects were given
    by_rule: dict[str, Tally] = field(default_factory=dict)  # every rule in rule_ids
    by_prefix: dict[tuple[str, str], Tally] = field(default_factory=dict)  # (rule id, prefix) seen
    objects: int = 0  # expired, each counted once however many rules expire it
    bytes: int = 0
    left_out: int = 0  # expired but beyond the limit: counted, not in ``expired`` (the next run takes them)

    def document(self) -> dict[str, Any]:
        return {"branch_id": self.branch_id, "now": self.now.isoformat(), "rules": list(self.rule_ids),
                "objects": self.objects, "bytes": self.bytes,
                "by_rule": {r: t.document() for r, t in self.by_rule.items()},
                "by_prefix": [{"rule_id": r, "prefix": p, **t.document()}
                              for (r, p), t in sorted(self.by_prefix.items())]}


def applicable_rules(rules: Sequence[Rule], branch_id: str, *, is_default: bool) -> list[Rule]:
    """The enabled rules that select the branch, in document order."""
    return [r for r in rules if r.enabled and r.selects_branch(branch_id, is_default=is_default)]


def prefix_of(path: str, depth: int) -> str:
    """The first ``depth`` folders of a path, with their trailing '/' ("" for an object at the top)."""
    folders = path.split("/")[:-1][:depth]
    return "".join(f"{f}/" for f in folders)


def evaluate(rules: Sequence[Rule], objects: Iterable[ObjectInfo], *, branch_id: str, is_default: bool,
             now: datetime, depth: int = 1, keep_expired: bool = True, limit: int | None = None) -> Evaluation:
    """What the rules expire on the branch as of ``now``, grouped per rule and per prefix of ``depth`` folders;
    without ``keep_expired`` only the counts (a preview of millions of objects holds no list of them). With a
    ``limit``, ``expired`` holds at most the first ``limit`` in the order given; the counts still cover all."""
    applying = applicable_rules(rules, branch_id, is_default=is_default)
    result = Evaluation(branch_id, now, tuple(r.id for r in applying), by_rule={r.id: Tally() for r in applying})
    if not applying:
        return result
    combinations: dict[tuple[str, ...], tuple[str, ...]] = {}
    for obj in objects:
        if obj.path.startswith(ACTIONS_PREFIX):
            continue
        selecting = [r for r in applying if r.selects_path(obj.path)]
        if not selecting:
            continue
        prefix = prefix_of(obj.path, depth)
        expiring = tuple(r.id for r in selecting if r.due_at(obj.mtime) <= now)
        if expiring:
            if keep_expired and (limit is None or len(result.expired) < limit):
                result.expired.append(Expiry(obj.path, obj.size, combinations.setdefault(expiring, expiring)))
            elif keep_expired:
                result.left_out += 1
            result.objects += 1
            result.bytes += obj.size
            for rule_id in expiring:
                result.by_rule[rule_id].add(obj.size)
                result.by_prefix.setdefault((rule_id, prefix), Tally()).add(obj.size)
            continue
        for rule in selecting:
            at = rule.due_at(obj.mtime)
            result.by_rule[rule.id].due(at, obj.path)
            result.by_prefix.setdefault((rule.id, prefix), Tally()).due(at, obj.path)
    return result
