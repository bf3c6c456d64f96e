"""Hudi-style cleaning policies in real GC runs on a real lakeFS."""

from __future__ import annotations

import json
import random
import time
from datetime import UTC, datetime, timedelta

import lakefs_sdk
import pytest

from spark_jobs.core.cleaning import parse_cleaning_policies
from tests.integration.conftest import commit, upload
from tests.integration.gc.test_gc_against_lakefs import lakefs_own_retained
from workers.gc.cleaning_store import set_cleaning
from workers.shared.lakefs.errors import LakeFSError

DAY = 86400


def status(lakefs, repo, ref, path):
    try:
        lakefs.call("get", lakefs.objects.get_object, repo, ref, path)
        return 200
    except LakeFSError as exc:
        return exc.status


def setup(lakefs, repo, versions=5):
    """a.txt overwritten in each of `versions` commits, 30, 29, … days ago; GC rules keep 1 day."""
    ids = []
    for i in range(versions):
        upload(lakefs, repo, "main", "a.txt", f"v{i}".encode())
        ids.append(commit(lakefs, repo, "main", f"v{i}", date=int(time.time()) - (30 - i) * DAY).id)
    lakefs.call("rules", lakefs.repositories.set_gc_rules, repo,
                lakefs_sdk.GarbageCollectionRules(default_retention_days=1, branches=[]))
    return ids


def policy(cli, tmp_path, repo, doc):
    path = tmp_path / "cleaning.yaml"
    path.write_text(json.dumps(doc))
    return cli("gc", "policy", "set", f"lakefs://{repo}", "-f", str(path))


def test_savepoint_keeps_a_tagged_commit_readable(cli, lakefs, gc, repo, namespace, local_root, tmp_path):
    ids = setup(lakefs, repo)
    lakefs.call("tag", lakefs.tags.create_tag, repo, lakefs_sdk.TagCreation(id="release-1", ref=ids[1]))
    lakefs.call("tag", lakefs.tags.create_tag, repo, lakefs_sdk.TagCreation(id="nightly", ref=ids[2]))
    policy(cli, tmp_path, repo, {"policies": [{"id": "keep-releases", "patterns": ["none"],
                                               "savepoints": ["release-*"]}]})
    summary, _ = gc.run(repo, min_age=timedelta(0))
    assert summary.success
    assert status(lakefs, repo, ids[1], "a.txt") == 200  # savepointed
    assert status(lakefs, repo, ids[2], "a.txt") == 410  # tagged, but not a savepoint
    assert status(lakefs, repo, ids[0], "a.txt") == 410


def test_keep_commits_keeps_n_plus_one(cli, lakefs, gc, repo, namespace, local_root, tmp_path):
    ids = setup(lakefs, repo, versions=6)
    policy(cli, tmp_path, repo, {"policies": [{"patterns": ["main"], "keep_commits": 2}]})
    gc.run(repo, min_age=timedelta(0))
    assert [status(lakefs, repo, c, "a.txt") for c in ids] == [410, 410, 410, 200, 200, 200]


def test_keep_versions_keeps_exactly_n_versions(cli, lakefs, gc, repo, namespace, local_root, tmp_path):
    ids = setup(lakefs, repo, versions=5)
    policy(cli, tmp_path, repo, {"policies": [{"patterns": ["ma*"], "keep_versions": 3}]})
    gc.run(repo, min_age=timedelta(0))
    assert [status(lakefs, repo, c, "a.txt") for c in ids] == [410, 410, 200, 200, 200]


def test_a_policy_never_removes_what_the_gc_rules_keep(cli, lakefs, gc, repo, namespace, local_root, tmp_path):
    ids = setup(lakefs, repo, versions=4)
    lakefs.call("rules", lakefs.repositories.set_gc_rules, repo,
                lakefs_sdk.GarbageCollectionRules(default_retention_days=60, branches=[]))
    policy(cli, tmp_path, repo, {"policies": [{"patterns": ["main"], "keep_commits": 1}]})
    gc.run(repo, min_age=timedelta(0))
    assert all(status(lakefs, repo, c, "a.txt") == 200 for c in ids)


def test_policy_cli_validates_all_at_once_and_uses_etags(cli, repo, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("policies: [{patterns: [], keep_commits: 0}, {patterns: [x], keep_for: 36q}]\n")
    out = cli("gc", "policy", "set", f"lakefs://{repo}", "-f", str(bad), expect_exit=1).output
    assert "policies[0].patterns" in out and "policies[0].keep_commits" in out and "policies[1].keep_for" in out
    policy(cli, tmp_path, repo, {"policies": [{"id": "a", "patterns": ["x"], "keep_for": "36h"}]})
    got = cli("gc", "policy", "get", f"lakefs://{repo}", "--etag")
    assert json.loads(got.stdout) == {"policies": [{"id": "a", "patterns": ["x"], "keep_for": "1d12h"}]}
    good = tmp_path / "good.yaml"
    good.write_text('{"policies": [{"id": "b", "patterns": ["y"], "keep_commits": 3}]}')
    stale = cli("gc", "policy", "set", f"lakefs://{repo}", "-f", str(good), "--if-match", '"nope"', expect_exit=1)
    assert "changed since they were read" in stale.output
    cli("gc", "policy", "clear", f"lakefs://{repo}")
    assert json.loads(cli("gc", "policy", "get", f"lakefs://{repo}").output) == {"policies": []}


@pytest.mark.parametrize("seed", [11, 12])
def test_keep_versions_on_random_histories_matches_an_oracle_through_the_api(lakefs, gc, repo, namespace, local_root,
                                                                             seed):
    """Random overwrites, deletes and a revert on main (a revert brings an earlier range back); the oracle lists
    every commit of main's first-parent line through the API, newest first, and keeps each path's first N
    distinct physical addresses; GC rules keep only HEAD. The plan must delete exactly the rest."""
    rng = random.Random(seed)
    paths = [f"t/p{i}" for i in range(5)]
    now = int(time.time())
    for p in paths:
        upload(lakefs, repo, "main", p, f"{p}-0".encode())
    commit(lakefs, repo, "main", "base", date=now - 40 * DAY)
    for day in range(39, 30, -1):
        if day == 34:
            head = lakefs.call("head", lakefs.branches.get_branch, repo, "main").commit_id
            lakefs.call("revert", lakefs.branches.revert_branch, repo, "main",
                        lakefs_sdk.RevertCreation(ref=head, parent_number=0))
            continue
        for p in rng.sample(paths, rng.randint(1, 3)):
            upload(lakefs, repo, "main", p, f"{p}-{day}-{rng.random()}".encode())
        if rng.random() < 0.3:
            lakefs.call("delete", lakefs.objects.delete_object, repo, "main", rng.choice(paths))
        commit(lakefs, repo, "main", f"day {day}", date=now - day * DAY)
    lakefs.call("rules", lakefs.repositories.set_gc_rules, repo,
                lakefs_sdk.GarbageCollectionRules(default_retention_days=1, branches=[]))
    n = 2
    set_cleaning(lakefs, repo, parse_cleaning_policies({"policies": [{"patterns": ["main"], "keep_versions": n}]}))

    def key(address: str) -> str:
        return address.split(f"/{repo}/", 1)[1] if "://" in address else address

    versions: dict[str, list[str]] = {}
    line = lakefs.call("log", lakefs.refs.log_commits, repo, "main", first_parent=True, amount=1000).results
    for c in line:  # newest first
        for obj in lakefs.paginate("list", lakefs.objects.list_objects, repo, c.id):
            seen = versions.setdefault(obj.path, [])
            if len(seen) < n and key(obj.physical_address) not in seen:
                seen.append(key(obj.physical_address))
    expected_kept = {k for seen in versions.values() for k in seen}
    # The revert is dated now, amid older commits: lakeFS's own walk keeps commits around it (lakefs-facts §8),
    # and nothing lakeFS keeps may go.
    theirs = lakefs_own_retained(lakefs, repo, local_root)
    for commit_id in theirs:
        expected_kept |= {key(o.physical_address) for o in lakefs.paginate("list", lakefs.objects.list_objects,
                                                                             repo, commit_id)}
    marked = gc.mark(repo, now=datetime.now(UTC), min_age=timedelta(0), dry_run=True)
    listed = {o.key for o in namespace.list_data() if o.key.startswith("data/")}
    assert {o.key for o in marked.deleted} == listed - expected_kept
    assert len(listed - expected_kept) > 0 and len(expected_kept) > len(paths)  # the case is not trivial


def test_an_override_cleans_what_the_gc_rules_would_keep_and_only_where_it_matches(cli, lakefs, gc, repo, namespace,
                                                                                   local_root, tmp_path):
    ids = setup(lakefs, repo, versions=4)  # a.txt in 4 commits, 30 to 27 days old
    lakefs.call("rules", lakefs.repositories.set_gc_rules, repo,
                lakefs_sdk.GarbageCollectionRules(default_retention_days=60, branches=[]))
    policy(cli, tmp_path, repo, {"policies": [{"patterns": ["ma*"], "keep_commits": 1, "override_gc_rules": True}]})
    gc.run(repo, min_age=timedelta(0))
    # lakeFS's 60 days would keep all four; the override keeps the latest commit and one more
    assert [status(lakefs, repo, c, "a.txt") for c in ids] == [410, 410, 200, 200]
