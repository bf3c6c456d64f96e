"""Issue 37: the Spark runner's driver holds nothing per object. A GC run through spark-submit on a real standalone
master and worker, with spark.driver.maxResultSize at 2 MiB, on a repository whose addresses and paths alone weigh
several times that: anything per object that came back to the driver (the listing, the kept addresses, the plan)
would exceed the limit and fail the job. The run must succeed and plan exactly what the thread runner plans."""

from __future__ import annotations

import base64
import http.client
import json
import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from urllib.parse import quote, urlsplit

import lakefs_sdk
import pytest

from spark_jobs.core.slices import slice_name
from spark_jobs.engine.mark import plan_fingerprint
from spark_jobs.engine.request import RunRequest
from spark_jobs.engine.runtime.context import GCError
from spark_jobs.engine.state import report
from spark_jobs.engine.stores import StorageConfig, open_namespace
from tests.gc_engine import Collector
from tests.services import ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY
from workers.gc.submit import run_gc

pytestmark = pytest.mark.spark

OBJECTS = 40_000
MAX_RESULT = 2 * 2**20  # spark.driver.maxResultSize=2m
DAY = 86400


def _stage_all(endpoint: str, repo: str, entries: list[tuple[str, str]], connections: int = 16) -> None:
    """Stage (path, physical address) entries on main with plain keep-alive HTTP (the SDK's per-call overhead
    would make 40,000 objects take a minute)."""
    url = urlsplit(endpoint)
    auth = "Basic " + base64.b64encode(f"{ADMIN_ACCESS_KEY}:{ADMIN_SECRET_KEY}".encode()).decode()
    headers = {"Authorization": auth, "Content-Type": "application/json"}
    base = f"/api/v1/repositories/{quote(repo)}/branches/main/objects?path="

    def one_connection(k: int) -> None:
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
        try:
            for path, address in entries[k::connections]:
                body = json.dumps({"physical_address": address, "checksum": uuid.uuid4().hex, "size_bytes": 0})
                conn.request("PUT", base + quote(path, safe=""), body, headers)
                response = conn.getresponse()
                answer = response.read()
                assert response.status == 201, f"staging {path}: HTTP {response.status} {answer[:200]!r}"
        finally:
            conn.close()

    with ThreadPoolExecutor(connections) as pool:
        list(pool.map(one_connection, range(connections)))


def _files(folder: str, keys: list[str], age_seconds: float) -> None:
    """Empty files behind ``keys`` in the namespace's folder, dated ``age_seconds`` ago."""
    when = time.time() - age_seconds
    made: set[str] = set()
    for key in keys:
        path = os.path.join(folder, key)
        if (parent := os.path.dirname(path)) not in made:
            os.makedirs(parent, exist_ok=True)
            made.add(parent)
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))
        os.utime(path, (when, when))


@pytest.fixture
def big_repository(lakefs, lakefs_server):
    """OBJECTS objects with 200-character paths and 250-character addresses (in lakeFS-named slices opened 30 days
    ago), committed 10 days ago; then 100 of them overwritten 5 days ago, and 50 files written into the namespace
    and never staged. GC rules keep one day: the overwritten versions and the 50 files are the garbage."""
    repo = f"big-{uuid.uuid4().hex[:8]}"
    namespace = f"local://{repo}"
    lakefs.repositories.create_repository(lakefs_sdk.RepositoryCreation(name=repo, storage_namespace=namespace,
                                                                        default_branch="main"))
    lakefs.call("rules", lakefs.repositories.set_gc_rules, repo,
                lakefs_sdk.GarbageCollectionRules(default_retention_days=1, branches=[]))
    store = lakefs_server.store
    folder = store.fsspec_path(namespace)
    opened = datetime.now(UTC) - timedelta(days=30)
    slices = [slice_name(opened + timedelta(hours=h), uuid.uuid4().bytes) for h in range(4)]

    def key(i: int, salt: str = "") -> str:
        return f"data/{slices[i % 4]}/{salt}{i:08d}-" + "k" * 220

    paths = [f"tables/t{i % 7}/" + "p" * 170 + f"/part-{i:08d}.parquet" for i in range(OBJECTS)]
    keys = [key(i) for i in range(OBJECTS)]
    _files(folder, keys, 12 * DAY)
    _stage_all(lakefs_server.endpoint, repo, [(p, f"local://{folder}/{k}") for p, k in zip(paths, keys, strict=True)])
    lakefs.commits.commit(repo, "main", lakefs_sdk.CommitCreation(message="base",
                                                                   var_date=int(time.time() - 10 * DAY)))
    again = [key(i, "v2-") for i in range(0, OBJECTS, OBJECTS // 100)]
    _files(folder, again, 6 * DAY)
    _stage_all(lakefs_server.endpoint, repo, [(paths[i], f"local://{folder}/{k}")
                                              for i, k in zip(range(0, OBJECTS, OBJECTS // 100), again, strict=True)])
    lakefs.commits.commit(repo, "main", lakefs_sdk.CommitCreation(message="overwrite",
                                                                   var_date=int(time.time() - 5 * DAY)))
    _files(folder, [key(i, "lost-") for i in range(50)], 3 * DAY)
    # What a Spark runner that collected every object would bring to its driver, at the very least: each
    # address once (the listing) and again (what the retained commits reach); several times the limit.
    assert 2 * sum(len(k) for k in keys) > 8 * MAX_RESULT
    yield repo
    lakefs.repositories.delete_repository(repo, force=True)


class DriverResultLimit(AssertionError):
    """The run failed because its tasks' results exceeded spark.driver.maxResultSize: per-object data reached the
    driver (any other failure of the run stays a plain failure)."""


def test_spark_run_with_a_tiny_driver_result_limit_plans_what_threads_plan(big_repository, lakefs_server,
                                                                         lakefs_conn, cluster_spark, submit_env):
    now = datetime.now(UTC)
    gc = Collector(lakefs_server.endpoint)
    threads = gc.mark(big_repository, now=now, min_age=timedelta(0))
    assert len(threads.deleted) == 150  # the 100 overwritten versions and the 50 files never staged

    spark = cluster_spark.model_copy(update={"conf": {**cluster_spark.conf, "spark.driver.maxResultSize": "2m"}})
    try:
        summary = run_gc(spark=spark, lakefs=lakefs_conn, storage=gc.storage, env=submit_env,
                         request=RunRequest(big_repository, "mark", now=now, min_age=timedelta(0), runner="spark"))
    except GCError as exc:
        if "spark.driver.maxResultSize" in str(exc):
            raise DriverResultLimit(next(line for line in str(exc).splitlines() if "maxResultSize" in line)) from None
        raise

    def plan(s):
        ns = open_namespace(StorageConfig(s.storage_namespace, s.local_root))
        stored = report.read_plan(ns, s.run_id, s.repository_id)
        return plan_fingerprint(stored.summary, stored.keys)

    assert summary.success and summary.runner == "spark"
    assert plan(summary) == plan(threads.summary)
