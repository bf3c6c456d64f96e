"""The one GC engine on each runner, on the same real lakeFS repository: threads in this process (directly, and as
the CLI and the Celery task start it), Spark local[2] and a real standalone cluster (master + one worker) write
the same plan and report the same progress; a sweep on the cluster then deletes exactly that plan, and everything
the branches reach still reads back."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import lakefs_sdk
import pytest
import redis

from spark_jobs.core.report import Summary, plan_fingerprint
from spark_jobs.engine.request import RunRequest
from spark_jobs.engine.run import run_marked
from spark_jobs.engine.runtime.context import GCError
from spark_jobs.engine.state import report
from spark_jobs.engine.stores import StorageConfig, open_namespace
from tests.gc_engine import Collector
from tests.services import ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY, LakeFSServer, RedisServer, VersityGW
from tests.spark.history import build_history
from workers.gc.history import GCRuns
from workers.gc.run import GCRequest, execute
from workers.gc.submit import run_gc
from workers.shared.settings import GCSettings


def _plan(summary: Summary, options_json: str | None = None) -> tuple[Summary, list[str]]:
    """A plan as stored in the namespace: its record and the keys it deletes."""
    ns = open_namespace(StorageConfig(summary.storage_namespace, summary.local_root, options_json))
    plan = report.read_plan(ns, summary.run_id, summary.repository_id)
    return plan.summary, plan.keys


def _head_objects(lakefs, repository_id: str) -> dict[tuple[str, str], bytes]:
    out = {}
    for branch in lakefs.branches.list_branches(repository_id, show_hidden=True).results:
        for obj in lakefs.objects.list_objects(repository_id, branch.id, amount=1000).results:
            out[(branch.id, obj.path)] = lakefs.objects.get_object(repository_id, branch.id, obj.path)
    return out


def _spark(request: RunRequest, **kw) -> RunRequest:
    return replace(request, runner="spark", **kw)


def _decision(summary: Summary) -> Summary:
    """A run's record as its mark wrote it (a full run's sweep adds what it did to the same record)."""
    return replace(summary, phase="mark", success=True, error=None, swept=0, spared_by_recheck=0, capped=0,
                   swept_at=None, delete_requests=0, backoffs=0, num_failed=0, failed=[], new_ranges_read=0,
                   seconds={}, freeing={}, bytes_freed=0, bytes_pending=0, pending_until=None, purged_versions=0,
                   purged_bytes=0, purge_failed=[])


def _submit_env(monkeypatch, env: dict[str, str]) -> None:
    """spark-submit's environment for runs started through workers.gc.run (which submits with ours)."""
    for key in [k for k in os.environ if k.startswith(("SPARK_", "PYSPARK_")) and k not in env]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)


@pytest.fixture
def runs(redis_server: RedisServer) -> Iterator[GCRuns]:
    """The run history and lock in a real Redis, as the CLI and the Celery task keep them."""
    client = redis.Redis.from_url(redis_server.url)
    yield GCRuns(client, "lakefs-janitor")
    client.close()


@pytest.fixture
def history(lakefs, lakefs_server: LakeFSServer):
    name = f"sg-{uuid.uuid4().hex[:10]}"
    build_history(lakefs, repository_id=name, storage_namespace=f"local://{name}", now=datetime.now(UTC))
    yield name
    lakefs.repositories.delete_repository(name, force=True)


def test_runners_write_identical_plans_and_the_cluster_sweeps_it(history, lakefs, lakefs_server, lakefs_conn,
                                                                  local_spark, cluster_spark, spark_cluster,
                                                                  submit_env, monkeypatch, runs):
    _submit_env(monkeypatch, submit_env)
    now = datetime.now(UTC) + timedelta(seconds=1)  # every object of the history is older than the cutoff
    gc = Collector(lakefs_server.endpoint)
    threads = gc.mark(history, now=now, min_age=timedelta(0))
    # As `gc plan` and the Celery task start it: in process, then on Spark local; both report their progress
    progress: dict[str, list[tuple[str, int]]] = {"threads": [], "spark": []}
    settings = GCSettings(min_age="0s", threads=4)
    workers = execute(settings, GCRequest(history, "plan", now=now, runner="threads"), connection=lakefs_conn,
                      runs=runs, progress=lambda phase, n: progress["threads"].append((phase, n)))
    local = execute(settings, GCRequest(history, "plan", now=now, runner="spark"), connection=lakefs_conn,
                    runs=runs, spark=local_spark,
                    progress=lambda phase, n: progress["spark"].append((phase, n)))
    assert [(e["mode"], e["runner"], e["success"], e["run_id"]) for e in runs.history(history)] == [
        ("plan", "spark", True, local.run_id), ("plan", "threads", True, workers.run_id)]
    master, worker = spark_cluster
    events: list[dict] = []
    request = RunRequest(history, "mark", now=now, min_age=timedelta(0))
    cluster = run_gc(spark=cluster_spark, lakefs=lakefs_conn, request=_spark(request), storage=gc.storage,
                     on_event=events.append, env=submit_env)

    plans = {"threads": _plan(threads.summary), "workers": _plan(workers), "spark-local": _plan(local),
             "spark-cluster": _plan(cluster)}
    fingerprints = {name: plan_fingerprint(*plan) for name, plan in plans.items()}
    assert fingerprints["workers"] == fingerprints["threads"]
    assert fingerprints["spark-local"] == fingerprints["threads"]
    assert fingerprints["spark-cluster"] == fingerprints["threads"]
    assert sorted(plans["threads"][1]) == sorted(o.key for o in threads.deleted)
    # the Spark job's progress reaches the caller under the same phases, with the same counts
    assert progress["spark"] == progress["threads"] and [p for p, _ in progress["threads"]] == [
        "commits", "ranges", "objects listed"]
    summary, deleted = plans["threads"]
    assert summary.runner == "threads" and cluster.runner == local.runner == "spark"
    # overwritten versions of main's objects and the deleted branch's old scratch version (default 7 days)
    assert summary.num_deleted_objects == len(deleted) >= 5
    start = next(e for e in events if e.get("event") == "progress" and e.get("phase") == "start")
    assert start["master"] == master.url
    assert (worker.work_dir / start["app_id"]).is_dir()  # the executor really ran on the worker

    before = _head_objects(lakefs, history)
    ns_root = Path(cluster.local_root) / history
    assert all((ns_root / a).exists() for a in deleted)
    swept = run_gc(spark=cluster_spark, lakefs=lakefs_conn, storage=gc.storage, env=submit_env,
                   request=_spark(request, mode="sweep", mark_id=cluster.run_id))
    assert swept.phase == "swept" and swept.swept == swept.num_deleted_objects == len(deleted)
    assert not any((ns_root / a).exists() for a in deleted)
    assert _head_objects(lakefs, history) == before  # every branch (hidden too) reads back byte for byte
    # Plans are interchangeable: the in-process sweep executes the plan Spark local marked (already collected
    # objects count as deleted) and takes nothing more.
    again = gc.sweep(history, local.run_id)
    assert again.success and again.swept == len(deleted) and again.runner == "threads"
    assert _head_objects(lakefs, history) == before
    # The tag is not protected (as in lakeFS): its overwritten version was collected and reads as 410 Gone.
    with pytest.raises(lakefs_sdk.ApiException) as gone:
        lakefs.objects.get_object(history, "v1", "tables/a/part-0")
    assert gone.value.status == 410


def _key(lakefs, repo: str, ref: str, path: str) -> str:
    address = lakefs.objects.stat_object(repo, ref, path).physical_address
    return address.split(f"/{repo}/", 1)[1] if "://" in address else address


def test_runners_agree_under_cleaning_policies(history, lakefs, lakefs_server, lakefs_conn, local_spark,
                                               submit_env):
    """Cleaning policies on every runner: a savepoint, keep_versions, and an override of lakeFS's GC rules (the
    one way a clean deletes what lakeFS would keep) give the same plan on threads and on Spark local, and each
    policy shows in it."""
    from spark_jobs.core.cleaning import parse_cleaning_policies  # noqa: PLC0415
    from workers.gc.cleaning_store import set_cleaning  # noqa: PLC0415

    now = datetime.now(UTC) + timedelta(seconds=1)
    gc = Collector(lakefs_server.endpoint)
    before = gc.mark(history, now=now, min_age=timedelta(0))
    set_cleaning(lakefs, history, parse_cleaning_policies({"policies": [
        {"id": "releases", "patterns": ["none"], "savepoints": ["v*"]},
        {"id": "versions", "patterns": ["main"], "keep_versions": 3},
        {"id": "short-feature", "patterns": ["feature"], "keep_for": "1d", "override_gc_rules": True},
    ]}))
    marked = gc.mark(history, now=now, min_age=timedelta(0))
    local = run_gc(spark=local_spark, lakefs=lakefs_conn, storage=gc.storage, env=submit_env,
                   request=RunRequest(history, "mark", now=now, min_age=timedelta(0), runner="spark"))
    plans = {"threads": plan_fingerprint(*_plan(marked.summary)), "spark-local": plan_fingerprint(*_plan(local))}
    assert plans["spark-local"] == plans["threads"]
    assert plans["threads"]["deleted"] == sorted(o.key for o in marked.deleted)
    assert plans["threads"]["policies"] == ["gc rules", "releases", "versions", "short-feature"]

    deleted, deleted_before = set(plans["threads"]["deleted"]), {o.key for o in before.deleted}
    assert _key(lakefs, history, "v1", "tables/a/part-0") in deleted_before - deleted  # the savepoint
    work = next(c.id for c in lakefs.refs.log_commits(history, "feature").results if c.message == "feature work")
    # lakeFS's rule keeps feature 30 days; the override keeps one day of it, so the version "feature work" wrote
    # (overwritten on feature 3 days ago, never merged) goes
    assert _key(lakefs, history, work, "tables/b/part-0") in deleted - deleted_before
    feature_line = {c.id for c in lakefs.refs.log_commits(history, "feature", first_parent=True, amount=100).results}
    dropped = marked.lakefs_retained - marked.retained  # only what lakeFS kept for feature's sake
    assert work in dropped and dropped <= feature_line


def test_spark_run_without_gc_rules_fails_clearly_and_deletes_nothing(lakefs, lakefs_conn, local_spark, submit_env):
    name = f"sg-{uuid.uuid4().hex[:10]}"
    lakefs.repositories.create_repository(lakefs_sdk.RepositoryCreation(
        name=name, storage_namespace=f"local://{name}", default_branch="main"))
    try:
        with pytest.raises(GCError, match=f"lakefs://{name} has no GC rules") as caught:
            run_gc(spark=local_spark, lakefs=lakefs_conn, request=RunRequest(name, "full", runner="spark"),
                   storage=StorageConfig(""), env=submit_env)
        assert caught.value.reason == "no-rules"
    finally:
        lakefs.repositories.delete_repository(name, force=True)


def test_s3_blockstore_both_runners_agree_and_spark_sweeps(submit_env, local_spark):
    """lakeFS on S3 (versitygw, a real S3 server): executors list and delete through s3fs with the storage options
    they are given; the metadata is read through lakeFS's endpoint on one runner and from the bucket on the
    other."""
    from workers.shared.lakefs.client import make_lakefs_for  # noqa: PLC0415
    from workers.shared.settings import LakeFSConnection  # noqa: PLC0415

    s3 = VersityGW(bucket="gc-spark").start()
    server = None
    try:
        server = LakeFSServer(store=s3).start()
        lakefs = make_lakefs_for(server.endpoint, ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY)
        repo = "s3hist"
        build_history(lakefs, repository_id=repo, storage_namespace=s3.namespace(repo), now=datetime.now(UTC))
        now = datetime.now(UTC) + timedelta(seconds=1)
        gc = Collector(server.endpoint, options={"s3": s3.fsspec_options()})
        threads, _ = run_marked(gc.api, gc.storage, RunRequest(repo, "mark", now=now, min_age=timedelta(0),
                                                               metadata_from="lakefs"), runner=gc.runner)
        conn = LakeFSConnection(endpoint_url=server.endpoint, access_key_id=ADMIN_ACCESS_KEY,
                                secret_access_key=ADMIN_SECRET_KEY)
        spark = run_gc(spark=local_spark, lakefs=conn, storage=gc.storage, env=submit_env,
                       request=RunRequest(repo, "full", now=now, min_age=timedelta(0), runner="spark"))
        plans = [_plan(s, gc.storage.options_json) for s in (threads, spark)]
        assert plan_fingerprint(*plans[0]) == plan_fingerprint(_decision(plans[1][0]), plans[1][1])
        deleted = plans[0][1]
        assert len(deleted) >= 5 and threads.storage_namespace == spark.storage_namespace == "s3://gc-spark/s3hist"
        assert spark.phase == "swept" and spark.swept == len(deleted) and spark.success
        assert spark.delete_requests == 1  # one DeleteObjects for the whole (small) plan
        left = {o["Key"] for o in s3.client().list_objects_v2(Bucket="gc-spark", Prefix=f"{repo}/data/")["Contents"]}
        assert left and not {f"{repo}/{a}" for a in deleted} & left
        lakefs.close()
    finally:
        if server:
            server.cleanup()
        s3.cleanup()
