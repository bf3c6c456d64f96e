"""Cleaning policies per path (``paths:``): glob semantics, validation, and the kept set on generated histories
against an oracle that decides entry by entry."""

from __future__ import annotations

import fnmatch
import random
from datetime import UTC, datetime

import pytest

from spark_jobs.core.cleaning import (
    CleaningPolicyError,
    ScopedRetention,
    parse_cleaning_policies,
    path_glob,
    retained_set,
    savepoint_patterns,
)
from spark_jobs.core.mark import kept_addresses, scope_of
from spark_jobs.core.retention import Commit, GCRules

NOW = datetime(2026, 6, 1, tzinfo=UTC)
N = int(NOW.timestamp())
DAY = 86400


@pytest.mark.parametrize(("glob", "path", "expected"), [
    ("tables/events/**", "tables/events/2026/01/part-0.parquet", True),
    ("tables/events/**", "tables/events", False),
    ("tables/events/**", "tables/eventsX/a", False),
    ("tmp/*", "tmp/a", True),
    ("tmp/*", "tmp/a/b", False),
    ("**/_SUCCESS", "_SUCCESS", True),
    ("**/_SUCCESS", "t/p=1/_SUCCESS", True),
    ("t/**/x", "t/x", True),
    ("t/**/x", "t/a/b/x", True),
    ("t/p=?/*", "t/p=1/f", True),
    ("t/[ab]/*", "t/c/f", False),
])
def test_path_globs(glob, path, expected):
    assert bool(path_glob(glob).match(path)) is expected


def test_exclusions_take_paths_out():
    [policy] = parse_cleaning_policies({"policies": [{"patterns": ["main"], "paths": ["tables/**", "!tables/tmp/**"],
                                                      "keep_commits": 3}]})
    assert policy.covers("tables/a/f") and not policy.covers("tables/tmp/f") and not policy.covers("other/f")


def errors_of(policies):
    with pytest.raises(CleaningPolicyError) as caught:
        parse_cleaning_policies({"policies": policies})
    return caught.value.errors


@pytest.mark.parametrize(("paths", "says"), [
    ([], "non-empty list"),
    ("tmp/**", "non-empty list"),
    (["/tmp/**"], "no leading '/'; write 'tmp/**'"),
    (["tmp**"], "whole segment"),
    (["tmp/**", "tmp/**"], "more than once"),
    (["!tmp/**"], "only exclusions"),
    (["tables/**", "!tmp/**"], "'!tmp/**' excludes nothing"),
])
def test_bad_paths_are_reported_precisely(paths, says):
    [(index, field, message)] = errors_of([{"patterns": ["main"], "paths": paths, "keep_for": "1d"}])
    assert (index, field) == (0, "paths") and says in message, message


def test_an_override_inside_paths_another_policy_keeps_cannot_mean_what_it_says():
    broad = {"id": "tables", "patterns": ["ma*"], "paths": ["tables/**"], "keep_for": "30d"}
    narrow = {"id": "scratch", "patterns": ["main"], "paths": ["tables/scratch/**"], "keep_for": "1d",
              "override_gc_rules": True}
    [(index, field, message)] = errors_of([broad, narrow])
    assert (index, field) == (1, "paths")
    assert "policies[0] (tables) keeps history" in message and "add \"!tables/scratch/**\" to policies[0].paths" \
        in message
    # the fix it names is accepted, as are disjoint paths and other branches
    parse_cleaning_policies({"policies": [{**broad, "paths": ["tables/**", "!tables/scratch/**"]}, narrow]})
    parse_cleaning_policies({"policies": [{**broad, "paths": ["curated/**"]}, narrow]})
    parse_cleaning_policies({"policies": [{**broad, "patterns": ["dev"]}, narrow]})
    # a branch-level policy that keeps history covers every path
    [(_, _, message)] = errors_of([{"id": "all", "patterns": ["main"], "keep_commits": 5}, narrow])
    assert "give policies[0] paths: [\"**\", \"!tables/scratch/**\"]" in message
    # savepoints alone keep no history on the branch: no conflict
    parse_cleaning_policies({"policies": [{"id": "sp", "patterns": ["main"], "savepoints": ["r-*"]}, narrow]})


def test_documents_round_trip_with_paths():
    doc = {"policies": [{"id": "tmp", "patterns": ["main"], "paths": ["tmp/**"], "keep_for": "1d",
                         "override_gc_rules": True}]}
    assert {"policies": [p.document() for p in parse_cleaning_policies(doc)]} == doc


# --- generated histories -------------------------------------------------------------------------------------------

PATHS = ["tables/events/a", "tables/events/b", "tables/users/a", "tmp/x", "tmp/y", "top"]


def covers(globs, path):
    """The oracle's matcher, written apart from path_glob: segment by segment, '**' tried at every depth."""
    def match(gs, ps):
        if not gs:
            return not ps
        if gs[0] == "**":
            return any(match(gs[1:], ps[i:]) for i in range(len(ps) + 1))
        return bool(ps) and fnmatch.fnmatchcase(ps[0], gs[0]) and match(gs[1:], ps[1:])
    positive = [g for g in globs if not g.startswith("!")]
    negative = [g[1:] for g in globs if g.startswith("!")]
    return (any(match(g.split("/"), path.split("/")) for g in positive)
            and not any(match(g.split("/"), path.split("/")) for g in negative))


def history(rng):
    """Two branches off a common base, a commit a day for 40 days; each commit rewrites a few paths (a new
    address) and may move one path's address to another path (a rename across a path boundary)."""
    commits, entries, addresses = {}, {}, iter(range(10**6))
    state = {p: f"a{next(addresses)}" for p in PATHS}
    commits["base"] = Commit("base", (), N - 41 * DAY)
    entries["base"] = dict(state)
    heads = {}
    for branch in ("main", "dev"):
        parent, current = "base", dict(state)
        for day in range(40, 0, -1):
            for p in rng.sample(PATHS, rng.randint(1, 3)):
                current[p] = f"a{next(addresses)}"
            if rng.random() < 0.3:
                src, dst = rng.sample(PATHS, 2)
                current[dst] = current[src]
            cid = f"{branch}{day}"
            commits[cid] = Commit(cid, (parent,), N - day * DAY + rng.randint(0, 3600))
            entries[cid] = dict(current)
            parent = cid
        heads[branch] = parent
    return commits, entries, heads


POLICY_SETS = {
    "paths alone": [{"id": "tmp", "patterns": ["*"], "paths": ["tmp/**"], "keep_commits": 3}],
    "with branch policies": [{"id": "tmp", "patterns": ["main"], "paths": ["tmp/**"], "keep_for": "20d"},
                             {"id": "main", "patterns": ["main"], "keep_commits": 4}],
    "override": [{"id": "tmp", "patterns": ["main"], "paths": ["tmp/**"], "keep_for": "2d",
                  "override_gc_rules": True}],
    "override and others": [{"id": "tmp", "patterns": ["*"], "paths": ["tmp/**", "top"], "keep_commits": 2,
                             "override_gc_rules": True},
                            {"id": "events", "patterns": ["dev"], "paths": ["tables/events/**"], "keep_for": "25d"},
                            {"id": "rel", "patterns": ["main"], "paths": ["tables/**"], "savepoints": ["rel-*"]}],
}


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("name", sorted(POLICY_SETS))
def test_kept_addresses_match_an_entry_by_entry_oracle(name, seed):
    rng = random.Random(seed)
    commits, entries, heads = history(rng)
    policies = parse_cleaning_policies({"policies": POLICY_SETS[name]})
    rules = GCRules(10, {"main": 15})
    tags = {"rel-1": f"main{rng.randint(20, 39)}"}
    lakefs_retained = {c for c in commits if commits[c].creation_date > N - 8 * DAY}
    inputs = dict(commits=commits, branch_heads=heads, rules=rules, lakefs_retained=lakefs_retained, tags=tags,
                  now=NOW)
    retention = ScopedRetention(policies=policies, **inputs)
    bound = retention.bound().commits
    ranged = [(c, scope_of(p, policies), a) for c in sorted(bound) for p, a in entries[c].items()]
    kept = kept_addresses(((c, scope, [a]) for c, scope, a in ranged), {c: {c} for c in commits}, retention)

    oracle: set[str] = set()
    for commit_id, entry in entries.items():
        for path, address in entry.items():
            deciding = [p for p in policies if not p.paths or covers(p.paths, path)]
            # a savepoint keeps its whole commit, whichever policy names its pattern (issue 26)
            if commit_id in retained_set(policies=deciding, savepoints=savepoint_patterns(policies), **inputs).commits:
                oracle.add(address)
    assert kept == oracle
    everything = {a for e in entries.values() for a in e.values()}
    assert len(everything - kept) > 0 and kept  # the case is not trivial


def test_a_path_policy_s_savepoint_keeps_every_path_of_its_commit():
    """Issue 26: a savepoint restores the whole commit, so a tag matched by a path policy's pattern keeps the
    commit in every scope, the paths no policy covers included; untagged commits still follow their scope."""
    commits = {f"c{i}": Commit(f"c{i}", (f"c{i - 1}",) if i > 1 else (), N - (6 - i) * DAY, f"m{i}")
               for i in (1, 2, 3)}
    policies = parse_cleaning_policies({"policies": [
        {"id": "tables", "patterns": ["main"], "paths": ["tables/**"], "keep_commits": 1,
         "savepoints": ["release-*"]}]})
    retention = ScopedRetention(policies=policies, commits=commits, branch_heads={"main": "c3"},
                                rules=GCRules(1, {}), lakefs_retained=(), tags={"release-1": "c1"}, now=NOW)
    elsewhere = retention.of(scope_of("tmp/x.bin", policies))
    tables = retention.of(scope_of("tables/a.bin", policies))
    assert "c1" in elsewhere.commits and elsewhere.why["c1"] == "savepoint release-1"
    assert "c2" not in elsewhere.commits  # outside tables/, only the savepoint and the 1-day rule keep commits
    assert {"c1", "c2", "c3"} <= tables.commits  # keep_commits 1 (+1), and the savepoint
