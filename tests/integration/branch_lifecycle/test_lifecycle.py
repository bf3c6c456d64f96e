"""Branch lifecycle against real lakeFS, Redis and a Celery worker; time is moved with `now`, never by sleeping."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from prometheus_client import CollectorRegistry

from tests.integration.conftest import commit, create_branch, eventually, upload
from workers.branch_lifecycle.deletions import execute, plan
from workers.branch_lifecycle.policies import parse_policies
from workers.branch_lifecycle.run import LifecycleOptions, run_repository
from workers.branch_lifecycle.store import get_policies, set_policies
from workers.celery.app import create_celery
from workers.shared.metrics import Metrics
from workers.shared.settings import load_settings

T0 = datetime(2026, 1, 1, tzinfo=UTC)
DAY = timedelta(days=1)


def set_file(cli, tmp_path, repo, text, *extra, expect_exit=0):
    path = tmp_path / "policies.yaml"
    path.write_text(text)
    return cli("branch-lifecycle", "set", f"lakefs://{repo}", "-f", str(path), *extra, expect_exit=expect_exit)


def branches(lakefs, repo) -> set[str]:
    return {b.id for b in lakefs.paginate("list", lakefs.branches.list_branches, repo)}


def born(lakefs, clock, repo, name, created=T0, written=None):
    """A branch whose idle clock says it was created (and last written) at the given times."""
    create_branch(lakefs, repo, name)
    clock.record_created(repo, name, created)
    if written:
        clock.record_write(repo, name, written)


def policies(lakefs, repo, doc):
    set_policies(lakefs, repo, parse_policies(doc, "main"))


OPTIONS = LifecycleOptions(max_deletions=100)


# --- policies: storage, CLI, validation ------------------------------------------------------------------------

def test_set_get_clear_roundtrip_with_stable_ids(cli, repo, tmp_path):
    text = 'policies:\n  - patterns: ["feature-*", "wip-*"]\n    max_age: "7d"\n    max_idle_age: 72h\n' \
           '  - {id: temp, patterns: ["temp-*"], max_idle_age: "24h", description: scratch}\n'
    first = json.loads(set_file(cli, tmp_path, repo, text).output)
    assigned = first["policies"][0]["id"]
    assert assigned.startswith("pol-") and len(assigned) == 12
    assert first["policies"][0]["max_idle_age"] == "3d"  # canonical form
    assert first["policies"][1] == {"id": "temp", "patterns": ["temp-*"], "max_idle_age": "1d",
                                    "description": "scratch"}
    assert json.loads(set_file(cli, tmp_path, repo, text).output) == first  # same id on re-apply
    assert json.loads(cli("branch-lifecycle", "get", f"lakefs://{repo}").output) == first
    cli("branch-lifecycle", "clear", f"lakefs://{repo}")
    cli("branch-lifecycle", "clear", f"lakefs://{repo}")  # idempotent
    assert json.loads(cli("branch-lifecycle", "get", f"lakefs://{repo}").output) == {"policies": []}


def test_enterprise_shape_is_accepted_and_output_in_seed_shape(cli, repo, tmp_path):
    text = json.dumps({"policies": [{"name_patterns": ["ci-*"], "max_inactivity_time": 86400, "max_age": 604800}]})
    out = json.loads(set_file(cli, tmp_path, repo, text).output)["policies"][0]
    assert (out["patterns"], out["max_age"], out["max_idle_age"]) == (["ci-*"], "1w", "1d")


def test_stale_etag_is_refused_unless_forced(cli, repo, tmp_path, lakefs):
    set_file(cli, tmp_path, repo, 'policies: [{patterns: ["a-*"], max_age: 1d}]')
    result = cli("branch-lifecycle", "get", f"lakefs://{repo}", "--etag")
    etag = result.output.split("ETag: ")[1].strip()
    policies(lakefs, repo, {"policies": [{"patterns": ["b-*"], "max_age": "2d"}]})  # someone else's edit
    refused = set_file(cli, tmp_path, repo, 'policies: [{patterns: ["c-*"], max_age: 1d}]', "--if-match", etag,
                       expect_exit=1)
    assert "changed since they were read" in refused.output
    assert get_policies(lakefs, repo).policies[0].patterns == ("b-*",)
    set_file(cli, tmp_path, repo, 'policies: [{patterns: ["c-*"], max_age: 1d}]', "--force")
    assert get_policies(lakefs, repo).policies[0].patterns == ("c-*",)


@pytest.mark.parametrize(("text", "needles"), [
    ('policies: [{patterns: ["*"], max_age: 1d}]', ["policies[0].patterns", 'default branch "main"']),
    ('policies: [{patterns: ["f-*"], max_age: "7x"}]', ["policies[0].max_age", '"7x"']),
    ('policies: [{patterns: ["f-*"]}]', ["policies[0]", "max_age", "max_idle_age"]),
    ('policies: [{patterns: [], max_age: 1d}]', ["policies[0].patterns"]),
    ('policies: [{id: a, patterns: ["x-*"], max_age: 1d}, {id: a, patterns: ["y-*"], max_age: 1d}]',
     ["policies[1].id", '"a"']),
    ('policies: [{id: "has space", patterns: ["x-*"], max_age: 1d}]', ["policies[0].id", "whitespace"]),
    ('policies: [{id: "%s", patterns: ["x-*"], max_age: 1d}]' % ("x" * 33), ["policies[0].id", "32"]),
    ('policies: [{patterns: ["x-*"], max_age: 1d, colour: red}]', ["policies[0].colour"]),
    ('policies: [{patterns: ["x-*"], max_age: "0s"}]', ["policies[0].max_age"]),
    ('policies: [{patterns: ["x-[ab"], max_age: 1d}]', ["policies[0].patterns"]),
    ("policies: [unclosed", ["line"]),
    ("", ["empty"]),
])
def test_bad_policy_files_give_precise_errors(cli, repo, tmp_path, text, needles, lakefs):
    out = set_file(cli, tmp_path, repo, text, expect_exit=1).output
    for needle in needles:
        assert needle in out, out
    assert "Traceback" not in out
    assert get_policies(lakefs, repo).policies == []  # nothing was stored


def test_all_mistakes_are_reported_at_once(cli, repo, tmp_path):
    text = 'policies: [{patterns: ["*"], max_age: 1x}, {patterns: ["ok-*"]}, {patterns: ["y"], max_age: 1d, z: 1}]'
    out = set_file(cli, tmp_path, repo, text, expect_exit=1).output
    for needle in ("policies[0].patterns", "policies[0].max_age", "policies[1]", "policies[2].z"):
        assert needle in out, out


def test_missing_file_is_a_clear_error(cli, repo):
    out = cli("branch-lifecycle", "set", f"lakefs://{repo}", "-f", "/nonexistent/p.yaml", expect_exit=1).output
    assert "cannot read /nonexistent/p.yaml" in out


# --- evaluation and deletion ------------------------------------------------------------------------------------

def test_both_thresholds_must_be_crossed(lakefs, clock, repo):
    policies(lakefs, repo, {"policies": [{"id": "both", "patterns": ["f-*"], "max_age": "10d", "max_idle_age": "3d"}]})
    born(lakefs, clock, repo, "f-busy", T0, written=T0 + 9 * DAY)
    born(lakefs, clock, repo, "f-quiet", T0, written=T0 + 2 * DAY)
    report = run_repository(lakefs, clock, repo, now=T0 + 11 * DAY, options=OPTIONS)
    assert [(o.branch_id, o.result, o.policy_id) for o in report.outcomes] == [("f-quiet", "deleted", "both")]
    assert branches(lakefs, repo) == {"main", "f-busy"}
    report = run_repository(lakefs, clock, repo, now=T0 + 12 * DAY + timedelta(seconds=1), options=OPTIONS)
    assert [(o.branch_id, o.result) for o in report.outcomes] == [("f-busy", "deleted")]


def test_first_matching_policy_is_recorded(lakefs, clock, repo):
    policies(lakefs, repo, {"policies": [
        {"id": "not-yet", "patterns": ["f-*"], "max_age": "30d"},
        {"id": "first-crossed", "patterns": ["f-*"], "max_idle_age": "1d"},
        {"id": "also-crossed", "patterns": ["f-*"], "max_age": "2d"},
    ]})
    born(lakefs, clock, repo, "f-1")
    report = run_repository(lakefs, clock, repo, now=T0 + 5 * DAY, options=OPTIONS)
    assert [(o.result, o.policy_id) for o in report.outcomes] == [("deleted", "first-crossed")]


def test_default_branch_is_never_deleted_even_by_star(lakefs, clock, repo):
    clock.record_created(repo, "main", T0)
    born(lakefs, clock, repo, "other")
    star = parse_policies({"policies": [{"id": "everything", "patterns": ["*"], "max_age": "1s"}]}, None)
    p = plan(lakefs, clock, repo, now=T0 + 100 * DAY, policies=star)
    report = execute(lakefs, clock, p)
    assert {o.branch_id for o in report.outcomes} == {"other"}
    assert report.skipped == {"default-branch": 1}
    assert "main" in branches(lakefs, repo)


def test_branch_without_creation_time_is_skipped_unless_adopted(lakefs, clock, repo):
    policies(lakefs, repo, {"policies": [{"patterns": ["old-*"], "max_age": "1d"}]})
    create_branch(lakefs, repo, "old-1")  # no hook, no clock: predates tracking
    report = run_repository(lakefs, clock, repo, now=T0 + 100 * DAY, options=OPTIONS)
    assert report.outcomes == [] and report.skipped["no-creation-time"] == 1
    head = lakefs.call("get", lakefs.branches.get_branch, repo, "old-1").commit_id
    clock.observe(repo, "old-1", head=head, fingerprint="", now=T0)  # the reconciler first saw it at T0
    adopt = LifecycleOptions(adopt_untracked=True)
    dry = run_repository(lakefs, clock, repo, now=T0 + 100 * DAY, options=adopt, dry_run=True)
    assert [(o.branch_id, o.result) for o in dry.outcomes] == [("old-1", "would-delete")]
    assert clock.get(repo, "old-1").created_at is None  # adoption is read-only: a dry run leaves no trace
    report = run_repository(lakefs, clock, repo, now=T0 + 100 * DAY, options=adopt)
    assert [(o.branch_id, o.result) for o in report.outcomes] == [("old-1", "deleted")]


def test_preview_shows_what_run_does_with_adoption(cli, env, lakefs, clock, repo):
    from click.testing import CliRunner  # noqa: PLC0415

    from workers.cli import main  # noqa: PLC0415

    policies(lakefs, repo, {"policies": [{"id": "p", "patterns": ["u-*"], "max_age": "1d"}]})
    create_branch(lakefs, repo, "u-1")
    head = lakefs.call("get", lakefs.branches.get_branch, repo, "u-1").commit_id
    clock.observe(repo, "u-1", head=head, fingerprint="", now=T0)
    adopt_env = {**env, "LAKEFS_JANITOR_LIFECYCLE_ADOPT_UNTRACKED": "true"}
    out = CliRunner().invoke(main, ["branch-lifecycle", "preview", f"lakefs://{repo}", "--json", "--now",
                                    "2026-02-01T00:00:00Z"], env=adopt_env).output
    assert {b["branch_id"]: b["action"] for b in json.loads(out)["branches"]}["u-1"] == "delete"
    assert clock.get(repo, "u-1").created_at is None


def test_a_future_now_is_only_for_dry_runs(cli, repo):
    out = cli("branch-lifecycle", "run", f"lakefs://{repo}", "--now", "2099-01-01T00:00:00Z", expect_exit=2).output
    assert "only be used with --dry-run" in out


def test_never_written_branch_falls_back_to_creation_time(lakefs, clock, repo):
    policies(lakefs, repo, {"policies": [{"id": "idle", "patterns": ["n-*"], "max_idle_age": "7d"}]})
    born(lakefs, clock, repo, "n-1", T0)
    assert run_repository(lakefs, clock, repo, now=T0 + 7 * DAY, options=OPTIONS).outcomes == []  # exactly 7d: not yet
    report = run_repository(lakefs, clock, repo, now=T0 + 7 * DAY + timedelta(seconds=1), options=OPTIONS)
    assert [o.result for o in report.outcomes] == ["deleted"]


def test_dry_run_deletes_nothing(cli, lakefs, clock, repo):
    policies(lakefs, repo, {"policies": [{"id": "p", "patterns": ["d-*"], "max_age": "1d"}]})
    born(lakefs, clock, repo, "d-1")
    born(lakefs, clock, repo, "d-2")
    out = cli("branch-lifecycle", "run", f"lakefs://{repo}", "--dry-run", "--now", "2026-02-01T00:00:00Z").output
    assert "would delete 2 branches;" in out
    assert branches(lakefs, repo) == {"main", "d-1", "d-2"}
    assert cli("branch-lifecycle", "history", f"lakefs://{repo}").output.strip() == "[]"


def test_branch_written_between_evaluation_and_delete_survives(lakefs, clock, repo):
    policies(lakefs, repo, {"policies": [{"id": "p", "patterns": ["w-*"], "max_idle_age": "1d"}]})
    born(lakefs, clock, repo, "w-committed")
    born(lakefs, clock, repo, "w-clocked")
    born(lakefs, clock, repo, "w-untouched")
    p = plan(lakefs, clock, repo, now=T0 + 10 * DAY)
    assert [d.action for d in p.decisions if d.branch_id != "main"] == ["delete"] * 3
    upload(lakefs, repo, "w-committed", "late.txt")
    commit(lakefs, repo, "w-committed", "written after evaluation")  # HEAD moves
    clock.record_write(repo, "w-clocked", T0 + 10 * DAY - timedelta(hours=1))  # e.g. a webhook arriving late
    report = execute(lakefs, clock, p)
    assert {o.branch_id: o.result for o in report.outcomes} == {
        "w-committed": "written-since", "w-clocked": "written-since", "w-untouched": "deleted"}
    assert branches(lakefs, repo) == {"main", "w-committed", "w-clocked"}


def test_deletion_cap_per_run(lakefs, clock, repo):
    policies(lakefs, repo, {"policies": [{"id": "p", "patterns": ["c-*"], "max_age": "1d"}]})
    for i in range(3):
        born(lakefs, clock, repo, f"c-{i}")
    report = run_repository(lakefs, clock, repo, now=T0 + 5 * DAY, options=LifecycleOptions(max_deletions=2))
    assert sorted(o.result for o in report.outcomes) == ["capped", "deleted", "deleted"]
    assert len(branches(lakefs, repo)) == 2


def test_pre_delete_hook_veto_keeps_the_branch(lakefs, clock, repo, receiver):
    veto = ("name: veto\non:\n  pre-delete-branch:\nhooks:\n  - id: refuse\n    type: webhook\n"
            f"    properties:\n      url: {receiver.url}/no-such-endpoint\n")
    lakefs.upload(repo, "main", "_lakefs_actions/veto.yaml", data=veto.encode())
    commit(lakefs, repo, "main", "add veto hook")
    policies(lakefs, repo, {"policies": [{"id": "p", "patterns": ["v-*"], "max_age": "1d"}]})
    born(lakefs, clock, repo, "v-protected")
    registry = CollectorRegistry()
    report = run_repository(lakefs, clock, repo, now=T0 + 5 * DAY, options=OPTIONS, metrics=Metrics(registry))
    assert [(o.branch_id, o.result) for o in report.outcomes] == [("v-protected", "vetoed")]
    assert "v-protected" in branches(lakefs, repo)
    labels = {"repository": repo, "policy": "p"}
    assert registry.get_sample_value("lakefs_janitor_branch_deletions_vetoed_total", labels) == 1
    assert registry.get_sample_value("lakefs_janitor_branches_deleted_total", labels) is None


def test_two_concurrent_runs_delete_each_branch_once(lakefs, clock, repo):
    policies(lakefs, repo, {"policies": [{"id": "p", "patterns": ["x-*"], "max_age": "1d"}]})
    for i in range(6):
        born(lakefs, clock, repo, f"x-{i}")
    reports = []
    threads = [threading.Thread(target=lambda: reports.append(run_repository(lakefs, clock, repo, now=T0 + 5 * DAY,
                                                                             options=OPTIONS))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    deleted = [o.branch_id for r in reports for o in r.outcomes if o.result == "deleted"]
    assert sorted(deleted) == [f"x-{i}" for i in range(6)]
    # without the lock the second run would also try them: its deletes would come back "gone"
    assert [o for r in reports for o in r.outcomes if o.result != "deleted"] == []
    assert branches(lakefs, repo) == {"main"}


def test_restore_recreates_the_branch_at_its_last_head(cli, lakefs, clock, repo):
    policies(lakefs, repo, {"policies": [{"id": "p", "patterns": ["r-*"], "max_age": "1d"}]})
    born(lakefs, clock, repo, "r-1")
    upload(lakefs, repo, "r-1", "precious.txt", b"keep me")
    head = commit(lakefs, repo, "r-1", "work").id
    run_repository(lakefs, clock, repo, now=T0 + 5 * DAY, options=OPTIONS)
    assert "r-1" not in branches(lakefs, repo)
    history = cli("branch-lifecycle", "history", f"lakefs://{repo}").output
    assert f"head: {head}" in history and "policy_id: p" in history
    out = cli("branch-lifecycle", "restore", f"lakefs://{repo}/r-1").output
    assert f"restored lakefs://{repo}/r-1 at {head}" in out
    assert lakefs.call("get", lakefs.branches.get_branch, repo, "r-1").commit_id == head
    again = cli("branch-lifecycle", "restore", f"lakefs://{repo}/r-1", expect_exit=1).output
    assert "exists already" in again
    unknown = cli("branch-lifecycle", "restore", f"lakefs://{repo}/never", expect_exit=1).output
    assert "no lifecycle deletion" in unknown


def test_preview_lists_every_branch_with_its_fate(cli, lakefs, clock, repo):
    policies(lakefs, repo, {"policies": [{"id": "idle", "patterns": ["p-*"], "max_idle_age": "7d"}]})
    born(lakefs, clock, repo, "p-old", T0)
    born(lakefs, clock, repo, "p-new", T0 + 5 * DAY)
    create_branch(lakefs, repo, "other")
    clock.record_created(repo, "other", T0)
    out = cli("branch-lifecycle", "preview", f"lakefs://{repo}", "--json", "--now", "2026-01-09T00:00:00Z").output
    rows = {b["branch_id"]: b for b in json.loads(out)["branches"]}
    assert (rows["p-old"]["action"], rows["p-old"]["policy_id"], rows["p-old"]["idle_seconds"]) == \
        ("delete", "idle", 8 * 86400)
    assert (rows["p-new"]["action"], rows["p-new"]["delete_at"]) == ("keep", "2026-01-13T00:00:00Z")
    assert (rows["other"]["reason"], rows["other"]["delete_at"]) == ("no-matching-policy", None)
    assert rows["main"]["reason"] == "default-branch"
    table = cli("branch-lifecycle", "preview", f"lakefs://{repo}", "--now", "2026-01-09T00:00:00Z").output
    assert "p-old" in table and "now" in table


def test_warning_window_posts_once_and_sets_the_gauge(lakefs, clock, repo):
    received: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        policies(lakefs, repo, {"policies": [{"id": "idle", "patterns": ["s-*"], "max_idle_age": "7d"}]})
        born(lakefs, clock, repo, "s-soon", T0)
        born(lakefs, clock, repo, "s-later", T0 + 5 * DAY)
        options = LifecycleOptions(warn_before=timedelta(days=1),
                                   notify_url=f"http://127.0.0.1:{server.server_port}/hook")
        registry = CollectorRegistry()
        metrics = Metrics(registry)
        now = T0 + 6 * DAY + timedelta(hours=12)
        run_repository(lakefs, clock, repo, now=now, options=options, metrics=metrics)
        run_repository(lakefs, clock, repo, now=now + timedelta(hours=1), options=options, metrics=metrics)
        assert len(received) == 1
        assert [b["branch_id"] for b in received[0]["branches"]] == ["s-soon"]
        assert registry.get_sample_value("lakefs_janitor_branches_pending_deletion", {"repository": repo}) == 1
        assert branches(lakefs, repo) == {"main", "s-soon", "s-later"}
    finally:
        server.shutdown()


def test_scheduled_run_on_the_celery_worker(env, lakefs, clock, repo, celery_worker, monkeypatch):
    policies(lakefs, repo, {"policies": [{"id": "p", "patterns": ["cel-*"], "max_age": "1d"}]})
    born(lakefs, clock, repo, "cel-1", datetime.now(UTC) - 3 * DAY)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    app = create_celery(load_settings())
    a = app.send_task("workers.branch_lifecycle.tasks.run_repository", args=(repo,))
    b = app.send_task("workers.branch_lifecycle.tasks.run_repository", args=(repo,))
    results = [a.get(timeout=60), b.get(timeout=60)]
    deleted = [o for r in results for o in r["outcomes"] if o["result"] == "deleted"]
    assert [o["branch_id"] for o in deleted] == ["cel-1"]
    eventually(lambda: "cel-1" not in branches(lakefs, repo))
    beat = app.send_task("workers.branch_lifecycle.tasks.run_all").get(timeout=120)
    ours = [r for r in beat if r["repository_id"] == repo]
    assert ours == [{"repository_id": repo, "dry_run": False, "locked_out": False, "outcomes": [],
                     "skipped": {"default-branch": 1}}]


def test_a_crashed_runs_lock_expires(lakefs, clock, repo):
    policies(lakefs, repo, {"policies": [{"id": "p", "patterns": ["k-*"], "max_age": "1d"}]})
    born(lakefs, clock, repo, "k-1")
    crashed = clock.redis.lock(f"{clock.prefix}:lock:lifecycle:{repo}", timeout=1)
    assert crashed.acquire(blocking=False)  # a run that died without releasing
    options = LifecycleOptions(lock_seconds=60)
    assert run_repository(lakefs, clock, repo, now=T0 + 5 * DAY, options=options).locked_out
    assert "k-1" in branches(lakefs, repo)
    eventually(lambda: not clock.redis.exists(f"{clock.prefix}:lock:lifecycle:{repo}"), timeout=5)
    report = run_repository(lakefs, clock, repo, now=T0 + 5 * DAY, options=options)
    assert [(o.branch_id, o.result) for o in report.outcomes] == [("k-1", "deleted")]


def test_staged_upload_between_evaluation_and_delete_survives(lakefs, clock, repo):
    policies(lakefs, repo, {"policies": [{"id": "p", "patterns": ["st-*"], "max_idle_age": "1d"}]})
    born(lakefs, clock, repo, "st-uploaded", datetime.now(UTC) - 5 * DAY)
    born(lakefs, clock, repo, "st-quiet", datetime.now(UTC) - 5 * DAY)
    p = plan(lakefs, clock, repo, now=datetime.now(UTC))
    upload(lakefs, repo, "st-uploaded", "fresh-uncommitted.txt")  # no hook fires for this
    report = execute(lakefs, clock, p)
    assert {o.branch_id: o.result for o in report.outcomes} == {"st-uploaded": "written-since", "st-quiet": "deleted"}
    assert clock.get(repo, "st-uploaded").last_write_at > datetime.now(UTC) - timedelta(minutes=1)


def test_restored_branch_survives_the_next_run(cli, lakefs, clock, repo):
    policies(lakefs, repo, {"policies": [{"id": "p", "patterns": ["rr-*"], "max_age": "1d"}]})
    born(lakefs, clock, repo, "rr-1", datetime.now(UTC) - 5 * DAY)
    run_repository(lakefs, clock, repo, now=datetime.now(UTC), options=OPTIONS)
    cli("branch-lifecycle", "restore", f"lakefs://{repo}/rr-1")
    report = run_repository(lakefs, clock, repo, now=datetime.now(UTC), options=OPTIONS)
    assert report.outcomes == [] and "rr-1" in branches(lakefs, repo)
    assert clock.get(repo, "rr-1").created_src == "restored"


def test_lakefs_down_mid_run_deletes_nothing_and_says_so(lakefs, clock, repo):
    from workers.shared.lakefs.client import make_lakefs_for  # noqa: PLC0415

    policies(lakefs, repo, {"policies": [{"id": "p", "patterns": ["dn-*"], "max_age": "1d"}]})
    for i in range(3):
        born(lakefs, clock, repo, f"dn-{i}")
    p = plan(lakefs, clock, repo, now=T0 + 5 * DAY)
    dead = make_lakefs_for("http://127.0.0.1:9", "AKIA", "secret", timeout=2)
    report = execute(dead, clock, p)
    assert [o.result for o in report.outcomes] == ["unavailable", "not-attempted", "not-attempted"]
    assert report.aborted and "unavailable" in report.aborted and not report.succeeded
    assert branches(lakefs, repo) == {"main", "dn-0", "dn-1", "dn-2"}


def test_redis_down_mid_run_deletes_nothing(lakefs, clock, repo):
    import redis as redis_lib  # noqa: PLC0415

    from workers.idle_clock.store import ClockStore  # noqa: PLC0415

    policies(lakefs, repo, {"policies": [{"id": "p", "patterns": ["rd-*"], "max_age": "1d"}]})
    born(lakefs, clock, repo, "rd-1")
    p = plan(lakefs, clock, repo, now=T0 + 5 * DAY)
    gone = ClockStore(redis_lib.Redis(port=9, socket_connect_timeout=1), clock.prefix)
    with pytest.raises(redis_lib.ConnectionError):
        execute(lakefs, gone, p)
    assert "rd-1" in branches(lakefs, repo)


def test_a_run_that_lost_its_lock_stops(lakefs, clock, repo):
    policies(lakefs, repo, {"policies": [{"id": "p", "patterns": ["ll-*"], "max_age": "1d"}]})
    born(lakefs, clock, repo, "ll-1")
    report = execute(lakefs, clock, plan(lakefs, clock, repo, now=T0 + 5 * DAY), still_ours=lambda: False)
    assert [o.result for o in report.outcomes] == ["not-attempted"] and "lost its lock" in report.aborted
    assert "ll-1" in branches(lakefs, repo)


def test_corrupt_stored_policies_are_a_clear_error(cli, lakefs, repo, receiver):
    import lakefs_sdk  # noqa: PLC0415
    import requests  # noqa: PLC0415

    from tests.services import ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY  # noqa: PLC0415
    from workers.branch_lifecycle.store import METADATA_KEY  # noqa: PLC0415

    lakefs.call("meta", lakefs.internal.set_repository_metadata, repo,
                lakefs_sdk.RepositoryMetadataSet(metadata={METADATA_KEY: "{not json"}))
    out = cli("branch-lifecycle", "preview", f"lakefs://{repo}", expect_exit=1).output
    assert "are unusable" in out and "Traceback" not in out
    r = requests.get(f"{receiver.url}/api/v1/repositories/{repo}/settings/branch_lifecycle/policies",
                     auth=(ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY), timeout=10)
    assert r.status_code == 409 and "unusable" in r.json()["error"]
    cli("branch-lifecycle", "clear", f"lakefs://{repo}")
    assert json.loads(cli("branch-lifecycle", "get", f"lakefs://{repo}").output) == {"policies": []}
