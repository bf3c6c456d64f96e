"""The reconciler catches what no hook reports: staged writes, resets, lost webhooks; and runs on a real worker."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import lakefs_sdk
import requests

from tests.integration.conftest import commit, create_branch, upload
from tests.services import free_port
from workers.celery.app import create_celery
from workers.idle_clock import hooks_install
from workers.idle_clock.reconcile import reconcile_repository
from workers.shared.settings import load_settings


def run(lakefs, clock, repo, now=None):
    return reconcile_repository(lakefs, clock, repo, now=now or datetime.now(UTC))


def test_first_look_is_not_a_write(lakefs, clock, repo):
    create_branch(lakefs, repo, "quiet")
    report = run(lakefs, clock, repo)
    assert report.writes == []
    assert clock.get(repo, "quiet").first_seen_at is not None
    assert clock.get(repo, "quiet").last_write_at is None


def test_staged_upload_without_commit_is_a_write_at_its_mtime(lakefs, clock, repo):
    create_branch(lakefs, repo, "staging")
    run(lakefs, clock, repo)
    time.sleep(1.1)
    upload(lakefs, repo, "staging", "new.txt", b"hello")
    mtime = lakefs.call("stat", lakefs.objects.stat_object, repo, "staging", "new.txt").mtime
    report = run(lakefs, clock, repo)
    assert [(w.branch_id, w.kind) for w in report.writes] == [("staging", "staged")]
    c = clock.get(repo, "staging")
    assert c.last_write_at == datetime.fromtimestamp(mtime, UTC)
    assert c.last_write_src == "reconciler"
    assert run(lakefs, clock, repo).writes == []  # nothing new: no write


def test_same_size_overwrite_is_detected(lakefs, clock, repo):
    create_branch(lakefs, repo, "overwrite")
    upload(lakefs, repo, "overwrite", "f.txt", b"aaaa")
    run(lakefs, clock, repo)
    first = clock.get(repo, "overwrite").last_activity
    time.sleep(1.1)
    upload(lakefs, repo, "overwrite", "f.txt", b"bbbb")
    assert [w.kind for w in run(lakefs, clock, repo).writes] == ["staged"]
    assert clock.get(repo, "overwrite").last_activity > (first or datetime.min.replace(tzinfo=UTC))


def test_hard_reset_without_commit_is_a_write_now(lakefs, clock, repo):
    create_branch(lakefs, repo, "resettable")
    upload(lakefs, repo, "resettable", "a.txt")
    first = commit(lakefs, repo, "resettable", "one")
    upload(lakefs, repo, "resettable", "b.txt")
    commit(lakefs, repo, "resettable", "two")
    run(lakefs, clock, repo)
    before = clock.get(repo, "resettable")
    now = datetime.now(UTC) + timedelta(minutes=5)
    lakefs.call("reset", lakefs.experimental.hard_reset_branch, repo, "resettable", first.id)
    report = run(lakefs, clock, repo, now)
    assert [(w.kind, w.at) for w in report.writes] == [("reset", now)]
    after = clock.get(repo, "resettable")
    assert after.last_write_at == now.replace(microsecond=now.microsecond // 1000 * 1000) and after.head == first.id
    assert before.head != after.head


def test_lost_webhook_is_repaired_with_the_time_of_lakefs_action_run(lakefs, clock, repo):
    # The hooks point at a receiver that is down: lakeFS still records the run of each hook, with its time.
    dead = f"http://127.0.0.1:{free_port()}/hooks"
    assert hooks_install.install(lakefs, repo, hooks_install.action_file(dead)).changed
    create_branch(lakefs, repo, "lost")
    run(lakefs, clock, repo)
    time.sleep(1.1)
    upload(lakefs, repo, "lost", "x.txt")
    c = commit(lakefs, repo, "lost", "no hook reached us")
    lakefs.call("commit", lakefs.commits.commit, repo, "main", lakefs_sdk.CommitCreation(message="main moves",
                                                                                          allow_empty=True))
    report = run(lakefs, clock, repo, datetime.now(UTC) + timedelta(hours=1))
    # lakeFS's run time of the post-commit hook: the write's own time, not the (later) observation time
    writes = {w.branch_id: w for w in report.writes}
    assert writes["lost"].kind == "commit"
    assert abs(writes["lost"].at.timestamp() - c.creation_date) <= 2
    assert clock.get(repo, "lost").head == c.id


def test_lost_webhook_without_action_run_is_dated_at_observation(lakefs, clock, repo):
    create_branch(lakefs, repo, "lost")
    run(lakefs, clock, repo)
    upload(lakefs, repo, "lost", "x.txt")
    commit(lakefs, repo, "lost", "no hook configured")
    now = datetime.now(UTC) + timedelta(hours=1)
    report = run(lakefs, clock, repo, now)
    assert [(w.kind, w.at) for w in report.writes] == [("reset", now)]


def test_deleted_branch_is_forgotten_after_a_full_pass(lakefs, clock, repo):
    create_branch(lakefs, repo, "doomed")
    run(lakefs, clock, repo)
    lakefs.call("delete", lakefs.branches.delete_branch, repo, "doomed")
    assert run(lakefs, clock, repo).forgotten == ["doomed"]
    assert "doomed" not in clock.known_branches(repo)


def test_a_branch_recorded_while_a_pass_runs_is_not_forgotten(lakefs, clock, repo, monkeypatch):
    """A pass forgets the branches it knew before listing and did not list. One created once the listing was taken
    and recorded with a creation time before the pass began (as clocks imported from elsewhere are) is news the
    listing could not see: it keeps its creation time (forgotten, it would never be deleted by a policy)."""
    create_branch(lakefs, repo, "doomed")
    run(lakefs, clock, repo)
    lakefs.call("delete", lakefs.branches.delete_branch, repo, "doomed")
    listed = lakefs.branch_heads
    born = datetime.now(UTC) - timedelta(days=10)

    def listing_then_a_new_branch(repository_id, **kwargs):
        yield from listed(repository_id, **kwargs)
        create_branch(lakefs, repo, "late")  # after the listing, before the pass ends
        clock.record_created(repo, "late", born)

    monkeypatch.setattr(lakefs, "branch_heads", listing_then_a_new_branch)
    report = run(lakefs, clock, repo)
    assert report.forgotten == ["doomed"]
    assert abs((clock.get(repo, "late").created_at - born).total_seconds()) < 1
    monkeypatch.undo()
    assert run(lakefs, clock, repo).forgotten == []  # the next pass lists it
    assert clock.activity_many(repo, ["late"])["late"].created_at is not None


def test_bounded_runs_resume_where_they_stopped(lakefs, clock, repo):
    for name in ("b1", "b2", "b3", "b4"):
        create_branch(lakefs, repo, name)
    first = reconcile_repository(lakefs, clock, repo, now=datetime.now(UTC), max_branches=3)
    second = reconcile_repository(lakefs, clock, repo, now=datetime.now(UTC), max_branches=3)
    assert (first.branches_seen, first.complete) == (3, False)
    assert (second.branches_seen, second.complete) == (2, True)  # b4 and main: every branch seen once
    assert clock.known_branches(repo) == {"main", "b1", "b2", "b3", "b4"}


def test_reconcile_cli_and_celery_worker(cli, env, lakefs, clock, repo, celery_worker, monkeypatch):
    create_branch(lakefs, repo, "via-worker")
    out = cli("reconcile", f"lakefs://{repo}").output
    assert "2 branches examined, 0 writes detected" in out
    time.sleep(1.1)
    upload(lakefs, repo, "via-worker", "w.txt")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    app = create_celery(load_settings())
    result = app.send_task("workers.idle_clock.tasks.reconcile_repository", args=(repo,)).get(timeout=60)
    assert result == {"repository_id": repo, "branches_seen": 2, "writes": 1, "complete": True, "locked_out": False}
    assert clock.get(repo, "via-worker").last_write_src == "reconciler"
    metrics = requests.get(celery_worker.metrics_url, timeout=5).text
    assert f'lakefs_janitor_reconcile_writes_total{{kind="staged",repository="{repo}"}} 1.0' in metrics


def test_bad_uri_is_a_clear_cli_error(cli):
    out = cli("reconcile", "s3://bucket", expect_exit=2).output
    assert "not a lakeFS URI" in out
    out = cli("branches", "lakefs://NO", expect_exit=2).output
    assert "not a valid repository id" in out


def test_unreachable_lakefs_is_a_clear_cli_error(cli, env, monkeypatch):
    from click.testing import CliRunner  # noqa: PLC0415

    from workers.cli import main  # noqa: PLC0415

    bad = {**env, "LAKECTL_SERVER_ENDPOINT_URL": "http://127.0.0.1:9"}
    result = CliRunner().invoke(main, ["branches", "lakefs://some-repo"], env=bad)
    assert result.exit_code == 1 and "unreachable" in result.output and "Traceback" not in result.output


def test_reset_to_a_newer_existing_commit_is_dated_now_not_by_that_commit(lakefs, clock, repo):
    create_branch(lakefs, repo, "old-feature")
    upload(lakefs, repo, "old-feature", "f.txt")
    commit(lakefs, repo, "old-feature", "a month ago", date=int(time.time()) - 30 * 86400)
    upload(lakefs, repo, "main", "m.txt")
    recent = commit(lakefs, repo, "main", "ten days ago", date=int(time.time()) - 10 * 86400)
    run(lakefs, clock, repo)
    now = datetime.now(UTC) + timedelta(minutes=1)
    lakefs.call("reset", lakefs.experimental.hard_reset_branch, repo, "old-feature", recent.id)
    report = run(lakefs, clock, repo, now)
    # dating it ten days back would make a branch written just now look idle
    assert [(w.branch_id, w.kind, w.at) for w in report.writes] == [("old-feature", "reset", now)]
