"""How a run is set up on a real lakeFS: `--runner auto` sizes the repository by the ranges its branch HEADs reach
and never picks a runner that cannot reach the store, the local blockstore's folder is learnt from lakeFS when not
configured (and a wrong one is named), reading committed metadata through lakeFS's API gives the same plan as
reading it from storage, and every failure is recorded in the run history with its reason."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from spark_jobs.core.cleaning import parse_cleaning_policies
from spark_jobs.engine.request import RunRequest
from spark_jobs.engine.run import resolve_storage, run_marked
from spark_jobs.engine.runtime.lakefs_api import LakeFSApi
from tests.fakes import fresh_metrics
from tests.gc_engine import Collector
from tests.integration.conftest import commit, create_branch, upload
from tests.integration.gc.test_gc_threads import old_commit, read, rules
from tests.services import ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY
from workers.gc.cleaning_store import set_cleaning
from workers.gc.history import GCRuns
from workers.gc.run import GCError, GCRequest, api_config, choose_runner, execute
from workers.shared import redis_script
from workers.shared.settings import GCSettings, LakeFSConnection, SparkSettings


def history(lakefs, repo) -> None:
    upload(lakefs, repo, "main", "a.txt", b"v1")
    old_commit(lakefs, repo, "main", 40)
    upload(lakefs, repo, "main", "a.txt", b"v2")
    old_commit(lakefs, repo, "main", 30)  # main's HEAD as of 7 days ago: kept, v1 is not
    upload(lakefs, repo, "main", "a.txt", b"v3")
    commit(lakefs, repo, "main", "recent")
    create_branch(lakefs, repo, "feature", "main")
    upload(lakefs, repo, "feature", "b.txt", b"f")
    commit(lakefs, repo, "feature", "feature work")  # a second distinct HEAD: a second range
    rules(lakefs, repo, default=7)


@pytest.fixture
def runs(redis_client) -> GCRuns:
    """The run history and lock in the session's Redis (each test's repositories have names of their own)."""
    return GCRuns(redis_client, "lakefs-janitor")


@pytest.fixture
def connection(lakefs_server) -> LakeFSConnection:
    return LakeFSConnection(endpoint_url=lakefs_server.endpoint, access_key_id=ADMIN_ACCESS_KEY,
                            secret_access_key=ADMIN_SECRET_KEY)


def test_auto_takes_spark_only_above_the_range_threshold(lakefs, repo, connection):
    history(lakefs, repo)
    api = api_config(connection)
    run = GCRequest(repo, "run", runner="auto")
    small = GCSettings(auto_spark_above_ranges=2)
    big = GCSettings(auto_spark_above_ranges=1)
    assert choose_runner(api, small, run, spark=SparkSettings()) == (
        "threads", "2 ranges at the branch HEADs (<= 2)")
    assert choose_runner(api, big, run, spark=SparkSettings()) == ("spark", "2 ranges at the branch HEADs (> 1)")
    assert choose_runner(api, big, run, spark=None)[0] == "threads"
    assert choose_runner(api, big, GCRequest(repo, "sweep", mark_id="x", runner="auto"),
                         spark=SparkSettings())[0] == "threads"
    assert choose_runner(api, big, GCRequest(repo, runner="threads"), spark=SparkSettings()) == (
        "threads", "asked for")


def test_an_auto_run_records_its_choice_and_collects(lakefs, repo, connection, runs):
    history(lakefs, repo)
    summary = execute(GCSettings(min_age="0s"), GCRequest(repo, "run", runner="auto"), runs=runs,
                      spark=SparkSettings(), connection=connection)
    assert summary.success and summary.swept == 1  # a.txt's v1, outside the 7-day retention
    (entry,) = runs.history(repo)
    assert entry["runner"] == "threads" and "ranges at the branch HEADs" in entry["runner_reason"]
    assert entry["success"] and entry["swept"] == 1
    assert read(lakefs, repo, "main", "a.txt") == b"v3" and read(lakefs, repo, "feature", "b.txt") == b"f"


def test_the_local_blockstore_folder_is_learnt_from_lakefs(lakefs, lakefs_server, repo, local_root):
    history(lakefs, repo)
    now = datetime.now(UTC)
    learnt = Collector(lakefs_server.endpoint).mark(repo, now=now, dry_run=True)
    configured = Collector(lakefs_server.endpoint, local_root=local_root).mark(repo, now=now, dry_run=True)
    assert learnt.graph.local_root == learnt.summary.local_root == local_root
    assert configured.graph.local_root == local_root
    assert [o.key for o in learnt.deleted] == [o.key for o in configured.deleted] and len(learnt.deleted) == 1
    # a sweep, which reads no history, learns it too
    api = LakeFSApi(Collector(lakefs_server.endpoint).api)
    try:
        found = resolve_storage(api, repo, Collector(lakefs_server.endpoint).storage)
    finally:
        api.close()
    assert (found.namespace, found.local_root) == (f"local://{repo}", local_root)


def test_metadata_through_lakefs_gives_the_same_plan_as_from_storage(lakefs, gc, repo):
    history(lakefs, repo)
    now = datetime.now(UTC) + timedelta(seconds=1)
    plans = [run_marked(gc.api, gc.storage, RunRequest(repo, "dry-run", now=now, min_age=timedelta(0),
                                                       metadata_from=source), runner=gc.runner)[1]
             for source in ("storage", "lakefs")]
    assert [o.key for o in plans[0].deleted] == [o.key for o in plans[1].deleted]
    assert len(plans[0].deleted) == 1 and plans[0].ranges == plans[1].ranges and len(plans[0].ranges) >= 2
    assert plans[0].kept == plans[1].kept


def test_auto_sends_a_repository_with_cleaning_policies_to_spark_too(lakefs, repo, connection):
    # the one engine applies the policies on either runner (tests/spark/test_gc_engines.py): size alone decides
    history(lakefs, repo)
    set_cleaning(lakefs, repo, parse_cleaning_policies({"policies": [{"patterns": ["main"], "keep_commits": 2}]}))
    assert choose_runner(api_config(connection), GCSettings(auto_spark_above_ranges=1),
                         GCRequest(repo, runner="auto"), spark=SparkSettings())[0] == "spark"


@pytest.mark.parametrize(("policy", "heavy"), [
    ({"id": "versions", "patterns": ["main"], "keep_versions": 2}, True),
    ({"id": "tables", "patterns": ["main"], "keep_commits": 2, "paths": ["tables/**"]}, True),
    ({"id": "commits", "patterns": ["main"], "keep_commits": 2}, False),
])
def test_auto_weighs_cleaning_policies_that_hold_rows_per_object(lakefs, repo, connection, policy, heavy):
    # keep_versions and path scopes hold about 1.5x a plain run's bytes an object in process: a lower threshold
    history(lakefs, repo)  # two ranges at the HEADs
    set_cleaning(lakefs, repo, parse_cleaning_policies({"policies": [policy]}))
    gc = GCSettings(auto_spark_above_ranges=5, auto_spark_above_ranges_with_cleaning=1)
    runner, why = choose_runner(api_config(connection), gc, GCRequest(repo, runner="auto"), spark=SparkSettings())
    if heavy:
        assert (runner, why) == ("spark", f"2 ranges at the branch HEADs (> 1: cleaning policies {policy['id']} keep "
                                          "versions or scope paths)")
    else:
        assert (runner, why) == ("threads", "2 ranges at the branch HEADs (<= 5)")
    # the lower of the two thresholds: a plain one set below it wins
    assert choose_runner(api_config(connection), GCSettings(auto_spark_above_ranges=1),
                         GCRequest(repo, runner="auto"), spark=SparkSettings())[0] == "spark"


def test_a_missing_repository_is_a_recorded_and_counted_failure(connection, runs, redis_client):
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    redis_script.run(redis_client, [runs.commit_step(missing, "c1")])  # a commit the hooks reported
    assert runs.commits_since_run()[missing] == 1
    metrics = fresh_metrics()
    with pytest.raises(GCError, match="404") as err:
        execute(GCSettings(), GCRequest(missing), connection=connection, runs=runs, metrics=metrics)
    assert err.value.reason == "lakefs"
    (entry,) = runs.history(missing)
    assert entry["success"] is False and entry["reason"] == "lakefs"
    assert metrics.gc_failures.labels(missing, "lakefs")._value.get() == 1
    assert missing not in runs.commits_since_run()  # a run restarts the event-driven commit count


def test_a_store_the_janitor_cannot_read_is_a_clear_recorded_failure(lakefs, repo, namespace, connection, runs,
                                                                     tmp_path):
    history(lakefs, repo)
    before = {o.key for o in namespace.list_data()}
    wrong = GCSettings(min_age="0s", local_blockstore_path=str(tmp_path / "not-the-blockstore"))
    metrics = fresh_metrics()
    with pytest.raises(GCError, match="not under the configured local blockstore folder") as err:
        execute(wrong, GCRequest(repo), connection=connection, runs=runs, metrics=metrics)
    assert err.value.reason == "storage-config"
    # auto never picks a runner that cannot reach the store: without Spark it says so, with Spark it takes it
    with pytest.raises(GCError, match="no runner can reach the store") as auto:
        execute(wrong, GCRequest(repo, runner="auto"), connection=connection, runs=runs, metrics=metrics)
    assert auto.value.reason == "storage-config"
    assert choose_runner(api_config(connection), wrong, GCRequest(repo, runner="auto"),
                         spark=SparkSettings())[0] == "spark"
    assert [(e["runner"], e["reason"]) for e in runs.history(repo)] == [("auto", "storage-config"),
                                                                         ("threads", "storage-config")]
    assert metrics.gc_failures.labels(repo, "storage-config")._value.get() == 2
    assert {o.key for o in namespace.list_data()} == before
    # the right folder (or none: learnt) collects: the failed runs released the repository's lock
    assert execute(GCSettings(min_age="0s"), GCRequest(repo), connection=connection, runs=runs).swept == 1


def test_few_big_ranges_take_the_datasets_in_process(lakefs, gc, repo, monkeypatch):
    """The thread runner's full run takes the object path (the mark cache's Python objects) only while the retained
    ranges are both few and small: their entries, as the metaranges count them, decide when the ranges are few.
    The repository's few entries stand for a few ranges of 150,000 entries: above 0 entries, the datasets (the
    metaranges' counts are read, not zero); above a billion, the object path."""
    from spark_jobs.engine.runtime import parallel  # noqa: PLC0415

    history(lakefs, repo)
    now = datetime.now(UTC)
    reference = replace(gc, cache=False).mark(repo, now=now, min_age=timedelta(0), listing="full")
    assert reference.summary.ranges <= parallel.DATASETS_ABOVE_RANGES
    plans = {}
    for above in (10**9, 0):
        monkeypatch.setattr(parallel, "DATASETS_ABOVE_ENTRIES", above)
        marked = gc.mark(repo, now=now, min_age=timedelta(0), listing="full")
        plans[above] = (marked.summary.listing.get("plan"), marked.summary.cache["state"])
        assert sorted(o.key for o in marked.deleted) == sorted(o.key for o in reference.deleted), above
    assert plans[10**9][0] is None and plans[10**9][1] != "unused" and plans[0] == ("arrow", "unused"), plans
