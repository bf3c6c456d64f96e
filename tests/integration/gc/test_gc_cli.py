"""The GC from the command line and from a real Celery worker, against a real lakeFS."""

from __future__ import annotations

import json
import time

import lakefs_sdk

from tests.integration.conftest import commit, upload
from workers.celery.app import create_celery
from workers.shared.lakefs.errors import LakeFSError
from workers.shared.settings import load_settings

DAY = 86400


def history(lakefs, repo):
    upload(lakefs, repo, "main", "a.txt", b"v1")
    first = commit(lakefs, repo, "main", "old", date=int(time.time()) - 30 * DAY)
    upload(lakefs, repo, "main", "a.txt", b"v2")
    commit(lakefs, repo, "main", "newer", date=int(time.time()) - 20 * DAY)
    return first


def gone(lakefs, repo, ref, path) -> bool:
    try:
        lakefs.call("get", lakefs.objects.get_object, repo, ref, path)
    except LakeFSError as exc:
        return exc.status == 410
    return False


def test_rules_set_get_clear_and_bad_files(cli, repo, tmp_path):
    path = tmp_path / "rules.yaml"
    path.write_text("default_retention_days: 7\nbranches: [{branch_id: main, retention_days: 21}]\n")
    cli("gc", "rules", "set", f"lakefs://{repo}", "-f", str(path))
    assert json.loads(cli("gc", "rules", "get", f"lakefs://{repo}").output) == {
        "default_retention_days": 7, "branches": [{"branch_id": "main", "retention_days": 21}]}
    path.write_text("default_retention_days: -1\nbranches: [{branch_id: 'a:b', retention_days: 1}]\n")
    bad = cli("gc", "rules", "set", f"lakefs://{repo}", "-f", str(path), expect_exit=1).output
    assert "default_retention_days" in bad and "branches.0.branch_id" in bad
    cli("gc", "rules", "clear", f"lakefs://{repo}")
    cli("gc", "rules", "clear", f"lakefs://{repo}")  # idempotent
    assert "no GC rules" in cli("gc", "rules", "get", f"lakefs://{repo}", expect_exit=1).output


def test_run_without_rules_fails_clearly(cli, repo, lakefs):
    history(lakefs, repo)
    out = cli("gc", "run", f"lakefs://{repo}", "--min-age", "0s", expect_exit=1).output
    assert "no GC rules" in out


def test_plan_sweep_show_from_the_cli(cli, repo, lakefs, tmp_path):
    first = history(lakefs, repo)
    lakefs.call("rules", lakefs.repositories.set_gc_rules, repo,
                lakefs_sdk.GarbageCollectionRules(default_retention_days=1, branches=[]))
    dry = json.loads(cli("gc", "run", f"lakefs://{repo}", "--min-age", "0s", "--dry-run", "--json").output)
    assert dry["dry_run"] and dry["num_deleted_objects"] == 1 and not gone(lakefs, repo, first.id, "a.txt")
    planned = cli("gc", "plan", f"lakefs://{repo}", "--min-age", "0s", "--by-prefix").output
    mark_id = planned.split("mark id: ")[1].split()[0]
    assert "total" in planned and not gone(lakefs, repo, first.id, "a.txt")
    swept = json.loads(cli("gc", "sweep", f"lakefs://{repo}", "--mark-id", mark_id, "--json").output)
    assert swept["swept"] == 1 and gone(lakefs, repo, first.id, "a.txt")
    replan = cli("gc", "plan", f"lakefs://{repo}", "--min-age", "0s").output.split("mark id: ")[1].split()[0]
    again = json.loads(cli("gc", "run", f"lakefs://{repo}", "--plan", replan, "--json").output)
    assert again["run_id"] == replan and again["swept"] == 0  # nothing left: the plan was empty
    shown = cli("gc", "show", f"lakefs://{repo}").output
    assert "gc rules" in shown and "main@" in shown
    assert "1 planned" in shown  # a plan's row says what it would delete, not "0 deleted"
    runs = json.loads(cli("gc", "show", f"lakefs://{repo}", "--json").output)[2:]
    assert [r["mode"] for r in runs[:3]] == ["sweep", "plan", "run"] and all(r["success"] for r in runs[:3])
    assert "no GC plan" in cli("gc", "sweep", f"lakefs://{repo}", "--mark-id", "nope", expect_exit=1).output
    assert "--min-age" in cli("gc", "run", f"lakefs://{repo}", "--min-age", "soon", expect_exit=2).output


def test_gc_task_on_a_real_worker(celery_worker, env, repo, lakefs, monkeypatch):
    first = history(lakefs, repo)
    lakefs.call("rules", lakefs.repositories.set_gc_rules, repo,
                lakefs_sdk.GarbageCollectionRules(default_retention_days=1, branches=[]))
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    app = create_celery(load_settings())
    # the worker's own settings keep the default 24 h cutoff: a fresh object is spared, nothing is lost
    result = app.send_task("workers.gc.tasks.run_repository", args=(repo,)).get(timeout=120)
    assert result["success"] and result["deleted"] == 0
    assert not gone(lakefs, repo, first.id, "a.txt")


def test_a_run_shows_its_progress_on_stderr_and_json_stays_clean(cli, repo, lakefs):
    first = history(lakefs, repo)
    lakefs.call("rules", lakefs.repositories.set_gc_rules, repo,
                lakefs_sdk.GarbageCollectionRules(default_retention_days=1, branches=[]))
    result = cli("gc", "run", f"lakefs://{repo}", "--min-age", "0s")
    phases = {line.split()[1]: line.split()[-2] for line in result.stderr.splitlines() if len(line.split()) >= 4}
    # commits retained, ranges read, objects listed, deleted: each phase's final count stays on screen
    assert set(phases) >= {"commits", "ranges", "objects", "deleted"}, result.stderr
    assert phases["deleted"] == "1" and phases["commits"] == "1", result.stderr
    assert gone(lakefs, repo, first.id, "a.txt")
    assert "objects listed" not in result.stdout and "deleted 1 objects" in result.stdout
    assert json.loads(cli("gc", "run", f"lakefs://{repo}", "--min-age", "0s", "--json").stdout)["swept"] == 0


def test_plan_by_path_prefix_names_what_goes_like_clean_showpartitions(cli, repo, lakefs):
    upload(lakefs, repo, "main", "tables/a/x.parquet", b"a1")
    upload(lakefs, repo, "main", "tables/b/y.parquet", b"b1")
    upload(lakefs, repo, "main", "top.txt", b"t1")
    commit(lakefs, repo, "main", "old", date=int(time.time()) - 30 * DAY)
    for path, data in (("tables/a/x.parquet", b"a2"), ("tables/b/y.parquet", b"b2"), ("top.txt", b"t2")):
        upload(lakefs, repo, "main", path, data)
    commit(lakefs, repo, "main", "newer", date=int(time.time()) - 20 * DAY)
    upload(lakefs, repo, "main", "staged/z", b"s1")
    upload(lakefs, repo, "main", "staged/z", b"s2")  # s1 was never committed: garbage no commit names
    lakefs.call("rules", lakefs.repositories.set_gc_rules, repo,
                lakefs_sdk.GarbageCollectionRules(default_retention_days=1, branches=[]))
    deep = json.loads(cli("gc", "plan", f"lakefs://{repo}", "--min-age", "0s", "--by-prefix", "2", "--json").stdout)
    assert deep["by_path"] == {"tables/a/": [1, 2], "tables/b/": [1, 2], "(top level)": [1, 2],
                               "(in no commit)": [1, 2]}
    shallow = json.loads(cli("gc", "plan", f"lakefs://{repo}", "--min-age", "0s", "--by-prefix", "--json").stdout)
    assert shallow["by_path"]["tables/a/"] == [1, 2]  # the default depth: 2
    one = json.loads(cli("gc", "plan", f"lakefs://{repo}", "--min-age", "0s", "--by-prefix", "1", "--json").stdout)
    assert one["by_path"]["tables/"] == [2, 4]
    shown = cli("gc", "plan", f"lakefs://{repo}", "--min-age", "0s", "--by-prefix", "1").stdout
    assert "path prefix" in shown and "tables/" in shown and "total" in shown
    plain = json.loads(cli("gc", "plan", f"lakefs://{repo}", "--min-age", "0s", "--json").stdout)
    assert plain["by_path"] == {} and plain["num_deleted_objects"] == 4  # names only when asked for
    assert "--by-prefix" in cli("gc", "plan", f"lakefs://{repo}", "--by-prefix", "0", expect_exit=2).output


def test_show_fits_in_100_columns_and_one_run_lists_every_branch(cli, repo, lakefs):
    """Issue 26: with many branches the history table stays readable (the oldest-retained cell is a count); the full
    list is in `gc show RUN_ID` and its --json."""
    history(lakefs, repo)
    lakefs.call("rules", lakefs.repositories.set_gc_rules, repo,
                lakefs_sdk.GarbageCollectionRules(default_retention_days=1, branches=[]))
    branches = [f"feature-a-rather-long-branch-name-{i:02d}" for i in range(12)]
    for branch in branches:
        lakefs.call("branch", lakefs.branches.create_branch, repo,
                    lakefs_sdk.BranchCreation(name=branch, source="main"))
    run = json.loads(cli("gc", "run", f"lakefs://{repo}", "--min-age", "0s", "--dry-run", "--json").output)
    shown = cli("gc", "show", f"lakefs://{repo}").output
    assert max(len(line) for line in shown.splitlines()) <= 100, shown
    assert "13 branches" in shown, shown
    one = cli("gc", "show", f"lakefs://{repo}", run["run_id"]).output
    assert all(f"{b}@" in one for b in [*branches, "main"]), one
    as_json = json.loads(cli("gc", "show", f"lakefs://{repo}", run["run_id"], "--json").output)
    assert sorted(as_json["oldest_retained"]) == sorted([*branches, "main"])


def test_the_deprecated_engine_flag_still_runs_and_warns_once(cli, repo, lakefs, monkeypatch):
    from workers.gc import cli as gc_cli  # noqa: PLC0415

    monkeypatch.setattr(gc_cli, "_engine_warned", [])  # once per process: this test's process starts here
    first = history(lakefs, repo)
    lakefs.call("rules", lakefs.repositories.set_gc_rules, repo,
                lakefs_sdk.GarbageCollectionRules(default_retention_days=1, branches=[]))
    dry = cli("gc", "run", f"lakefs://{repo}", "--min-age", "0s", "--dry-run", "--json", "--engine", "inprocess")
    assert dry.stderr.count("deprecated") == 1 and "--engine is deprecated: use --runner threads" in dry.stderr
    assert json.loads(dry.stdout)["runner"] == "threads" and not gone(lakefs, repo, first.id, "a.txt")
    done = cli("gc", "run", f"lakefs://{repo}", "--min-age", "0s", "--json", "--engine", "inprocess")
    assert "deprecated" not in done.stderr and json.loads(done.stdout)["swept"] == 1
    assert gone(lakefs, repo, first.id, "a.txt")
    runs = json.loads(cli("gc", "show", f"lakefs://{repo}", "--json").output)
    assert [(r["runner"], r["runner_reason"]) for r in runs[:2]] == [("threads", "asked for")] * 2
    assert all("engine" not in r for r in runs)


def test_a_plan_and_a_record_an_older_version_wrote_still_read(cli, repo, lakefs, lakefs_server, redis_client):
    """Older versions wrote engine (inprocess | spark) and engine_reason: a plan they marked still sweeps, and their
    history records show as runner and runner_reason."""
    from workers.gc.history import GCRuns  # noqa: PLC0415

    first = history(lakefs, repo)
    lakefs.call("rules", lakefs.repositories.set_gc_rules, repo,
                lakefs_sdk.GarbageCollectionRules(default_retention_days=1, branches=[]))
    planned = json.loads(cli("gc", "plan", f"lakefs://{repo}", "--min-age", "0s", "--json").output)
    summary = lakefs_server.dir / "block" / repo / "_lakefs/retention/gc/unified" / planned["run_id"] / "summary.json"
    record = json.loads(summary.read_text())
    assert record["runner"] == "threads" and "engine" not in record
    record.pop("runner")
    summary.write_text(json.dumps({**record, "engine": "inprocess"}))  # as an older version wrote it
    swept = json.loads(cli("gc", "sweep", f"lakefs://{repo}", "--mark-id", planned["run_id"], "--json").output)
    assert swept["swept"] == 1 and swept["runner"] == "threads" and gone(lakefs, repo, first.id, "a.txt")
    rewritten = json.loads(summary.read_text())
    assert rewritten["phase"] == "swept" and rewritten["runner"] == "threads" and "engine" not in rewritten
    GCRuns(redis_client, "lakefs-janitor").record(repo, {
        "repository_id": repo, "mode": "run", "run_id": "old", "success": True, "engine": "inprocess",
        "engine_reason": "3 ranges at the branch HEADs (<= 100)", "started_at": "2026-11-01T00:00:00+00:00"})
    runs = json.loads(cli("gc", "show", f"lakefs://{repo}", "--json").output)
    assert (runs[0]["run_id"], runs[0]["runner"], runs[0]["runner_reason"]) == (
        "old", "threads", "3 ranges at the branch HEADs (<= 100)") and "engine" not in runs[0]
    assert "old" in cli("gc", "show", f"lakefs://{repo}").output


def test_full_and_incremental_runs_from_the_cli(cli, repo, lakefs, monkeypatch):
    history(lakefs, repo)
    lakefs.call("rules", lakefs.repositories.set_gc_rules, repo,
                lakefs_sdk.GarbageCollectionRules(default_retention_days=1, branches=[]))
    first = cli("gc", "run", f"lakefs://{repo}", "--min-age", "0s").output
    assert "listing: full" in first and "full because no previous run's state" in first
    second = cli("gc", "run", f"lakefs://{repo}", "--min-age", "0s").output
    assert "listing: incremental since" in second and "found without listing" in second
    forced = cli("gc", "run", f"lakefs://{repo}", "--min-age", "0s", "--full").output
    assert "full because a full listing was asked for (--full)" in forced
    assert "0 deleted objects an incremental run would have missed" in forced
    monkeypatch.setenv("LAKEFS_JANITOR_GC__FULL_LISTING_EVERY", "0s")
    due = cli("gc", "run", f"lakefs://{repo}", "--min-age", "0s").output
    assert "GC__FULL_LISTING_EVERY" in due
    shown = cli("gc", "show", f"lakefs://{repo}").output
    assert "run/incr" in shown and "run/full" in shown
    monkeypatch.setenv("LAKEFS_JANITOR_GC__FULL_LISTING_EVERY", "weekly")
    bad = cli("gc", "run", f"lakefs://{repo}", "--min-age", "0s", expect_exit=1).output
    assert "gc.full_listing_every" in bad
    monkeypatch.delenv("LAKEFS_JANITOR_GC__FULL_LISTING_EVERY")
    assert "do not apply" in cli("gc", "run", f"lakefs://{repo}", "--plan", "x", "--full", expect_exit=2).output
