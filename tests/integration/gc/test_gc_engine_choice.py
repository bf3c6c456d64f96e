"""How a run is set up on a real lakeFS: `--engine auto` sizes the repository by the ranges its branch HEADs reach,
the local blockstore's folder is learnt from lakeFS when not configured, and reading committed metadata through
lakeFS's API gives the same plan as reading it from storage."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from spark_jobs.core.cleaning import parse_cleaning_policies
from tests.fakes import MemoryRuns
from tests.integration.conftest import commit, create_branch, upload
from tests.integration.gc.test_gc_inprocess import old_commit, read, rules
from tests.services import ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY
from workers.gc.cleaning_store import set_cleaning
from workers.gc.run import mark
from workers.gc.runner import GCRequest, choose_engine, execute, open_repository_namespace
from workers.settings import GCSettings, LakeFSConnection, SparkSettings


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


def test_auto_takes_spark_only_above_the_range_threshold(lakefs, repo):
    history(lakefs, repo)
    run = GCRequest(repo, "run", engine="auto")
    small = GCSettings(auto_spark_above_ranges=2)
    big = GCSettings(auto_spark_above_ranges=1)
    assert choose_engine(lakefs, small, run, spark_ready=True) == (
        "inprocess", "2 ranges at the branch HEADs (<= 2)")
    assert choose_engine(lakefs, big, run, spark_ready=True) == ("spark", "2 ranges at the branch HEADs (> 1)")
    assert choose_engine(lakefs, big, run, spark_ready=False)[0] == "inprocess"
    assert choose_engine(lakefs, big, GCRequest(repo, "sweep", mark_id="x", engine="auto"),
                         spark_ready=True)[0] == "inprocess"
    assert choose_engine(lakefs, big, GCRequest(repo, engine="inprocess"), spark_ready=True) == (
        "inprocess", "asked for")


def test_an_auto_run_records_its_choice_and_collects(lakefs, repo, lakefs_server):
    history(lakefs, repo)
    runs = MemoryRuns()
    connection = LakeFSConnection(endpoint_url=lakefs_server.endpoint, access_key_id=ADMIN_ACCESS_KEY,
                                  secret_access_key=ADMIN_SECRET_KEY)
    summary = execute(lakefs, GCSettings(min_age="0s"), GCRequest(repo, "run", engine="auto"), runs=runs,
                      spark=SparkSettings(), connection=connection)
    assert summary.success and summary.swept == 1  # a.txt's v1, outside the 7-day retention
    (entry,) = runs.history(repo)
    assert entry["engine"] == "inprocess" and "ranges at the branch HEADs" in entry["engine_reason"]
    assert read(lakefs, repo, "main", "a.txt") == b"v3" and read(lakefs, repo, "feature", "b.txt") == b"f"


def test_the_local_blockstore_folder_is_learnt_from_lakefs(lakefs, repo, local_root):
    history(lakefs, repo)
    ns, found = open_repository_namespace(lakefs, GCSettings(), repo)
    assert found == local_root
    configured, given = open_repository_namespace(lakefs, GCSettings(local_blockstore_path=local_root), repo)
    assert given == local_root and configured.root == ns.root


def test_metadata_through_lakefs_gives_the_same_plan_as_from_storage(lakefs, repo, namespace, local_root):
    history(lakefs, repo)
    now = datetime.now(UTC) + timedelta(seconds=1)
    plans = [mark(lakefs, namespace, repo, now=now, min_age=timedelta(0), local_root=local_root,
                  metadata_source=source, dry_run=True) for source in ("storage", "lakefs")]
    assert [o.key for o in plans[0].deleted] == [o.key for o in plans[1].deleted]
    assert len(plans[0].deleted) == 1 and plans[0].ranges == plans[1].ranges >= 2


def test_auto_sends_a_repository_with_cleaning_policies_to_spark_too(lakefs, repo):
    # both engines apply the policies (tests/spark/test_gc_engines.py): size alone decides
    history(lakefs, repo)
    set_cleaning(lakefs, repo, parse_cleaning_policies({"policies": [{"patterns": ["main"], "keep_commits": 2}]}))
    assert choose_engine(lakefs, GCSettings(auto_spark_above_ranges=1), GCRequest(repo, engine="auto"),
                         spark_ready=True)[0] == "spark"
