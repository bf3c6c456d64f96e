"""Savepoints as Hudi users manage them (create, list with what only each keeps, delete, restore), a past run by
prefix, and a policy's effect shown before it applies — on a real lakeFS, the runs on both runners."""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest
import requests

from tests.integration.conftest import commit, upload
from tests.integration.gc.test_gc_against_lakefs import rules
from tests.services import ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY
from workers.shared.lakefs.errors import LakeFSError

DAY = 86400


def status(lakefs, repo, ref, path):
    try:
        lakefs.call("get", lakefs.objects.get_object, repo, ref, path)
        return 200
    except LakeFSError as exc:
        return exc.status


def content(lakefs, repo, ref, path) -> bytes:
    return lakefs.call("get", lakefs.objects.get_object, repo, ref, path)


def policies(cli, tmp_path, repo, doc, *extra):
    path = tmp_path / "cleaning.json"
    path.write_text(json.dumps(doc))
    return cli("gc", "policy", "set", f"lakefs://{repo}", "-f", str(path), *extra)


def history(lakefs, repo, versions=5, sizes=(3, 5, 7, 11, 13)):
    """a.txt in `versions` commits, 30, 29, ... days ago; GC rules keep 1 day."""
    ids = []
    for i in range(versions):
        upload(lakefs, repo, "main", "a.txt", b"v" * sizes[i])
        ids.append(commit(lakefs, repo, "main", f"v{i}", date=int(time.time()) - (30 - i) * DAY).id)
    rules(lakefs, repo, 1)
    return ids


def test_a_savepoint_keeps_its_files_until_deleted_then_the_next_run_frees_what_list_said(
        cli, lakefs, repo, any_runner_gc, tmp_path):
    ids = history(lakefs, repo)
    policies(cli, tmp_path, repo, {"policies": [{"id": "sp", "patterns": ["none"], "savepoints": ["sp-*"]}]})
    out = cli("gc", "savepoint", "create", f"lakefs://{repo}/{ids[2]}", "--comment", "before the backfill").output
    name = out.split()[1]
    assert name.startswith("sp-")
    [listed] = json.loads(cli("gc", "savepoint", "list", f"lakefs://{repo}", "--json", "--min-age", "0s").output)
    assert (listed["name"], listed["commit_id"], listed["comment"]) == (name, ids[2], "before the backfill")
    assert listed["creator"] and listed["created_at"]
    # only v2's version of a.txt (7 bytes) is kept alive by this savepoint alone
    assert (listed["objects_only_it_keeps"], listed["bytes_only_it_keeps"]) == (1, 7)

    summary, _ = any_runner_gc.run(repo, min_age=timedelta(0))
    assert summary.success
    assert [status(lakefs, repo, c, "a.txt") for c in ids] == [410, 410, 200, 410, 200]
    assert content(lakefs, repo, name, "a.txt") == b"v" * 7

    cli("gc", "savepoint", "delete", f"lakefs://{repo}", name)
    assert json.loads(cli("gc", "savepoint", "list", f"lakefs://{repo}", "--json", "--min-age", "0s").output) == []
    summary, _ = any_runner_gc.run(repo, min_age=timedelta(0))
    assert (summary.num_deleted_objects, summary.deleted_bytes) == (1, 7)
    assert status(lakefs, repo, ids[2], "a.txt") == 410


def test_savepoint_names_must_match_the_patterns_and_restore_guards_uncommitted_work(cli, lakefs, repo, tmp_path):
    ids = history(lakefs, repo, versions=3)
    refused = cli("gc", "savepoint", "create", f"lakefs://{repo}/main", expect_exit=1).output
    assert "no cleaning policy" in refused and "savepoints:" in refused
    policies(cli, tmp_path, repo, {"policies": [{"id": "sp", "patterns": ["none"], "savepoints": ["rel-*"]}]})
    wrong = cli("gc", "savepoint", "create", f"lakefs://{repo}/main", "--name", "v1", expect_exit=1).output
    assert "matches none of the savepoint patterns" in wrong and "rel-*" in wrong
    cli("gc", "savepoint", "create", f"lakefs://{repo}/{ids[1]}", "--name", "rel-1")
    plain = cli("gc", "savepoint", "delete", f"lakefs://{repo}", "nightly", expect_exit=1).output
    assert "not a savepoint" in plain

    upload(lakefs, repo, "main", "later.txt", b"later")
    commit(lakefs, repo, "main", "after the savepoint")
    upload(lakefs, repo, "main", "wip.txt", b"uncommitted")
    refused = cli("gc", "savepoint", "restore", f"lakefs://{repo}/main", "--to", "rel-1", "--yes",
                  expect_exit=1).output
    assert "uncommitted changes" in refused and "--discard-uncommitted" in refused
    head = lakefs.call("head", lakefs.branches.get_branch, repo, "main").commit_id
    done = cli("gc", "savepoint", "restore", f"lakefs://{repo}/main", "--to", "rel-1", "--yes",
               "--discard-uncommitted").output
    assert head in done
    assert lakefs.call("head", lakefs.branches.get_branch, repo, "main").commit_id == ids[1]
    assert content(lakefs, repo, "main", "a.txt") == b"v" * 5
    assert status(lakefs, repo, "main", "later.txt") == 404 and status(lakefs, repo, "main", "wip.txt") == 404


def tables_and_tmp(lakefs, repo):
    """main: tables/t/part and tmp/s/stage.csv rewritten in each of 6 daily commits, 10 to 5 days ago."""
    now = int(time.time())
    for day in range(10, 4, -1):
        upload(lakefs, repo, "main", "tables/t/part", b"t" * (100 + day))
        upload(lakefs, repo, "main", "tmp/s/stage.csv", b"s" * (10 + day))
        commit(lakefs, repo, "main", f"day {day}", date=now - day * DAY)


def test_gc_show_by_prefix_reads_what_a_run_deleted(cli, env, lakefs, repo, gc):
    tables_and_tmp(lakefs, repo)
    rules(lakefs, repo, 1)
    summary, _ = gc.run(repo, min_age=timedelta(0))
    assert summary.success and summary.swept == 10
    shown = json.loads(cli("gc", "show", f"lakefs://{repo}", summary.run_id, "--by-prefix", "1", "--json").output)
    assert shown["exact"] and shown["phase"] == "swept"
    assert shown["by_prefix"] == {
        "tables/": {"planned": 5, "deleted": 5, "failed": 0, "bytes_deleted": sum(100 + d for d in range(10, 5, -1))},
        "tmp/": {"planned": 5, "deleted": 5, "failed": 0, "bytes_deleted": sum(10 + d for d in range(10, 5, -1))}}
    text = cli("gc", "show", f"lakefs://{repo}", summary.run_id, "--by-prefix").output
    assert "tables/t/" in text and "tmp/s/" in text
    unknown = cli("gc", "show", "0000000000-nope", "--by-prefix", expect_exit=1).output
    assert "no recorded GC run" in unknown


def test_policy_set_dry_run_predicts_exactly_what_the_next_run_deletes(cli, lakefs, repo, any_runner_gc, tmp_path):
    tables_and_tmp(lakefs, repo)
    rules(lakefs, repo, 7)  # lakeFS's rules keep days 7, 6, 5 and the first before (day 8)
    tmp = {"id": "tmp", "patterns": ["main"], "paths": ["tmp/**"], "override_gc_rules": True}
    stored = {"policies": [{**tmp, "keep_commits": 2}]}
    policies(cli, tmp_path, repo, stored)
    # tmp/ cleaned harder (one version more goes), tables/ kept longer (two versions more stay)
    proposed = {"policies": [{**tmp, "keep_commits": 1},
                             {"id": "tables", "patterns": ["main"], "paths": ["tables/**"], "keep_commits": 4}]}
    before = {o.key: o.size for o in any_runner_gc.mark(repo, min_age=timedelta(0), dry_run=True).deleted}
    out = json.loads(policies(cli, tmp_path, repo, proposed, "--dry-run", "--json", "--depth", "1", "--min-age", "0s").output)
    assert json.loads(cli("gc", "policy", "get", f"lakefs://{repo}").output) == stored  # nothing changed
    policies(cli, tmp_path, repo, proposed)
    summary, marked = any_runner_gc.run(repo, min_age=timedelta(0))
    after = {o.key: o.size for o in marked.deleted}
    more, fewer = after.keys() - before.keys(), before.keys() - after.keys()
    assert out["objects_deleted_now"] == len(before) and out["objects_deleted_with_these_policies"] == len(after)
    assert out["delete_in_addition_total"] == {"objects": len(more), "bytes": sum(after[k] for k in more)}
    assert out["keep_in_addition_total"] == {"objects": len(fewer), "bytes": sum(before[k] for k in fewer)}
    assert out["delete_in_addition"] == {"tmp/": {"objects": 1, "bytes": 10 + 7}}
    assert out["keep_in_addition"] == {"tables/": {"objects": 2, "bytes": 100 + 8 + 100 + 9}}
    assert summary.swept == len(after)


def test_the_policy_api_previews_without_storing(receiver, lakefs, repo):
    tables_and_tmp(lakefs, repo)
    rules(lakefs, repo, 30)
    url = f"{receiver.url}/api/v1/repositories/{repo}/settings/gc_cleaning/policies"
    body = {"policies": [{"id": "tmp", "patterns": ["main"], "paths": ["tmp/**"], "keep_commits": 1,
                          "override_gc_rules": True}]}
    auth = (ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY)
    answer = requests.put(url, params={"dry_run": "true", "depth": "1", "min_age": "0s"}, json=body, auth=auth,
                          timeout=120)
    assert answer.status_code == 200, answer.text
    # HEAD's version and the one before stay: 4 of tmp/'s 6 versions go
    assert answer.json()["delete_in_addition"] == {"tmp/": {"objects": 4, "bytes": sum(10 + d for d in range(7, 11))}}
    assert requests.get(url, auth=auth, timeout=10).json() == {"policies": []}
    bad = requests.put(url, params={"dry_run": "true", "depth": "0"}, json=body, auth=auth, timeout=10)
    assert bad.status_code == 400 and "depth" in bad.json()["error"]


@pytest.mark.parametrize("flag", ["--dry-run"])
def test_dry_run_still_validates_first(cli, repo, tmp_path, flag):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"policies": [{"patterns": ["main"], "paths": ["/tmp/**"], "keep_for": "1d"}]}))
    out = cli("gc", "policy", "set", f"lakefs://{repo}", "-f", str(bad), flag, expect_exit=1).output
    assert "no leading '/'" in out

