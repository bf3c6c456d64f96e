"""Issue 37: the Spark runner's driver holds nothing per object. A GC run through spark-submit on a real standalone
master and worker, with spark.driver.maxResultSize at 2 MiB, on a repository whose addresses and paths alone weigh
several times that: anything per object that came back to the driver (the listing, the kept addresses, the plan)
would exceed the limit and fail the job. The run must succeed and plan exactly what the thread runner plans, with
cleaning policies too (path policies, keep_versions and --by-path in one run).

The same for a daily (incremental) run after a day that rewrote a few paths in every range: the ranges that died and
those that appeared are compared by executors and the kept index looked up there, only the day's change and the
keys' counts come back; each touched range's entries, brought to the driver, would weigh several times the limit."""

from __future__ import annotations

import base64
import http.client
import json
import os
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from urllib.parse import quote, urlsplit

import lakefs_sdk
import pytest

from spark_jobs.core.cleaning import METADATA_KEY
from spark_jobs.core.report import plan_fingerprint
from spark_jobs.core.slices import slice_name
from spark_jobs.engine.request import RunRequest
from spark_jobs.engine.runtime.context import GCError
from spark_jobs.engine.state import report
from spark_jobs.engine.stores import StorageConfig, open_namespace
from tests.gc_engine import Collector
from tests.services import ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY, LakeFSServer
from workers.gc.submit import run_gc
from workers.shared.lakefs.client import make_lakefs_for
from workers.shared.settings import LakeFSConnection

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


def _lake(lakefs, server, repo: str, objects: int) -> tuple[str, list[str], Callable[..., str]]:
    """A repository of ``objects`` objects with 200-character paths and 250-character addresses (in lakeFS-named
    slices opened 30 days ago, files 12 days old), committed 10 days ago; GC rules keep one day. Returns the
    namespace's folder, the paths and ``key(i, salt)``, the address of object i's version ``salt``."""
    namespace = f"local://{repo}"
    lakefs.repositories.create_repository(lakefs_sdk.RepositoryCreation(name=repo, storage_namespace=namespace,
                                                                        default_branch="main"))
    lakefs.call("rules", lakefs.repositories.set_gc_rules, repo,
                lakefs_sdk.GarbageCollectionRules(default_retention_days=1, branches=[]))
    folder = server.store.fsspec_path(namespace)
    opened = datetime.now(UTC) - timedelta(days=30)
    slices = [slice_name(opened + timedelta(hours=h), uuid.uuid4().bytes) for h in range(4)]

    def key(i: int, salt: str = "") -> str:
        return f"data/{slices[i % 4]}/{salt}{i:08d}-" + "k" * 220

    paths = [f"tables/t{i % 7}/" + "p" * 170 + f"/part-{i:08d}.parquet" for i in range(objects)]
    keys = [key(i) for i in range(objects)]
    _files(folder, keys, 12 * DAY)
    _stage_all(server.endpoint, repo, [(p, f"local://{folder}/{k}") for p, k in zip(paths, keys, strict=True)])
    lakefs.commits.commit(repo, "main", lakefs_sdk.CommitCreation(message="base",
                                                                   var_date=int(time.time() - 10 * DAY)))
    return folder, paths, key


@pytest.fixture
def big_repository(lakefs, lakefs_server):
    """OBJECTS objects with 200-character paths and 250-character addresses (in lakeFS-named slices opened 30 days
    ago), committed 10 days ago; then 100 of them overwritten 5 days ago, and 50 files written into the namespace
    and never staged. GC rules keep one day: the overwritten versions and the 50 files are the garbage."""
    repo = f"big-{uuid.uuid4().hex[:8]}"
    folder, paths, key = _lake(lakefs, lakefs_server, repo, OBJECTS)
    again = [key(i, "v2-") for i in range(0, OBJECTS, OBJECTS // 100)]
    _files(folder, again, 6 * DAY)
    _stage_all(lakefs_server.endpoint, repo, [(paths[i], f"local://{folder}/{k}")
                                              for i, k in zip(range(0, OBJECTS, OBJECTS // 100), again, strict=True)])
    lakefs.commits.commit(repo, "main", lakefs_sdk.CommitCreation(message="overwrite",
                                                                   var_date=int(time.time() - 5 * DAY)))
    _files(folder, [key(i, "lost-") for i in range(50)], 3 * DAY)
    # What a Spark runner that collected every object would bring to its driver, at the very least: each
    # address once (the listing) and again (what the retained commits reach); several times the limit.
    assert 2 * sum(len(key(i)) for i in range(OBJECTS)) > 8 * MAX_RESULT
    yield repo
    lakefs.repositories.delete_repository(repo, force=True)


class DriverResultLimit(AssertionError):
    """The run failed because its tasks' results exceeded spark.driver.maxResultSize: per-object data reached the
    driver (any other failure of the run stays a plain failure)."""


def bounded(**submit):
    """``run_gc(**submit)``; a run that failed on the driver's result limit raises ``DriverResultLimit``."""
    try:
        return run_gc(**submit)
    except GCError as exc:
        if "spark.driver.maxResultSize" in str(exc):
            raise DriverResultLimit(next(line for line in str(exc).splitlines() if "maxResultSize" in line)) from None
        raise


def test_spark_run_with_a_tiny_driver_result_limit_plans_what_threads_plan(big_repository, lakefs, lakefs_server,
                                                                         lakefs_conn, cluster_spark, submit_env):
    now = datetime.now(UTC)
    gc = Collector(lakefs_server.endpoint)
    threads = gc.mark(big_repository, now=now, min_age=timedelta(0))
    assert len(threads.deleted) == 150  # the 100 overwritten versions and the 50 files never staged

    spark = cluster_spark.model_copy(update={"conf": {**cluster_spark.conf, "spark.driver.maxResultSize": "2m"}})
    summary = bounded(spark=spark, lakefs=lakefs_conn, storage=gc.storage, env=submit_env,
                      request=RunRequest(big_repository, "mark", now=now, min_age=timedelta(0), runner="spark"))

    def plan(s):
        ns = open_namespace(StorageConfig(s.storage_namespace, s.local_root))
        stored = report.read_plan(ns, s.run_id, s.repository_id)
        return plan_fingerprint(stored.summary, stored.keys)

    assert summary.success and summary.runner == "spark"
    assert plan(summary) == plan(threads.summary)

    # Cleaning policies in one run: path policies (each entry's scope judged with its range's on executors; only the
    # (range, scope) pairs reach the driver; tables/t1/ keeps 30 days: its overwritten versions stay), keep_versions
    # (each path's history ranked on executors: 2 versions of tables/t2/ kept, their overwritten versions stay) and
    # --by-path (the plan named by its paths, counted per table)
    document = {"policies": [{"id": "t1", "patterns": ["*"], "paths": ["tables/t1/**"], "keep_for": "30d"},
                             {"id": "t2", "patterns": ["main"], "paths": ["tables/t2/**"], "keep_versions": 2}]}
    lakefs.call("metadata", lakefs.internal.set_repository_metadata, big_repository,
                lakefs_sdk.RepositoryMetadataSet(metadata={METADATA_KEY: json.dumps(document)}))
    named_threads = gc.mark(big_repository, now=now, min_age=timedelta(0), by_path=True)
    assert len(named_threads.deleted) == 150 - sum(i % 7 in (1, 2) for i in range(0, OBJECTS, OBJECTS // 100))
    named = bounded(spark=spark, lakefs=lakefs_conn, storage=gc.storage, env=submit_env,
                    request=RunRequest(big_repository, "mark", now=now, min_age=timedelta(0), runner="spark",
                                       by_path=True))
    assert named.success and named.listing.get("plan") == "spark"  # the dataset plan, not the object path
    assert plan(named) == plan(named_threads.summary)
    assert named.by_path == named_threads.summary.by_path and len(named.by_path) > 1, named.by_path


# --- a daily run -------------------------------------------------------------------------------------------------

DAILY_OBJECTS = 20_000
RAGGEDNESS = 800  # entries a range holds on average (lakeFS's committed.permanent.range_raggedness_entries)
REWRITTEN = 2_500  # paths rewritten by the day, spread over every range (their lookups: more than index_lookup.DRIVER_KEYS)


class SmallRangesLakeFS(LakeFSServer):
    """lakeFS cutting ranges of RAGGEDNESS entries instead of 50,000: the ranges of a lake 50 times larger, on a
    repository a test stages in seconds."""

    def config(self) -> dict:
        config = super().config()
        config["committed"] = {**config["committed"], "permanent": {"range_raggedness_entries": RAGGEDNESS}}
        return config


@pytest.fixture(scope="module")
def small_ranges_lakefs():
    server = SmallRangesLakeFS().start()
    yield server
    server.cleanup()


def _submit(spark_settings, server, gc: Collector, request: RunRequest, env: dict[str, str]):
    # a day's touched ranges compared by executors from the second on (a driver compares 128 itself by default: a
    # lake 50 times this one's size would touch that many and more)
    conf = {"spark.driver.maxResultSize": "2m", "spark.hadoop.lakefs.gc.daily.driver_ranges": "1"}
    spark = spark_settings.model_copy(update={"conf": {**spark_settings.conf, **conf}})
    conn = LakeFSConnection(endpoint_url=server.endpoint, access_key_id=ADMIN_ACCESS_KEY,
                            secret_access_key=ADMIN_SECRET_KEY)
    return bounded(spark=spark, lakefs=conn, storage=gc.storage, env=env, request=request)


def _plan(summary):
    ns = open_namespace(StorageConfig(summary.storage_namespace, summary.local_root))
    stored = report.read_plan(ns, summary.run_id, summary.repository_id)
    return plan_fingerprint(stored.summary, stored.keys)


def test_a_daily_run_touching_many_ranges_compares_them_on_executors(small_ranges_lakefs, cluster_spark, submit_env):
    server = small_ranges_lakefs
    lakefs = make_lakefs_for(server.endpoint, ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY)
    repo = f"daily-{uuid.uuid4().hex[:8]}"
    folder, paths, key = _lake(lakefs, server, repo, DAILY_OBJECTS)
    gc = Collector(server.endpoint)
    first, _ = gc.run(repo)  # a real full run: the state and kept index the daily runs start from
    assert first.success and first.listing["kind"] == "full" and first.ranges >= 16, (first.ranges, first.listing)

    # the day: REWRITTEN paths, a few in every range, overwritten (their versions of the base become garbage)
    step = DAILY_OBJECTS // REWRITTEN
    again = {paths[i]: key(i, "v2-") for i in range(0, DAILY_OBJECTS, step)}
    _files(folder, list(again.values()), 6 * DAY)
    _stage_all(server.endpoint, repo, [(p, f"local://{folder}/{k}") for p, k in again.items()])
    lakefs.commits.commit(repo, "main", lakefs_sdk.CommitCreation(message="day", var_date=int(time.time() - DAY)))
    now = datetime.now(UTC)

    summary = _submit(cluster_spark, server, gc, RunRequest(repo, "mark", now=now, min_age=timedelta(0),
                                                            runner="spark"), submit_env)
    listing = summary.listing
    assert summary.success and summary.runner == "spark" and listing["kind"] == "incremental", listing
    # the day touched many ranges, compared by executors; its keys were looked up in the index there too
    assert listing["ranges_dead"] + listing["ranges_new"] > 16, listing
    assert listing["compared_on"] == "runner" and listing["looked_up_on"] == "runner", listing
    # what was decoded of those ranges, had it come to the driver, would have exceeded the limit several times
    assert listing["bytes_walked"] > 4 * MAX_RESULT, listing
    daily = gc.mark(repo, now=now)  # the thread runner's daily run, from the same state
    assert daily.summary.listing["kind"] == "incremental"
    full = gc.mark(repo, now=now, dry_run=True, listing="full")
    assert _plan(summary) == _plan(daily.summary)
    assert {o.key for o in full.deleted} == set(_plan(summary)["deleted"]) == {key(i) for i in
                                                                              range(0, DAILY_OBJECTS, step)}

    # Cleaning policies: no kept index to bring up to date, the daily run is planned as datasets on executors (the
    # entries of the ranges whose (range, scope) units died decoded and anti-joined there, the rest asked for
    # there). tables/t1/ keeps 30 days (its replaced versions stay); main keeps each path's latest version.
    document = {"policies": [{"id": "t1", "patterns": ["*"], "paths": ["tables/t1/**"], "keep_for": "30d"},
                             {"id": "latest", "patterns": ["main"], "keep_versions": 1}]}
    lakefs.call("metadata", lakefs.internal.set_repository_metadata, repo,
                lakefs_sdk.RepositoryMetadataSet(metadata={METADATA_KEY: json.dumps(document)}))
    swept, _ = gc.run(repo, now=now)  # a real run with the policies: the state the next day starts from
    assert swept.success, swept
    again = {paths[i]: key(i, "v3-") for i in range(1, DAILY_OBJECTS, step)}
    _files(folder, list(again.values()), 5 * DAY)
    _stage_all(server.endpoint, repo, [(p, f"local://{folder}/{k}") for p, k in again.items()])
    lakefs.commits.commit(repo, "main", lakefs_sdk.CommitCreation(message="day 2", var_date=int(time.time() - DAY)))
    now = datetime.now(UTC)
    scoped = _submit(cluster_spark, server, gc, RunRequest(repo, "mark", now=now, min_age=timedelta(0),
                                                           runner="spark"), submit_env)
    listing = scoped.listing
    assert scoped.success and (listing["kind"], listing["plan"]) == ("incremental", "spark"), listing
    # the dead ranges' entries (paths and 250-character addresses), had they come to the driver, would have
    # exceeded the limit twice over
    assert listing["ranges_dead"] * RAGGEDNESS * 250 > 2 * MAX_RESULT, listing
    daily = gc.mark(repo, now=now)  # the thread runner's daily run, from the same state
    full = gc.mark(repo, now=now, dry_run=True, listing="full")
    assert daily.summary.listing["kind"] == "incremental"
    assert _plan(scoped) == _plan(daily.summary)
    assert {o.key for o in full.deleted} == set(_plan(scoped)["deleted"]) == {
        key(i) for i in range(1, DAILY_OBJECTS, step) if i % 7 != 1}
    lakefs.repositories.delete_repository(repo, force=True)
    lakefs.close()
