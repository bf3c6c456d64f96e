"""Hudi-style cleaning policies in real GC runs on a real lakeFS."""

from __future__ import annotations

import json
import time
from datetime import timedelta

import lakefs_sdk

from tests.integration.conftest import commit, upload
from workers.gc.run import run
from workers.lakefs.errors import LakeFSError

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


def test_savepoint_keeps_a_tagged_commit_readable(cli, lakefs, repo, namespace, local_root, tmp_path):
    ids = setup(lakefs, repo)
    lakefs.call("tag", lakefs.tags.create_tag, repo, lakefs_sdk.TagCreation(id="release-1", ref=ids[1]))
    lakefs.call("tag", lakefs.tags.create_tag, repo, lakefs_sdk.TagCreation(id="nightly", ref=ids[2]))
    policy(cli, tmp_path, repo, {"policies": [{"id": "keep-releases", "patterns": ["none"],
                                               "savepoints": ["release-*"]}]})
    summary, _ = run(lakefs, namespace, repo, min_age=timedelta(0), local_root=local_root)
    assert summary.success
    assert status(lakefs, repo, ids[1], "a.txt") == 200  # savepointed
    assert status(lakefs, repo, ids[2], "a.txt") == 410  # tagged, but not a savepoint
    assert status(lakefs, repo, ids[0], "a.txt") == 410


def test_keep_commits_keeps_n_plus_one(cli, lakefs, repo, namespace, local_root, tmp_path):
    ids = setup(lakefs, repo, versions=6)
    policy(cli, tmp_path, repo, {"policies": [{"patterns": ["main"], "keep_commits": 2}]})
    run(lakefs, namespace, repo, min_age=timedelta(0), local_root=local_root)
    assert [status(lakefs, repo, c, "a.txt") for c in ids] == [410, 410, 410, 200, 200, 200]


def test_keep_versions_keeps_exactly_n_versions(cli, lakefs, repo, namespace, local_root, tmp_path):
    ids = setup(lakefs, repo, versions=5)
    policy(cli, tmp_path, repo, {"policies": [{"patterns": ["ma*"], "keep_versions": 3}]})
    run(lakefs, namespace, repo, min_age=timedelta(0), local_root=local_root)
    assert [status(lakefs, repo, c, "a.txt") for c in ids] == [410, 410, 200, 200, 200]


def test_a_policy_never_removes_what_the_gc_rules_keep(cli, lakefs, repo, namespace, local_root, tmp_path):
    ids = setup(lakefs, repo, versions=4)
    lakefs.call("rules", lakefs.repositories.set_gc_rules, repo,
                lakefs_sdk.GarbageCollectionRules(default_retention_days=60, branches=[]))
    policy(cli, tmp_path, repo, {"policies": [{"patterns": ["main"], "keep_commits": 1}]})
    run(lakefs, namespace, repo, min_age=timedelta(0), local_root=local_root)
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
