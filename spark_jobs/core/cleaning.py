"""Hudi-style cleaning policies for lakeFS (pure): keep the latest N commits, the latest N versions of every path,
a window of time, and savepoints (tags).

A policy names branches by glob patterns, and may name object paths (``paths``: globs over the path in lakeFS,
``**`` any number of folders, ``!`` to exclude): it then decides only for the objects under those paths, and every
other path follows the branch-level policies or lakeFS's rules. Policies only ever add to what lakeFS's own GC
rules retain (a clean never deletes anything lakeFS's GC would keep) unless one says ``override_gc_rules``.
Where several policies match a branch (or an object), each keeps what it keeps and the union is retained, which is
at least what the policy that keeps most keeps (Hudi: the one that keeps more wins). The version on a branch's
HEAD is always kept (HEADs are always retained), and a savepointed commit is never cleaned, whatever branch it is
on and whatever path: a savepoint is a tag of the whole repository's commit, so every object of that commit stays
readable while the tag exists, whichever policy (branch-level or path policy) names its pattern.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from spark_jobs.core.durations import format_duration, parse_duration
from spark_jobs.core.path_globs import path_glob
from spark_jobs.core.retention import Commit, GCRules, Retained, retained_commits, walk

ID = re.compile(r"^\S{1,32}$")
FIELDS = ("id", "patterns", "paths", "keep_commits", "keep_versions", "keep_for", "savepoints",
          "override_gc_rules", "description")
KEEPS = ("keep_commits", "keep_versions", "keep_for")
Scope = frozenset  # the ids of the path policies whose paths cover an object's path (empty: branch-level only)
# Where the policies are stored: lakeFS repository metadata, beside the lifecycle policies (both engines read it).
METADATA_KEY = "lakefs_janitor.gc_cleaning.v1"


@dataclass(frozen=True)
class CleaningPolicy:
    id: str
    patterns: tuple[str, ...]
    keep_commits: int | None = None
    keep_versions: int | None = None
    keep_for: timedelta | None = None
    savepoints: tuple[str, ...] = ()
    description: str = ""
    # True: on the branches it matches, lakeFS's GC rules retain nothing; the matching policies alone decide. The
    # one way a clean deletes what lakeFS's own GC would keep, so it has to be written out.
    override_gc_rules: bool = False
    # Globs over object paths ("tables/events/**", "!tmp/keep/**"); empty: every path (a branch-level policy).
    paths: tuple[str, ...] = ()

    def matches(self, branch_id: str) -> bool:
        return any(fnmatch.fnmatchcase(branch_id, p) for p in self.patterns)

    def covers(self, path: str) -> bool:
        """Whether the policy decides for an object at ``path`` (a branch-level policy decides for every path)."""
        if not self.paths:
            return True
        return (any(path_glob(g).match(path) for g in self.paths if not g.startswith("!"))
                and not any(path_glob(g[1:]).match(path) for g in self.paths if g.startswith("!")))

    def keeps(self) -> bool:
        return any(getattr(self, k) is not None for k in KEEPS)

    def document(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "patterns": list(self.patterns)}
        if self.paths:
            out["paths"] = list(self.paths)
        if self.keep_commits is not None:
            out["keep_commits"] = self.keep_commits
        if self.keep_versions is not None:
            out["keep_versions"] = self.keep_versions
        if self.keep_for is not None:
            out["keep_for"] = format_duration(self.keep_for)
        if self.savepoints:
            out["savepoints"] = list(self.savepoints)
        if self.override_gc_rules:
            out["override_gc_rules"] = True
        if self.description:
            out["description"] = self.description
        return out


@dataclass
class CleaningPolicyError(ValueError):
    errors: list[tuple[int | None, str, str]] = field(default_factory=list)  # (index, field, message)

    def __str__(self) -> str:
        return "\n".join(f"policies[{i}].{f}: {m}" if i is not None else f"{f}: {m}" for i, f, m in self.errors)


def _literal_prefix(glob: str) -> str:
    """The folders of a glob before its first wildcard: every path it matches starts with them."""
    match = re.search(r"[*?\[]", glob)
    head = glob if match is None else glob[:match.start()]
    return head if match is None else head[:head.rfind("/") + 1]


def _within(inner: str, outer: str) -> bool:
    """Certainly every path ``inner`` matches is matched by ``outer`` (False when unsure)."""
    if inner == outer or outer == "**":
        return True
    if outer.endswith("/**") and not re.search(r"[*?\[]", outer[:-3]):
        return _literal_prefix(inner).startswith(outer[:-2]) or (
            not re.search(r"[*?\[]", inner) and inner.startswith(outer[:-2]))
    return False


def _disjoint(a: str, b: str) -> bool:
    """Certainly no path matches both globs."""
    pa, pb = _literal_prefix(a), _literal_prefix(b)
    if not re.search(r"[*?\[]", a):
        pa = a
    if not re.search(r"[*?\[]", b):
        pb = b
    return not (pa.startswith(pb) or pb.startswith(pa))


def _check_paths(paths: Any) -> tuple[tuple[str, ...], list[tuple[str, str]]]:
    """A policy's ``paths`` and what is wrong with them, as (field, message)."""
    if paths is None:
        return (), []
    if not isinstance(paths, list) or not paths or not all(isinstance(g, str) and g.strip("!") for g in paths):
        return (), [("paths", "a non-empty list of path globs such as \"tables/events/**\" (omit paths for the "
                              "whole branch)")]
    errors: list[tuple[str, str]] = []
    for glob in paths:
        bare = glob.removeprefix("!")
        if bare.startswith("/"):
            errors.append(("paths", f"{glob!r}: lakeFS paths have no leading '/'; write {bare.lstrip('/')!r}"))
        if any("**" in s and s != "**" for s in bare.split("/")):
            errors.append(("paths", f"{glob!r}: '**' spans folders only as a whole segment ('a/**/b', 'a/**'); "
                                    "use '*' inside a name"))
    if len(set(paths)) != len(paths):
        errors.append(("paths", f"{sorted({g for g in paths if paths.count(g) > 1})} listed more than once"))
    positive = [g for g in paths if not g.startswith("!")]
    if not positive:
        errors.append(("paths", "only exclusions ('!…'): name the paths the policy covers, "
                                "e.g. [\"**\", \"!tmp/**\"]"))
    for glob in (g for g in paths if g.startswith("!")):
        if positive and all(_disjoint(glob[1:], g) for g in positive):
            errors.append(("paths", f"{glob!r} excludes nothing {positive} covers"))
    return tuple(paths), errors


def _overlapping_branches(a: CleaningPolicy, b: CleaningPolicy) -> str | None:
    for p in a.patterns:
        for q in b.patterns:
            if fnmatch.fnmatchcase(p, q) or fnmatch.fnmatchcase(q, p):
                return p if fnmatch.fnmatchcase(p, q) else q
    return None


def _covering(inner: CleaningPolicy, outer: CleaningPolicy) -> str | None:
    """A glob of ``inner`` whose paths ``outer`` certainly covers too (no exclusion of ``outer`` takes it out)."""
    exclusions = [g[1:] for g in outer.paths if g.startswith("!")]
    for glob in (g for g in inner.paths if not g.startswith("!")):
        covered = not outer.paths or any(_within(glob, g) for g in outer.paths if not g.startswith("!"))
        if covered and all(_disjoint(glob, x) for x in exclusions):
            return glob
    return None


def overlap_errors(policies: list[CleaningPolicy]) -> list[tuple[int | None, str, str]]:
    """Overlaps that cannot mean what they say: a path policy with ``override_gc_rules`` (to clean its paths harder)
    whose paths, on some of its branches, another policy that keeps history covers too. Whatever any policy
    keeps is kept, so the override can never clean there harder than the other policy keeps."""
    errors: list[tuple[int | None, str, str]] = []
    for i, inner in enumerate(policies):
        if not (inner.paths and inner.override_gc_rules):
            continue
        for j, outer in enumerate(policies):
            if j == i or not outer.keeps() or (branch := _overlapping_branches(inner, outer)) is None:
                continue
            if (glob := _covering(inner, outer)) is not None:
                where = f"its paths {list(outer.paths)}" if outer.paths else "every path"
                fix = (f"add \"!{glob}\" to policies[{j}].paths" if outer.paths else
                       f"give policies[{j}] paths: [\"**\", \"!{glob}\"]")
                errors.append((i, "paths", f"{glob!r} on {branch!r}: policies[{j}] ({outer.id}) keeps history for "
                                           f"{where} there as well, and whatever any policy keeps is kept, so this "
                                           f"override cannot clean {glob!r} harder than policies[{j}] keeps it; {fix}"))
    return errors


def parse_cleaning_policies(document: Any) -> list[CleaningPolicy]:
    """Validate a ``{"policies": [...]}`` document; every mistake is reported at once, by index and field."""
    errors: list[tuple[int | None, str, str]] = []
    if not isinstance(document, dict) or not isinstance(document.get("policies"), list):
        raise CleaningPolicyError([(None, "policies", "expected a document {\"policies\": [...]}")])
    out: list[CleaningPolicy] = []
    seen: set[str] = set()
    for i, item in enumerate(document["policies"]):
        if not isinstance(item, dict):
            errors.append((i, "(policy)", "expected a mapping"))
            continue
        for key in item:
            if key not in FIELDS:
                errors.append((i, str(key), f"unknown field; a cleaning policy has {', '.join(FIELDS)}"))
        patterns = item.get("patterns")
        if not isinstance(patterns, list) or not patterns or not all(isinstance(p, str) and p for p in patterns):
            errors.append((i, "patterns", "a non-empty list of branch glob patterns"))
            patterns = []
        counts = {}
        for key in ("keep_commits", "keep_versions"):
            value = item.get(key)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                errors.append((i, key, f"must be a whole number ≥ 1, not {value!r}"))
                value = None
            counts[key] = value
        keep_for = None
        if item.get("keep_for") is not None:
            try:
                keep_for = parse_duration(item["keep_for"])
            except ValueError as exc:
                errors.append((i, "keep_for", str(exc)))
        savepoints = item.get("savepoints", [])
        if not isinstance(savepoints, list) or not all(isinstance(s, str) and s for s in savepoints):
            errors.append((i, "savepoints", "a list of tag glob patterns"))
            savepoints = []
        if all(item.get(k) is None for k in ("keep_commits", "keep_versions", "keep_for")) and not savepoints:
            errors.append((i, "(policy)", "set keep_commits, keep_versions, keep_for or savepoints"))
        policy_id = item.get("id") or f"clean-{i}"
        if not isinstance(policy_id, str) or not ID.match(policy_id):
            errors.append((i, "id", "at most 32 characters, no whitespace"))
        elif policy_id in seen:
            errors.append((i, "id", f"{policy_id!r} is used by an earlier policy"))
        seen.add(str(policy_id))
        override = item.get("override_gc_rules", False)
        if not isinstance(override, bool):
            errors.append((i, "override_gc_rules", f"must be true or false, not {override!r}"))
            override = False
        elif override and all(item.get(k) is None for k in ("keep_commits", "keep_versions", "keep_for")):
            errors.append((i, "override_gc_rules", "replaces lakeFS's GC rules on the branches it matches, so it "
                                                   "needs keep_commits, keep_versions or keep_for"))
        description = item.get("description", "")
        if not isinstance(description, str):
            errors.append((i, "description", "must be text"))
            description = ""
        paths, path_errors = _check_paths(item.get("paths"))
        errors += [(i, f, m) for f, m in path_errors]
        out.append(CleaningPolicy(str(policy_id), tuple(patterns), counts["keep_commits"], counts["keep_versions"],
                                  keep_for, tuple(savepoints), description, override, paths))
    if not errors:
        errors = overlap_errors(out)
    if errors:
        raise CleaningPolicyError(errors)
    return out


def first_parent_line(commits: Mapping[str, Commit], head: str) -> list[str]:
    line, current = [], commits.get(head)
    while current is not None:
        line.append(current.id)
        current = commits.get(current.first_parent) if current.first_parent else None
    return line


def policy_retained(*, commits: Mapping[str, Commit], branch_heads: Mapping[str, str], tags: Mapping[str, str],
                    policies: Iterable[CleaningPolicy], now: datetime,
                    savepoints: Iterable[str] | None = None) -> dict[str, str]:
    """Commits the policies retain (commit id → which policy and why), to add to the GC-rules retained set.
    ``savepoints``: the tag patterns whose commits are kept whole (default: those of ``policies``)."""
    policies = list(policies)
    why: dict[str, str] = {}
    now_s = int(now.timestamp())
    for branch_id, head in sorted(branch_heads.items()):
        for policy in (p for p in policies if p.matches(branch_id)):
            line = first_parent_line(commits, head)
            if policy.keep_commits is not None:
                # the latest N commits, and one more: a reader that started before the Nth-latest commit still
                # reads the files of the commit before it
                for commit_id in line[:policy.keep_commits + 1]:
                    why.setdefault(commit_id, f"{policy.id}: latest {policy.keep_commits} commits of {branch_id} (+1)")
            if policy.keep_for is not None:
                threshold = now_s - int(policy.keep_for.total_seconds())
                for commit_id in walk(commits, head, threshold, keep_start=True):
                    why.setdefault(commit_id, f"{policy.id}: {format_duration(policy.keep_for)} of {branch_id}")
    patterns = savepoint_patterns(policies) if savepoints is None else list(savepoints)
    for tag, commit_id in sorted(tags.items()):
        if any(fnmatch.fnmatchcase(tag, s) for s in patterns):
            why.setdefault(commit_id, f"savepoint {tag}")
    return why


def savepoint_patterns(policies: Iterable[CleaningPolicy]) -> list[str]:
    """Every policy's savepoint patterns, in the order the policies list them, each once."""
    return list(dict.fromkeys(s for p in policies for s in p.savepoints))


def savepoint_tags(tags: Mapping[str, str], policies: Iterable[CleaningPolicy]) -> dict[str, str]:
    """The tags (tag id → commit id) some policy's savepoint patterns match: the only tags a clean keeps."""
    patterns = savepoint_patterns(policies)
    return {t: c for t, c in tags.items() if any(fnmatch.fnmatchcase(t, s) for s in patterns)}


def overridden_branches(branch_heads: Mapping[str, str], policies: Iterable[CleaningPolicy]) -> set[str]:
    """Branches an ``override_gc_rules`` policy matches: lakeFS's GC rules no longer retain anything there."""
    overriding = [p for p in policies if p.override_gc_rules]
    return {b for b in branch_heads if any(p.matches(b) for p in overriding)}


def retained_set(*, commits: Mapping[str, Commit], branch_heads: Mapping[str, str], rules: GCRules,
                 lakefs_retained: Iterable[str], policies: Iterable[CleaningPolicy], tags: Mapping[str, str],
                 now: datetime, not_leaves: Iterable[str] = (), savepoints: Iterable[str] | None = None) -> Retained:
    """Every commit a run retains, each with why: the seed's rule on every branch no ``override_gc_rules`` policy
    matches and on the ancestry leaves; lakeFS's own retained set, except the commits lakeFS keeps only for an
    overridden branch (those on its first-parent line that no other reason keeps); every branch HEAD; and what
    the policies keep. Without an overriding policy this is a superset of lakeFS's set: a clean then never
    deletes what lakeFS's GC would keep. ``commits`` must hold the overridden branches' whole first-parent lines;
    ``not_leaves`` are commits in ``commits`` only as a savepoint's target (never dangling tips); ``savepoints``:
    the tag patterns whose commits are kept whole (default: those of ``policies``)."""
    policies = list(policies)
    overridden = overridden_branches(branch_heads, policies)
    why = dict(retained_commits(commits=commits, branch_heads=branch_heads, rules=rules, now=now,
                                skip_branches=overridden, not_leaves=not_leaves).why)
    only_for_overridden = {c for b in overridden for c in first_parent_line(commits, branch_heads[b])}
    for commit_id in sorted(set(lakefs_retained) - only_for_overridden):
        why.setdefault(commit_id, "lakeFS's own retained set")
    for branch_id, head in sorted(branch_heads.items()):
        why.setdefault(head, f"HEAD of {branch_id}")
    for commit_id, reason in policy_retained(commits=commits, branch_heads=branch_heads, tags=tags,
                                             policies=policies, now=now, savepoints=savepoints).items():
        why.setdefault(commit_id, reason)
    return Retained(frozenset(why), why)


class ScopedRetention:
    """The retained commits of each scope of paths (pure, computed when first asked, then remembered).

    For an object under the paths of some path policies, those policies and the branch-level ones decide,
    exactly as branch-level policies decide alone for every other path (``retained_set``); an address is kept
    when some retained commit of the scope its path has there names it. Without path policies there is one scope,
    the whole repository. Savepoints are not scoped: every policy's savepoint patterns keep their commits in
    every scope (a savepoint restores the whole commit, so all of its objects must stay readable)."""

    def __init__(self, *, policies: Iterable[CleaningPolicy], **inputs: Any) -> None:
        self.policies = list(policies)
        self.inputs = inputs  # retained_set's other arguments
        self.by_path = any(p.paths for p in self.policies)
        self.savepoints = savepoint_patterns(self.policies)
        self._of: dict[Scope, Retained] = {}

    def of(self, scope: Scope) -> Retained:
        if scope not in self._of:
            chosen = [p for p in self.policies if not p.paths or p.id in scope]
            self._of[scope] = retained_set(policies=chosen, savepoints=self.savepoints, **self.inputs)
        return self._of[scope]

    def bound(self) -> Retained:
        """A superset of every scope's retained commits (the commits whose ranges are read): what the policies
        would retain if none overrode lakeFS's rules."""
        if not self.by_path:
            return self.of(Scope())
        relaxed = [dataclasses.replace(p, override_gc_rules=False) for p in self.policies]
        return retained_set(policies=relaxed, **self.inputs)

    def union(self) -> Retained:
        """Every commit some scope asked about so far retains, each with its first reason."""
        why: dict[str, str] = {}
        for scope in sorted(self._of, key=sorted):
            for commit_id, reason in self._of[scope].why.items():
                why.setdefault(commit_id, reason if not scope else f"{reason} (paths of {', '.join(sorted(scope))})")
        return Retained(frozenset(why), why)
