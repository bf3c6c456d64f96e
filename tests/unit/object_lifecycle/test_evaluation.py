"""Evaluation against an independent brute-force oracle: random rules (globs, excludes, overlapping rules, the
default branch, disabled rules) over random objects; and a few cases spelled out."""

from __future__ import annotations

import fnmatch
import random
from datetime import UTC, datetime, timedelta

import pytest

from workers.object_lifecycle.evaluation import ObjectInfo, evaluate, prefix_of
from workers.object_lifecycle.rules import parse_rules

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
SEGMENTS = ["a", "b", "ab", "logs", "x1", "keep"]
GLOB_SEGMENTS = ["a", "b", "logs", "keep", "*", "a*", "?", "*b", "[ab]", "**"]
BRANCHES = ["main", "dev", "feat-1", "feat-2", "ingest"]
BRANCH_GLOBS = ["main", "dev", "feat-*", "*", "?ev", "ingest", "nothing-*"]


# --- the oracle: a path glob matched folder by folder, by its own rules -----------------------------------


def oracle_glob(glob: list[str], path: list[str]) -> bool:
    """``*``/``?``/``[..]`` within one folder (fnmatch on one segment); ``**`` as a whole segment is any number of
    folders, and at the end of the glob at least one more segment (``logs/**`` is under logs/, not logs)."""
    if not glob:
        return not path
    head, rest = glob[0], glob[1:]
    if head == "**":
        if not rest:
            return len(path) >= 1
        return any(oracle_glob(rest, path[k:]) for k in range(len(path) + 1))
    return bool(path) and fnmatch.fnmatchcase(path[0], head) and oracle_glob(rest, path[1:])


def oracle_selects(rule: dict, branch: str, default: bool, path: str) -> bool:
    if rule.get("status", "enabled") != "enabled":
        return False
    if default:
        if branch not in rule["branches"]:
            return False
    elif not any(fnmatch.fnmatchcase(branch, g) for g in rule["branches"]):
        return False
    segments = path.split("/")
    included = any(oracle_glob(g.split("/"), segments) for g in rule["paths"] if not g.startswith("!"))
    excluded = any(oracle_glob(g[1:].split("/"), segments) for g in rule["paths"] if g.startswith("!"))
    return included and not excluded


def random_glob(rng: random.Random) -> str:
    return "/".join(rng.choice(GLOB_SEGMENTS) for _ in range(rng.randint(1, 3)))


def random_rules(rng: random.Random) -> list[dict]:
    rules = []
    for i in range(rng.randint(1, 4)):
        paths = list(dict.fromkeys(random_glob(rng) for _ in range(rng.randint(1, 3))))
        paths += list(dict.fromkeys(f"!{random_glob(rng)}" for _ in range(rng.randint(0, 2))))
        rules.append({"id": f"r{i}", "branches": rng.sample(BRANCH_GLOBS, rng.randint(1, 3)), "paths": paths,
                      "max_age": f"{rng.randint(1, 40)}d", "status": rng.choice(["enabled"] * 3 + ["disabled"])})
    return rules


def random_objects(rng: random.Random) -> list[ObjectInfo]:
    paths = {"/".join(rng.choice(SEGMENTS) for _ in range(rng.randint(1, 4))) for _ in range(rng.randint(0, 60))}
    # Half the ages in whole days, as the rules' max_age are: objects exactly due are common.
    return [ObjectInfo(p, NOW - timedelta(hours=rng.randint(0, 50) * rng.choice([1, 24])), rng.randint(0, 10_000))
            for p in sorted(paths)]


@pytest.mark.parametrize("seed", range(300))
def test_against_the_oracle(seed):
    rng = random.Random(seed)
    documents = random_rules(rng)
    rules = parse_rules({"rules": documents})
    objects = random_objects(rng)
    branch = rng.choice(BRANCHES)
    default = branch == "main"
    depth = rng.randint(1, 3)
    got = evaluate(rules, objects, branch_id=branch, is_default=default, now=NOW, depth=depth)

    ages = {d["id"]: timedelta(days=int(d["max_age"][:-1])) for d in documents}
    expected_expired, expected_rules, expected_groups, next_due = {}, {}, {}, {}
    for obj in objects:
        selecting = [d["id"] for d in documents if oracle_selects(d, branch, default, obj.path)]
        expiring = [r for r in selecting if obj.mtime + ages[r] <= NOW]
        prefix = "".join(f"{f}/" for f in obj.path.split("/")[:-1][:depth])
        if expiring:
            expected_expired[obj.path] = tuple(expiring)
            for r in expiring:
                o, b = expected_rules.get(r, (0, 0))
                expected_rules[r] = (o + 1, b + obj.size)
                o, b = expected_groups.get((r, prefix), (0, 0))
                expected_groups[(r, prefix)] = (o + 1, b + obj.size)
        else:
            for r in selecting:
                next_due[r] = min(next_due.get(r, obj.mtime + ages[r]), obj.mtime + ages[r])
    applying = [d["id"] for d in documents
                if d["status"] == "enabled" and (branch in d["branches"] if default
                                                 else any(fnmatch.fnmatchcase(branch, g) for g in d["branches"]))]

    assert got.rule_ids == tuple(applying)
    assert {e.path: e.rule_ids for e in got.expired} == expected_expired
    assert got.objects == len(expected_expired)
    assert got.bytes == sum(o.size for o in objects if o.path in expected_expired)
    assert {r: (t.objects, t.bytes) for r, t in got.by_rule.items() if t.objects} == expected_rules
    assert {k: (t.objects, t.bytes) for k, t in got.by_prefix.items() if t.objects} == expected_groups
    assert {r: t.next_due for r, t in got.by_rule.items() if t.next_due} == next_due
    counts_only = evaluate(rules, objects, branch_id=branch, is_default=default, now=NOW, depth=depth,
                           keep_expired=False)
    assert counts_only.expired == [] and counts_only.document() == got.document()


def test_overlapping_rules_the_default_branch_and_next_due():
    rules = parse_rules({"rules": [
        {"id": "logs", "branches": ["*"], "paths": ["logs/**", "!logs/audit/**"], "max_age": "7d"},
        {"id": "all-raw", "branches": ["main", "ingest-*"], "paths": ["raw/**", "logs/**"], "max_age": "30d"},
        {"id": "off", "branches": ["*", "main"], "paths": ["**"], "max_age": "1s", "status": "disabled"},
    ]})
    days = lambda n: NOW - timedelta(days=n)  # noqa: E731
    objects = [ObjectInfo("logs/2026/a.log", days(40), 10), ObjectInfo("logs/2026/b.log", days(8), 20),
               ObjectInfo("logs/2026/c.log", days(1), 40), ObjectInfo("logs/audit/d.log", days(40), 80),
               ObjectInfo("raw/x.csv", days(29), 160), ObjectInfo("top.txt", days(400), 320)]

    main = evaluate(rules, objects, branch_id="main", is_default=True, now=NOW)
    assert main.rule_ids == ("all-raw",)  # "*" does not select the default branch
    assert [(e.path, e.rule_ids) for e in main.expired] == [("logs/2026/a.log", ("all-raw",)),
                                                            ("logs/audit/d.log", ("all-raw",))]
    assert main.by_rule["all-raw"].next_due == days(29) + timedelta(days=30)
    assert main.by_rule["all-raw"].next_path == "raw/x.csv"

    feature = evaluate(rules, objects, branch_id="feature-1", is_default=False, now=NOW, depth=2)
    assert feature.rule_ids == ("logs",)
    assert [e.path for e in feature.expired] == ["logs/2026/a.log", "logs/2026/b.log"]
    assert (feature.objects, feature.bytes) == (2, 30)
    tally = feature.by_prefix[("logs", "logs/2026/")]
    assert (tally.objects, tally.bytes, tally.next_due) == (2, 30, days(1) + timedelta(days=7))

    ingest = evaluate(rules, objects, branch_id="ingest-1", is_default=False, now=NOW)
    assert [(e.path, e.rule_ids) for e in ingest.expired][:1] == [("logs/2026/a.log", ("logs", "all-raw"))]
    assert (ingest.objects, ingest.by_rule["logs"].objects, ingest.by_rule["all-raw"].objects) == (3, 2, 2)
    # b.log goes by "logs" now: it is not "next due" under all-raw, which would take it later.
    assert ingest.by_rule["all-raw"].next_due == days(29) + timedelta(days=30)
    doc = ingest.document()
    assert doc["objects"] == 3 and {g["prefix"] for g in doc["by_prefix"]} == {"logs/", "raw/"}


def test_prefix_of():
    assert prefix_of("a/b/c.txt", 1) == "a/" and prefix_of("a/b/c.txt", 2) == "a/b/"
    assert prefix_of("a/b/c.txt", 5) == "a/b/" and prefix_of("top.txt", 1) == ""


def test_exactly_due_expires_and_a_branch_no_rule_selects():
    (rule,) = parse_rules([{"id": "r", "branches": ["dev"], "paths": ["**"], "max_age": "1h"}])
    objects = [ObjectInfo("a", NOW - timedelta(hours=1), 1), ObjectInfo("b", NOW - timedelta(minutes=59), 1)]
    got = evaluate([rule], objects, branch_id="dev", is_default=False, now=NOW)
    assert [e.path for e in got.expired] == ["a"] and got.by_rule["r"].next_due == NOW + timedelta(minutes=1)
    none = evaluate([rule], objects, branch_id="prod", is_default=False, now=NOW)
    assert none.rule_ids == () and none.expired == [] and none.by_rule == {}


def test_no_rule_expires_the_branchs_hook_definitions():
    rules = parse_rules({"rules": [{"id": "all", "branches": ["main"], "paths": ["**"], "max_age": "1d"}]})
    old = NOW - timedelta(days=30)
    objects = [ObjectInfo("_lakefs_actions/veto.yaml", old, 10), ObjectInfo("data/_lakefs_actions/x", old, 1),
               ObjectInfo("a", old, 2)]
    result = evaluate(rules, objects, branch_id="main", is_default=True, now=NOW)
    assert [e.path for e in result.expired] == ["data/_lakefs_actions/x", "a"]
