"""The seed's retention rule on hand-made commit graphs, with an oracle written apart from the code."""

from __future__ import annotations

import random
from datetime import UTC, datetime

from spark_jobs.core.retention import Commit, GCRules, ancestry_leaves, retained_commits

NOW = datetime(2026, 6, 1, tzinfo=UTC)
N = int(NOW.timestamp())
D = 86400


def chain(*dates_days_ago: float, prefix: str = "c", base: str | None = None) -> dict[str, Commit]:
    """Commits oldest first; ids prefix0, prefix1, ..."""
    out, parent = {}, base
    for i, ago in enumerate(dates_days_ago):
        cid = f"{prefix}{i}"
        out[cid] = Commit(cid, (parent,) if parent else (), N - int(ago * D))
        parent = cid
    return out


def kept(commits, heads, rules):
    return set(retained_commits(commits=commits, branch_heads=heads, rules=rules, now=NOW).commits)


def test_window_plus_the_first_commit_before_it():
    g = chain(30, 20, 10, 5, 1)  # c0 … c4
    assert kept(g, {"main": "c4"}, GCRules(7)) == {"c4", "c3", "c2"}  # c2 is main's HEAD as of 7 days ago


def test_head_is_always_kept_even_when_old():
    g = chain(30, 20)
    assert kept(g, {"main": "c1"}, GCRules(7)) == {"c1"}


def test_branch_rule_overrides_the_default():
    g = chain(30, 20, 10, 5, 1)
    assert kept(g, {"main": "c4"}, GCRules(7, {"main": 25})) == {"c4", "c3", "c2", "c1", "c0"}


def test_dangling_leaf_kept_only_inside_the_default_window():
    g = chain(30, 20, 10)  # main: c0 c1 c2
    g |= chain(3, 2, prefix="d", base="c1")  # a deleted branch forked at c1: d0 d1 (leaf d1)
    g |= chain(15, prefix="e", base="c0")  # another deleted branch, old: e0
    assert ancestry_leaves(g, ["c2"]) == {"d1", "e0"}
    assert kept(g, {"main": "c2"}, GCRules(7)) == {"c2", "d1", "d0", "c1"}


def test_a_deleted_branch_rule_no_longer_applies():
    g = chain(30, 20) | chain(12, prefix="f", base="c1")
    # f0 was "feature" with 30 days; feature is gone, so only the default 7 applies and f0 (12 days) goes.
    assert kept(g, {"main": "c1"}, GCRules(7, {"feature": 30})) == {"c1"}


def test_fork_base_is_kept_for_the_branch_even_if_main_walked_past_it():
    # lakeFS can lose this one (its walks share visited commits); the seed keeps it.
    g = chain(40, 35, 30, 2, 1)
    g |= chain(1, prefix="b", base="c1")
    assert {"c1", "b0"} <= kept(g, {"main": "c4", "branch": "b0"}, GCRules(7))


def oracle(commits, heads, rules) -> set[str]:
    """Straight from the seed's words: for each branch, the HEAD as of N days ago and every commit since."""
    out = set()
    children = {}
    for c in commits.values():
        if c.parents:
            children.setdefault(c.parents[0], []).append(c.id)
    for branch, head in heads.items():
        threshold = N - rules.days(branch) * D
        out.add(head)
        line = [head]
        while commits[line[-1]].parents and commits[line[-1]].parents[0] in commits:
            line.append(commits[line[-1]].parents[0])
        for i, cid in enumerate(line):
            if commits[cid].creation_date > threshold and i + 1 < len(line):
                out.add(line[i + 1])
            else:
                break
    leaves = [c for c in commits if c not in children and c not in heads.values()]
    threshold = N - rules.default_retention_days * D
    for leaf in leaves:
        cid = leaf
        if commits[cid].creation_date <= threshold:
            continue
        out.add(cid)
        while commits[cid].creation_date > threshold and commits[cid].parents:
            cid = commits[cid].parents[0]
            out.add(cid)
    return out


def test_random_graphs_match_the_oracle():
    rng = random.Random(7)
    for _ in range(300):
        commits: dict[str, Commit] = {}
        ids = []
        for i in range(rng.randint(1, 25)):
            parents = (rng.choice(ids),) if ids else ()
            if ids and rng.random() < 0.2:
                parents += (rng.choice(ids),)
            cid = f"x{i}"
            commits[cid] = Commit(cid, parents, N - rng.randint(0, 40) * D - rng.randint(0, D))
            ids.append(cid)
        heads = {f"b{j}": rng.choice(ids) for j in range(rng.randint(1, 4))}
        rules = GCRules(rng.randint(1, 20), {"b0": rng.randint(1, 30)})
        assert kept(commits, heads, rules) == oracle(commits, heads, rules)


def test_oldest_retained_is_the_end_of_the_unbroken_run_from_head():
    from spark_jobs.core.retention import Commit, oldest_retained  # noqa: PLC0415

    commits = {c: Commit(c, (p,) if p else (), 0) for c, p in (("a", None), ("b", "a"), ("c", "b"), ("d", "c"))}
    assert oldest_retained(commits, {"main": "d", "old": "a"}, {"d", "c", "a"}) == {"main": "c", "old": "a"}
    assert oldest_retained(commits, {"main": "d"}, {"d"}) == {"main": "d"}  # HEAD alone


def test_read_line_never_cuts_a_longer_retention_short_and_reads_no_further_than_needed():
    from spark_jobs.core.retention import Commit, read_line  # noqa: PLC0415

    line = [Commit(f"c{i}", (f"c{i + 1}",) if i < 9 else (), 1000 - i * 100) for i in range(10)]  # newest first
    consumed: list[str] = []

    def log(start: int = 0):
        for c in line[start:]:
            consumed.append(c.id)
            yield c

    commits: dict = {}
    depth: dict = {}
    read_line(log(), 750, commits, depth=depth)  # short retention: c0..c3 (c3 is the first at or before 750)
    assert sorted(commits) == ["c0", "c1", "c2", "c3"]
    read_line(log(), 450, commits, depth=depth)  # a longer one read after it goes on past c3, down to c6
    assert sorted(commits) == [f"c{i}" for i in range(7)]
    consumed.clear()
    read_line(log(1), 750, commits, depth=depth)  # a shorter one from c1 stops at once: c1 was read on from deeper
    assert consumed == ["c1"]
    consumed.clear()
    read_line(log(), None, commits, depth=depth)  # the whole line
    assert sorted(commits) == [f"c{i}" for i in range(10)] and consumed == [f"c{i}" for i in range(10)]
