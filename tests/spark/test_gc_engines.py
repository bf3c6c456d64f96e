"""Both GC engines on the same real lakeFS repository: the in-process engine (threads), Spark local[2] and a
real standalone cluster (master + one worker) write the same plan; a sweep on the cluster then deletes exactly
that plan, and everything the branches reach still reads back."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import lakefs_sdk
import pytest

from spark_jobs.engine import report
from spark_jobs.engine.engine import run
from spark_jobs.engine.lakefs_api import LakeFSApiConfig
from spark_jobs.engine.parallel import ThreadRunner
from spark_jobs.engine.plan import plan_fingerprint
from spark_jobs.engine.storage import Namespace, StorageConfig
from tests.services import ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY, LakeFSServer
from tests.spark.history import build_history
from workers.gc.run import mark, sweep
from workers.gc.storage import open_namespace
from workers.gc.submit import run_gc


def _plan(result: dict) -> tuple[dict, list[str]]:
    ns = Namespace(StorageConfig(result["storage_namespace"], result["local_root"]))
    return report.read_summary(ns, result["run_id"]), report.read_deleted(ns, result["run_id"])


def _head_objects(lakefs, repository_id: str) -> dict[tuple[str, str], bytes]:
    out = {}
    for branch in lakefs.branches.list_branches(repository_id, show_hidden=True).results:
        for obj in lakefs.objects.list_objects(repository_id, branch.id, amount=1000).results:
            out[(branch.id, obj.path)] = lakefs.objects.get_object(repository_id, branch.id, obj.path)
    return out


@pytest.fixture
def history(lakefs, lakefs_server: LakeFSServer):
    name = f"sg-{uuid.uuid4().hex[:10]}"
    build_history(lakefs, repository_id=name, storage_namespace=f"local://{name}", now=datetime.now(UTC))
    yield name
    lakefs.repositories.delete_repository(name, force=True)


def test_engines_write_identical_plans_and_the_cluster_sweeps_it(history, lakefs, lakefs_server, lakefs_conn,
                                                                  local_spark, cluster_spark, spark_cluster,
                                                                  submit_env):
    now = datetime.now(UTC) + timedelta(seconds=1)  # every object of the history is older than the cutoff
    api = LakeFSApiConfig(f"{lakefs_server.endpoint}/api/v1", ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY)
    inprocess = run(api_config=api, repository_id=history, mode="mark", runner=ThreadRunner(4), now=now,
                    min_age=timedelta(0))
    # The engine `gc run --engine inprocess` and the Celery task use (workers/gc/run.py on spark_jobs.core).
    ns = open_namespace(f"local://{history}", local_root=inprocess["local_root"])
    marked = mark(lakefs, ns, history, now=now, min_age=timedelta(0), local_root=inprocess["local_root"])
    workers_plan = (marked.summary.as_dict(), [o.key for o in marked.deleted])
    local = run_gc(spark=local_spark, lakefs=lakefs_conn, repository_id=history, mode="mark", now=now,
                   min_age=timedelta(0), env=submit_env)
    master, worker = spark_cluster
    cluster = run_gc(spark=cluster_spark, lakefs=lakefs_conn, repository_id=history, mode="mark", now=now,
                     min_age=timedelta(0), env=submit_env)

    plans = {name: _plan(result) for name, result in
             (("inprocess", inprocess), ("spark-local", local), ("spark-cluster", cluster))}
    fingerprints = {name: plan_fingerprint(*plan) for name, plan in plans.items()}
    assert fingerprints["spark-local"] == fingerprints["inprocess"]
    assert plan_fingerprint(*workers_plan) == fingerprints["inprocess"]
    assert fingerprints["spark-cluster"] == fingerprints["inprocess"]
    summary, deleted = plans["inprocess"]
    assert summary["engine"] == "inprocess" and plans["spark-cluster"][0]["engine"] == "spark"
    # overwritten versions of main's objects and the deleted branch's old scratch version (default 7 days)
    assert summary["num_deleted_objects"] == len(deleted) >= 5
    assert cluster["master"] == master.url
    assert (worker.work_dir / cluster["app_id"]).is_dir()  # the executor really ran on the worker

    before = _head_objects(lakefs, history)
    ns_root = Path(cluster["local_root"]) / history
    assert all((ns_root / a).exists() for a in deleted)
    swept = run_gc(spark=cluster_spark, lakefs=lakefs_conn, repository_id=history, mode="sweep",
                   mark_id=cluster["run_id"], now=now, env=submit_env)
    assert swept["stored_sweep"]["deleted"] == len(deleted)
    assert not any((ns_root / a).exists() for a in deleted)
    assert _head_objects(lakefs, history) == before  # every branch (hidden too) reads back byte for byte
    # Plans are interchangeable: the in-process sweep executes the plan Spark local marked (already collected
    # objects count as deleted) and takes nothing more.
    again = sweep(lakefs, ns, history, run_id=local["run_id"], local_root=inprocess["local_root"])
    assert again.success and again.swept == len(deleted)
    assert _head_objects(lakefs, history) == before
    # The tag is not protected (as in lakeFS): its overwritten version was collected and reads as 410 Gone.
    with pytest.raises(lakefs_sdk.ApiException) as gone:
        lakefs.objects.get_object(history, "v1", "tables/a/part-0")
    assert gone.value.status == 410


def _key(lakefs, repo: str, ref: str, path: str) -> str:
    address = lakefs.objects.stat_object(repo, ref, path).physical_address
    return address.split(f"/{repo}/", 1)[1] if "://" in address else address


def test_engines_agree_under_cleaning_policies(history, lakefs, lakefs_server, lakefs_conn, local_spark, submit_env):
    """Cleaning policies through every engine: a savepoint, keep_versions, and an override of lakeFS's GC rules
    (the one way a clean deletes what lakeFS would keep) give the same plan in process, on the runner engine's
    threads and on Spark local, and each policy shows in it."""
    from spark_jobs.core.cleaning import parse_cleaning_policies  # noqa: PLC0415
    from workers.gc.cleaning_store import set_cleaning  # noqa: PLC0415

    now = datetime.now(UTC) + timedelta(seconds=1)
    api = LakeFSApiConfig(f"{lakefs_server.endpoint}/api/v1", ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY)
    before = run(api_config=api, repository_id=history, mode="mark", runner=ThreadRunner(4), now=now,
                 min_age=timedelta(0))
    set_cleaning(lakefs, history, parse_cleaning_policies({"policies": [
        {"id": "releases", "patterns": ["none"], "savepoints": ["v*"]},
        {"id": "versions", "patterns": ["main"], "keep_versions": 3},
        {"id": "short-feature", "patterns": ["feature"], "keep_for": "1d", "override_gc_rules": True},
    ]}))
    threads = run(api_config=api, repository_id=history, mode="mark", runner=ThreadRunner(4), now=now,
                  min_age=timedelta(0))
    local = run_gc(spark=local_spark, lakefs=lakefs_conn, repository_id=history, mode="mark", now=now,
                   min_age=timedelta(0), env=submit_env)
    ns = open_namespace(f"local://{history}", local_root=threads["local_root"])
    marked = mark(lakefs, ns, history, now=now, min_age=timedelta(0), local_root=threads["local_root"])
    plans = {"threads": plan_fingerprint(*_plan(threads)), "spark-local": plan_fingerprint(*_plan(local)),
             "workers": plan_fingerprint(marked.summary.as_dict(), [o.key for o in marked.deleted])}
    assert plans["spark-local"] == plans["threads"] == plans["workers"]
    assert plans["threads"]["policies"] == ["gc rules", "releases", "versions", "short-feature"]

    deleted, deleted_before = set(plans["threads"]["deleted"]), set(_plan(before)[1])
    assert _key(lakefs, history, "v1", "tables/a/part-0") in deleted_before - deleted  # the savepoint
    work = next(c.id for c in lakefs.refs.log_commits(history, "feature").results if c.message == "feature work")
    # lakeFS's rule keeps feature 30 days; the override keeps one day of it, so the version "feature work" wrote
    # (overwritten on feature 3 days ago, never merged) goes
    assert _key(lakefs, history, work, "tables/b/part-0") in deleted - deleted_before
    feature_line = {c.id for c in lakefs.refs.log_commits(history, "feature", first_parent=True, amount=100).results}
    dropped = marked.lakefs_retained - marked.retained  # only what lakeFS kept for feature's sake
    assert work in dropped and dropped <= feature_line


def test_spark_run_without_gc_rules_fails_clearly_and_deletes_nothing(lakefs, lakefs_conn, local_spark, submit_env):
    from spark_jobs.engine.plan import GCError  # noqa: PLC0415

    name = f"sg-{uuid.uuid4().hex[:10]}"
    lakefs.repositories.create_repository(lakefs_sdk.RepositoryCreation(
        name=name, storage_namespace=f"local://{name}", default_branch="main"))
    try:
        with pytest.raises(GCError, match=f"repository {name} has no GC rules") as caught:
            run_gc(spark=local_spark, lakefs=lakefs_conn, repository_id=name, mode="full", env=submit_env)
        assert caught.value.reason == "no-rules"
    finally:
        lakefs.repositories.delete_repository(name, force=True)


def test_s3_blockstore_both_engines_agree_and_spark_sweeps(submit_env, local_spark):
    """lakeFS on S3 (moto): executors list and delete through s3fs with the storage options they are given; the
    metadata is read from the bucket by one engine and through lakeFS's endpoint by the other."""
    from tests.services import MotoS3Server  # noqa: PLC0415
    from workers.lakefs.client import make_lakefs_for  # noqa: PLC0415
    from workers.settings import LakeFSConnection  # noqa: PLC0415

    s3 = MotoS3Server().start()
    server = None
    try:
        s3.client().create_bucket(Bucket="gc-spark")
        server = LakeFSServer(s3=s3).start()
        lakefs = make_lakefs_for(server.endpoint, ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY)
        build_history(lakefs, repository_id="s3hist", storage_namespace="s3://gc-spark/ns", now=datetime.now(UTC))
        now = datetime.now(UTC) + timedelta(seconds=1)
        options = {"key": s3.access_key, "secret": s3.secret_key,
                   "client_kwargs": {"endpoint_url": s3.endpoint, "region_name": "us-east-1"}}
        import json  # noqa: PLC0415

        api = LakeFSApiConfig(f"{server.endpoint}/api/v1", ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY)
        inprocess = run(api_config=api, repository_id="s3hist", mode="mark", runner=ThreadRunner(4), now=now,
                        min_age=timedelta(0), storage_options_json=json.dumps(options), metadata_from="lakefs")
        conn = LakeFSConnection(endpoint_url=server.endpoint, access_key_id=ADMIN_ACCESS_KEY,
                                secret_access_key=ADMIN_SECRET_KEY)
        spark = run_gc(spark=local_spark, lakefs=conn, repository_id="s3hist", mode="full", now=now,
                       min_age=timedelta(0), storage_options=options, env=submit_env)
        ns = Namespace(StorageConfig("s3://gc-spark/ns", None, json.dumps(options)))
        plans = [plan_fingerprint(report.read_summary(ns, r["run_id"]), report.read_deleted(ns, r["run_id"]))
                 for r in (inprocess, spark)]
        assert plans[0] == plans[1] and len(plans[0]["deleted"]) >= 5
        assert spark["stored_sweep"]["deleted"] == len(plans[0]["deleted"])
        assert spark["stored_sweep"]["delete_requests"] == 1  # one DeleteObjects for the whole (small) plan
        left = {o["Key"] for o in s3.client().list_objects_v2(Bucket="gc-spark", Prefix="ns/data/")["Contents"]}
        assert not {f"ns/{a}" for a in plans[0]["deleted"]} & left
        lakefs.close()
    finally:
        if server:
            server.cleanup()
        s3.cleanup()
