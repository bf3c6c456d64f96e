"""Pure GC pieces: the seed's retention rule over commit graphs, address normalisation."""

from __future__ import annotations

from datetime import UTC, datetime

from spark_jobs.core.addresses import local_root_from, namespace_prefixes
from spark_jobs.core.addresses import relative_key as relative_address
from spark_jobs.core.retention import DAY, Commit, GCRules
from spark_jobs.core.retention import retained_commits as retained


def retained_commits(**kw) -> set[str]:
    return set(retained(**kw).commits)

NOW = datetime(2026, 1, 31, tzinfo=UTC)
T = int(NOW.timestamp())


def chain(*specs: tuple[str, str | None, int]) -> dict[str, Commit]:
    return {cid: Commit(cid, (parent,) if parent else (), T - days * DAY, f"mr-{cid}") for cid, parent, days in specs}


def test_window_plus_the_head_as_of_n_days_ago():
    commits = chain(("a", None, 40), ("b", "a", 20), ("c", "b", 10), ("d", "c", 3), ("e", "d", 1))
    kept = retained_commits(commits=commits, branch_heads={"main": "e"}, rules=GCRules(7), now=NOW)
    assert kept == {"e", "d", "c"}  # c is the HEAD as of 7 days ago


def test_head_always_kept_and_branch_rule_applies():
    commits = chain(("a", None, 40), ("b", "a", 30), ("c", "b", 20))
    assert retained_commits(commits=commits, branch_heads={"main": "c"}, rules=GCRules(7), now=NOW) == {"c"}
    kept = retained_commits(commits=commits, branch_heads={"main": "c"}, rules=GCRules(7, {"main": 25}), now=NOW)
    assert kept == {"c", "b"}


def test_fork_base_kept_even_when_another_walk_reached_it_first():
    # main: a(40) <- b(30) <- c(1); feature forked at a with one recent commit f(2): a is feature's
    # "HEAD 7 days ago" although main's walk (longer retention) reached a first without keeping it.
    commits = chain(("a", None, 40), ("b", "a", 30), ("c", "b", 1), ("f", "a", 2))
    kept = retained_commits(commits=commits, branch_heads={"main": "c", "feature": "f"},
                            rules=GCRules(7, {"main": 10}), now=NOW)
    assert kept == {"c", "b", "f", "a"}


def test_dangling_leaf_follows_the_default_and_is_kept_only_inside_its_window():
    commits = chain(("a", None, 40), ("b", "a", 1), ("x", "a", 3), ("y", "a", 30))
    kept = retained_commits(commits=commits, branch_heads={"main": "b"}, rules=GCRules(7), now=NOW)
    assert kept == {"b", "a", "x"}  # x (deleted branch, 3 days) kept with its parent; y (30 days) is not


def test_addresses_map_into_the_namespace_or_are_skipped():
    prefixes = namespace_prefixes("s3://bucket/repo")
    assert relative_address("data/s1/x", 1, prefixes) == "data/s1/x"
    assert relative_address("s3://bucket/repo/data/s1/x", 2, prefixes) == "data/s1/x"
    assert relative_address("s3a://bucket/repo/data/s1/x", 2, prefixes) == "data/s1/x"
    assert relative_address("s3://bucket/repo2/data/s1/x", 2, prefixes) is None  # a sibling namespace
    assert relative_address("s3://other/imported.parquet", 2, prefixes) is None
    root = local_root_from("local://repo", "local:///srv/block/repo/data/s1/x")
    assert root == "/srv/block"
    local = namespace_prefixes("local://repo", root)
    assert relative_address("local:///srv/block/repo/data/s1/y", 2, local) == "data/s1/y"
    assert relative_address("local:///srv/block/other/data/s1/y", 2, local) is None
