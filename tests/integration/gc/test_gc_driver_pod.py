"""A Spark run whose driver had a pod of its own (spark.deploy_mode cluster): spark-submit's output has none of the
driver's events and its exit status says nothing of the run, so the worker takes the run's outcome from the
record the run wrote to the namespace. Here the records are real ones, written by the engine on the thread runner
into a real lakeFS's namespace."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import lakefs_sdk
import pytest

from spark_jobs.engine.request import RunRequest
from spark_jobs.engine.runtime.context import GCError
from tests.integration.conftest import commit, upload
from workers.gc.submit import JobOutcome, outcome_from_record

DAY = 86400


@pytest.fixture
def marked(lakefs, gc, repo):
    """A repository with one overwritten object outside retention, and a plan (mark) of it."""
    upload(lakefs, repo, "main", "a.txt", b"v1")
    commit(lakefs, repo, "main", "old", date=int(time.time()) - 30 * DAY)
    upload(lakefs, repo, "main", "a.txt", b"v2")
    commit(lakefs, repo, "main", "new", date=int(time.time()) - 20 * DAY)
    lakefs.call("rules", lakefs.repositories.set_gc_rules, repo,
                lakefs_sdk.GarbageCollectionRules(default_retention_days=7, branches=[]))
    return gc.mark(repo, min_age=timedelta(0))


def test_the_runs_record_is_its_outcome(marked, gc, repo, lakefs_conn):
    run_id = marked.summary.run_id
    request = RunRequest(repo, "mark", runner="spark")
    since = datetime.now(UTC)
    stored = outcome_from_record(JobOutcome(returncode=0), lakefs=lakefs_conn, request=request, run_id=run_id,
                          storage=gc.storage, submitted=since)
    assert stored.run_id == run_id and stored.success and stored.num_deleted_objects == 1

    with pytest.raises(GCError, match="ended without writing its record") as missing:
        outcome_from_record(JobOutcome(returncode=0), lakefs=lakefs_conn, request=request, run_id="9999999999-000000000000",
                     storage=gc.storage, submitted=since)
    assert missing.value.reason == "summary-missing"
    with pytest.raises(GCError, match="spark-submit exited with 1: .*Forbidden") as refused:
        outcome_from_record(JobOutcome(returncode=1, stderr_tail="KubernetesClientException: Forbidden\n"),
                     lakefs=lakefs_conn, request=request, run_id=run_id, storage=gc.storage, submitted=since)
    assert refused.value.reason == "spark"
    # a full run's record must say swept: a mark alone is a driver that stopped half-way
    with pytest.raises(GCError, match="did not succeed: its record says phase mark"):
        outcome_from_record(JobOutcome(returncode=0), lakefs=lakefs_conn, request=RunRequest(repo, "full"), run_id=run_id,
                     storage=gc.storage, submitted=since)


def test_a_sweeps_record_must_be_this_sweeps(marked, gc, repo, lakefs_conn):
    run_id = marked.summary.run_id
    request = RunRequest(repo, "sweep", mark_id=run_id, runner="spark")
    before = datetime.now(UTC) - timedelta(seconds=1)
    assert gc.sweep(repo, run_id).swept == 1
    stored = outcome_from_record(JobOutcome(returncode=0), lakefs=lakefs_conn, request=request, run_id=run_id,
                          storage=gc.storage, submitted=before)
    assert stored.phase == "swept" and stored.swept == 1
    # the same record, read for a sweep submitted later (whose driver died before writing): not this sweep's
    with pytest.raises(GCError, match="did not succeed"):
        outcome_from_record(JobOutcome(returncode=0), lakefs=lakefs_conn, request=request, run_id=run_id,
                     storage=gc.storage, submitted=datetime.now(UTC) + timedelta(minutes=5))
