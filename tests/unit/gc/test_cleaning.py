"""Hudi-style cleaning policies on generated commit graphs, against oracles written apart from the code."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from spark_jobs.core.cleaning import (
    CleaningPolicyError,
    latest_versions,
    parse_cleaning_policies,
    policy_retained,
)
from spark_jobs.core.retention import Commit

NOW = datetime(2026, 6, 1, tzinfo=UTC)
N = int(NOW.timestamp())
H = 3600


def line(n: int, *, hours_apart: int = 1, prefix: str = "c") -> dict[str, Commit]:
    out, parent = {}, None
    for i in range(n):  # c0 oldest
        cid = f"{prefix}{i}"
        out[cid] = Commit(cid, (parent,) if parent else (), N - (n - i) * hours_apart * H)
        parent = cid
    return out


def retained(commits, heads, policies, tags=None):
    parsed = parse_cleaning_policies({"policies": policies})
    return set(policy_retained(commits=commits, branch_heads=heads, tags=tags or {}, policies=parsed, now=NOW))


def test_keep_commits_keeps_n_plus_one():
    g = line(10)
    assert retained(g, {"main": "c9"}, [{"patterns": ["main"], "keep_commits": 3}]) == {"c9", "c8", "c7", "c6"}


def test_keep_for_is_a_window_plus_the_commit_before_it():
    g = line(10, hours_apart=10)  # c9 is 10 h old, c8 20 h, ...
    assert retained(g, {"main": "c9"}, [{"patterns": ["main"], "keep_for": "36h"}]) == {"c9", "c8", "c7", "c6"}


def test_savepoints_keep_tagged_commits_only():
    g = line(10)
    kept = retained(g, {"main": "c9"}, [{"patterns": ["nothing-*"], "savepoints": ["release-*"]}],
                    tags={"release-1": "c2", "nightly": "c3"})
    assert kept == {"c2"}


def test_several_matching_policies_keep_the_union():
    g = line(10, hours_apart=10)
    kept = retained(g, {"main": "c9"}, [{"patterns": ["main"], "keep_commits": 1},
                                         {"patterns": ["m*"], "keep_for": "45h"}])
    assert kept == {"c9", "c8", "c7", "c6", "c5"}  # the window keeps more than the commit count


def test_unmatched_branches_are_left_to_the_gc_rules():
    g = line(5) | line(5, prefix="d")
    assert retained(g, {"main": "c4", "dev": "d4"}, [{"patterns": ["main"], "keep_commits": 1}]) == {"c4", "c3"}


def oracle_versions(history, n):
    out = set()
    paths = {p for entries in history for p, _ in entries}
    for path in paths:
        seen = []
        for entries in history:
            for p, a in entries:
                if p == path and a not in seen:
                    seen.append(a)
        out |= set(seen[:n])
    return out


def test_latest_versions_keeps_exactly_n_per_path_with_head_first():
    rng = random.Random(3)
    for _ in range(200):
        history = [[(f"p{j}", f"a{rng.randint(0, 6)}-{j}") for j in range(rng.randint(0, 4))]
                   for _ in range(rng.randint(1, 8))]
        n = rng.randint(1, 3)
        kept = latest_versions(history, n)
        assert kept == oracle_versions(history, n)
        for _path, a in history[0]:
            assert a in kept  # HEAD's version is always one of them


def test_validation_reports_every_mistake_with_index_and_field():
    with pytest.raises(CleaningPolicyError) as err:
        parse_cleaning_policies({"policies": [
            {"patterns": [], "keep_commits": 0},
            {"patterns": ["a"], "keep_for": "36x", "extra": 1},
            {"id": "x y", "patterns": ["b"]},
            {"id": "dup", "patterns": ["c"], "keep_versions": 2},
            {"id": "dup", "patterns": ["d"], "savepoints": "release-*"},
        ]})
    text = str(err.value)
    for needle in ("policies[0].patterns", "policies[0].keep_commits", "policies[1].keep_for", "policies[1].extra",
                   "policies[2].id", "policies[2].(policy)", "policies[4].id", "policies[4].savepoints"):
        assert needle in text, needle


def test_policy_document_round_trips():
    doc = {"policies": [{"id": "hot", "patterns": ["ingest-*"], "keep_commits": 5, "keep_versions": 2,
                         "keep_for": "36h", "savepoints": ["release-*"], "description": "d"}]}
    parsed = parse_cleaning_policies(doc)
    assert [p.document() for p in parsed] == [{**doc["policies"][0], "keep_for": "1d12h"}]
    assert parsed[0].keep_for == timedelta(hours=36)
