"""Hudi-style cleaning policies on generated commit graphs, against oracles written apart from the code."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from spark_jobs.core.cleaning import (
    CleaningPolicyError,
    parse_cleaning_policies,
    policy_retained,
    retained_set,
)
from spark_jobs.core.mark import latest_versions
from spark_jobs.core.retention import Commit, GCRules

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


DAY = 86400


def days_line(ages_in_days: list[int], prefix: str, parent: str | None = None) -> dict[str, Commit]:
    out = {}
    for i, age in enumerate(ages_in_days):  # oldest first
        cid = f"{prefix}{i}"
        out[cid] = Commit(cid, (parent,) if parent else (), N - age * DAY)
        parent = cid
    return out


def decide(commits, heads, policies, *, lakefs_kept, days=30, tags=None):
    return set(retained_set(commits=commits, branch_heads=heads, rules=GCRules(days),
                            lakefs_retained=lakefs_kept, policies=parse_cleaning_policies({"policies": policies}),
                            tags=tags or {}, now=NOW).commits)


def test_without_override_a_clean_keeps_at_least_what_lakefs_keeps():
    g = days_line([40, 35, 20, 10, 2], "m")
    lakefs = {"m2", "m3", "m4", "m1"}  # lakeFS's own set: whatever it is, none of it goes
    kept = decide(g, {"main": "m4"}, [{"patterns": ["main"], "keep_commits": 1}], lakefs_kept=lakefs)
    assert kept >= lakefs | {"m4", "m3"}


def test_override_replaces_the_gc_rules_on_the_branches_it_matches_only():
    main = days_line([40, 35, 20, 10, 2], "m")
    feature = days_line([25, 15, 5], "f", parent="m2")  # forked at m2 (20 days)
    g = {**main, **feature}
    heads = {"main": "m4", "feature": "f2"}
    lakefs = {"m1", "m2", "m3", "m4", "f0", "f1", "f2"}  # 30 days everywhere
    kept = decide(g, heads, [{"patterns": ["feature"], "keep_commits": 1, "override_gc_rules": True}],
                  lakefs_kept=lakefs)
    # feature: its latest commit and one more (the policy alone); main: the 30-day rule and lakeFS's set, which
    # still holds m2, the fork base (main reaches it)
    assert kept == {"f2", "f1", "m4", "m3", "m2", "m1"}
    assert "f0" not in kept  # lakeFS kept it for feature's 30 days: the override lets it go


def test_an_override_never_drops_a_branch_head_or_a_savepoint():
    g = days_line([40, 35, 20], "f")
    kept = decide(g, {"feature": "f2"}, [
        {"patterns": ["feature"], "keep_for": "1d", "override_gc_rules": True},
        {"patterns": ["none"], "savepoints": ["release-*"]}], lakefs_kept={"f0", "f1", "f2"}, tags={"release-1": "f0"})
    assert kept == {"f2", "f0"}  # HEAD (itself older than the window: the state as of a day ago), the savepoint


def test_override_must_be_written_out_and_keep_something():
    with pytest.raises(CleaningPolicyError) as err:
        parse_cleaning_policies({"policies": [
            {"patterns": ["a"], "keep_commits": 1, "override_gc_rules": "yes"},
            {"patterns": ["b"], "savepoints": ["r-*"], "override_gc_rules": True},
        ]})
    assert "policies[0].override_gc_rules" in str(err.value) and "policies[1].override_gc_rules" in str(err.value)
    parsed = parse_cleaning_policies({"policies": [{"patterns": ["a"], "keep_commits": 1,
                                                    "override_gc_rules": True}]})
    assert parsed[0].override_gc_rules and parsed[0].document()["override_gc_rules"] is True
