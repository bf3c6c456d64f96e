"""The one GC engine on every store lakeFS supports (local, S3 on versitygw, Azure Blob on Azurite, GCS on
fake-gcs-server) × both runners (threads in process, Spark executors in local mode): keep / delete / 410 through
lakeFS / dry run changes nothing / staged kept / objects outside the namespace untouched / min-age / deletion cap
/ by-path / re-run on a partly collected namespace / plan on one runner, sweep on the other / plan parity."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import lakefs_sdk
import pytest

from spark_jobs.core.report import plan_fingerprint
from spark_jobs.engine.runtime.context import GCError
from tests.gc_engine import RUNNERS, Collector, runner_of
from tests.services import ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY, STORES, LakeFSServer, Store
from workers.shared.lakefs.client import LakeFS, make_lakefs_for
from workers.shared.lakefs.errors import LakeFSError

DAY = 86400


@pytest.fixture(scope="module", params=sorted(STORES))
def world(request) -> Iterator[tuple[Store, LakeFSServer, LakeFS]]:
    """One store and a lakeFS on it, for the whole module per store."""
    yield from store_world(request.param)


def store_world(kind: str, store: Store | None = None) -> Iterator[tuple[Store, LakeFSServer, LakeFS]]:
    """A store of ``kind`` (or ``store``, configured by the caller) and a lakeFS on it, stopped when the generator
    closes."""
    store = (store or STORES[kind]()).start()
    try:
        server = LakeFSServer(store=store).start()
    except BaseException:
        store.cleanup()
        raise
    client = make_lakefs_for(server.endpoint, ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY)
    yield store, server, client
    client.close()
    server.cleanup()
    store.cleanup()


def collector(world, runner: str, request) -> Collector:
    store, server, _ = world
    chosen, name = runner_of(runner, request)
    options = {store.kind: store.fsspec_options()} if store.kind != "local" else {}
    return Collector(server.endpoint, options, runner=chosen, runner_name=name)


def other(gc: Collector, world, request) -> Collector:
    return collector(world, "threads" if gc.runner_name == "spark" else "spark", request)


def new_repo(lakefs: LakeFS, store: Store) -> str:
    name = f"g-{uuid.uuid4().hex[:10]}"
    lakefs.call("create repository", lakefs.repositories.create_repository,
                lakefs_sdk.RepositoryCreation(name=name, storage_namespace=store.namespace(name),
                                              default_branch="main"))
    lakefs.call("rules", lakefs.repositories.set_gc_rules, name,
                lakefs_sdk.GarbageCollectionRules(default_retention_days=1, branches=[]))
    return name


def put(lakefs: LakeFS, repo: str, path: str, data: bytes, branch: str = "main") -> None:
    lakefs.upload(repo, branch, path, data=data)


def commit(lakefs: LakeFS, repo: str, days_ago: float, branch: str = "main") -> str:
    date = int(time.time() - days_ago * DAY)
    return lakefs.call("commit", lakefs.commits.commit, repo, branch,
                       lakefs_sdk.CommitCreation(message=f"{days_ago}d", var_date=date)).id


def read(lakefs: LakeFS, repo: str, ref: str, path: str) -> bytes | int:
    try:
        return lakefs.call("get", lakefs.objects.get_object, repo, ref, path)
    except LakeFSError as exc:
        return exc.status or 0


def physical_key(lakefs: LakeFS, repo: str, ref: str, path: str, namespace: str) -> str:
    address = lakefs.call("stat", lakefs.objects.stat_object, repo, ref, path).physical_address
    return address.split(namespace.rstrip("/") + "/", 1)[1] if "://" in address and namespace in address \
        else address.split(f"/{repo}/", 1)[-1] if "://" in address else address


def data_keys(store: Store, namespace: str) -> set[str]:
    fs = store.filesystem()
    root = store.fsspec_path(namespace).rstrip("/") + "/"
    return {p[len(root):] for p in fs.find(root) if not p[len(root):].startswith("_lakefs/")}


def history(lakefs: LakeFS, store: Store, repo: str) -> dict:
    """tables/t1/a.txt: v1 (10 days, expired), v2 (5 days: the first commit before the 1-day window, kept), v3
    (HEAD); keep.txt in every commit; staged.txt staged twice (the first version is garbage, the second kept)."""
    namespace = store.namespace(repo)
    put(lakefs, repo, "tables/t1/a.txt", b"v1")
    put(lakefs, repo, "keep.txt", b"keep")
    c1 = commit(lakefs, repo, 10)
    v1 = physical_key(lakefs, repo, c1, "tables/t1/a.txt", namespace)
    put(lakefs, repo, "tables/t1/a.txt", b"v2")
    c2 = commit(lakefs, repo, 5)
    put(lakefs, repo, "tables/t1/a.txt", b"v3")
    commit(lakefs, repo, 0)
    put(lakefs, repo, "staged.txt", b"s1")
    s1 = physical_key(lakefs, repo, "main", "staged.txt", namespace)
    put(lakefs, repo, "staged.txt", b"s2")
    return {"c1": c1, "c2": c2, "v1": v1, "s1": s1, "namespace": namespace}


@pytest.mark.parametrize("runner", RUNNERS)
def test_the_gc_on_every_store_and_runner(world, runner, request):
    store, _, lakefs = world
    gc = collector(world, runner, request)
    repo = new_repo(lakefs, store)
    h = history(lakefs, store, repo)
    namespace = h["namespace"]
    # Outside the namespace, in the same bucket or folder: never listed, never deleted
    outside = store.fsspec_path(namespace).rstrip("/") + "-outside/x.bin"
    fs = store.filesystem()
    if store.kind == "local":
        fs.makedirs(outside.rsplit("/", 1)[0], exist_ok=True)
    fs.pipe_file(outside, b"not ours")
    before = data_keys(store, namespace)
    assert {h["v1"], h["s1"]} <= before

    # Dry run: a plan, and nothing deleted
    dry, _ = gc.run(repo, dry_run=True)
    assert dry.num_deleted_objects == 2 and dry.dry_run and dry.phase == "mark"
    assert data_keys(store, namespace) == before
    if runner == "spark":  # the dataset plan: ranges read on executors, the in-process runner's mark cache unused
        assert (dry.cache["state"], dry.listing["plan"]) == ("unused", "spark"), (dry.cache, dry.listing)
    else:  # the mark cache on this store: written by the first run, all of the next mark taken from it, nothing new
        assert (dry.cache["state"], dry.cache["written"], dry.cache["write"]) == ("empty", True, "compacted"), \
            dry.cache

    # min-age: everything was written moments ago, so a one-hour cutoff spares it all
    spared, _ = gc.run(repo, min_age=timedelta(hours=1))
    assert spared.success and spared.swept == 0 and spared.too_new >= 2
    assert runner == "spark" or spared.cache["state"] == "used" and spared.cache["ranges_read"] == \
        spared.cache["metaranges_read"] == 0 and spared.cache["ranges_cached"] >= 1 and \
        spared.cache["write"] == "unchanged", spared.cache
    assert data_keys(store, namespace) == before

    # By path, and the parity of the two runners' plans (same `now`, same cutoff)
    now = datetime.now(UTC)
    mine = gc.mark(repo, now=now, by_path=True)
    theirs = other(gc, world, request).mark(repo, now=now)
    assert plan_fingerprint(mine.summary, [o.key for o in mine.deleted]) == plan_fingerprint(
        theirs.summary, [o.key for o in theirs.deleted])
    assert {o.key for o in mine.deleted} == {h["v1"], h["s1"]}
    assert mine.summary.by_path == {"tables/t1/": [1, 2], "(in no commit)": [1, 2]}

    # Re-run on a partly collected namespace: one planned object already gone; the cap leaves one for later.
    # The plan was marked on this runner and is swept on the other.
    fs.rm_file(store.fsspec_path(namespace, h["s1"]))
    capped = other(gc, world, request).sweep(repo, mine.summary.run_id, max_deletions=1)
    assert capped.success and capped.swept == 1 and capped.capped == 1
    swept = gc.sweep(repo, mine.summary.run_id)
    assert swept.success and swept.swept == 2 and swept.phase == "swept"

    assert data_keys(store, namespace) == before - {h["v1"], h["s1"]}
    assert read(lakefs, repo, h["c1"], "tables/t1/a.txt") == 410
    assert read(lakefs, repo, h["c2"], "tables/t1/a.txt") == b"v2"
    assert read(lakefs, repo, "main", "tables/t1/a.txt") == b"v3"
    assert read(lakefs, repo, h["c1"], "keep.txt") == b"keep"
    assert read(lakefs, repo, "main", "staged.txt") == b"s2"
    assert fs.cat_file(outside) == b"not ours"

    again, _ = gc.run(repo)
    assert again.success and again.swept == 0 and again.num_deleted_objects == 0
    # The run's one record, where lakeFS's GC keeps its reports
    record = json.loads(fs.cat_file(store.fsspec_path(namespace, f"_lakefs/retention/gc/unified/"
                                                                 f"{again.run_id}/summary.json")))
    assert record["phase"] == "swept" and record["runner"] == gc.runner_name and record["marked"]


@pytest.mark.parametrize("runner", RUNNERS)
def test_a_dry_run_plan_is_never_swept(world, runner, request):
    store, _, lakefs = world
    gc = collector(world, runner, request)
    repo = new_repo(lakefs, store)
    history(lakefs, store, repo)
    dry, _ = gc.run(repo, dry_run=True)
    with pytest.raises(GCError, match="dry run") as err:
        other(gc, world, request).sweep(repo, dry.run_id)
    assert err.value.reason == "dry-run-plan"


def test_the_settings_reach_every_store(world, redis_client):
    """From the store's LAKEFS_JANITOR_GC__* settings (as an operator sets them, timeouts included) to a complete
    run through the runner that wraps production runs: the options each store library gets are usable."""
    from workers.gc.history import GCRuns  # noqa: PLC0415
    from workers.gc.run import GCRequest, execute  # noqa: PLC0415
    from workers.shared.settings import GCSettings, LakeFSConnection  # noqa: PLC0415

    store, server, lakefs = world
    repo = new_repo(lakefs, store)
    h = history(lakefs, store, repo)
    prefix = "LAKEFS_JANITOR_GC__"
    fields = {k[len(prefix):].lower(): v for k, v in store.janitor_env().items() if k.startswith(prefix)}
    gc = GCSettings(min_age="0s", runner="threads", store_timeout_seconds=30, **fields)
    connection = LakeFSConnection(endpoint_url=server.endpoint, access_key_id=ADMIN_ACCESS_KEY,
                                  secret_access_key=ADMIN_SECRET_KEY)
    summary = execute(gc, GCRequest(repo), connection=connection, runs=GCRuns(redis_client, f"s-{uuid.uuid4().hex[:6]}"))
    assert summary.success and summary.swept == 2
    assert read(lakefs, repo, h["c1"], "tables/t1/a.txt") == 410
    assert read(lakefs, repo, "main", "staged.txt") == b"s2" and read(lakefs, repo, h["c2"], "tables/t1/a.txt") == b"v2"


@pytest.mark.parametrize("runner", RUNNERS)
def test_a_savepoint_keeps_every_path_of_its_commit(world, runner, request):
    """Issue 26: a savepoint named by a path policy (tables/**) keeps its whole commit readable, tmp/ included:
    restoring it puts the whole branch back. Versions no savepoint or retention keeps are still collected."""
    from spark_jobs.core.cleaning import METADATA_KEY  # noqa: PLC0415
    from workers.gc import savepoints  # noqa: PLC0415
    from workers.shared.settings import GCSettings, LakeFSConnection  # noqa: PLC0415

    store, server, lakefs = world
    gc = collector(world, runner, request)
    repo = new_repo(lakefs, store)
    policies = {"policies": [{"id": "tables", "patterns": ["main"], "paths": ["tables/**"], "keep_commits": 1,
                              "savepoints": ["release-*"]}]}
    lakefs.call("policies", lakefs.internal.set_repository_metadata, repo,
                lakefs_sdk.RepositoryMetadataSet(metadata={METADATA_KEY: json.dumps(policies)}))
    firsts = {}
    for i, days in enumerate((5, 4, 3), start=1):
        put(lakefs, repo, "tables/a.bin", f"A{i}".encode())
        put(lakefs, repo, "tmp/x.bin", f"X{i}".encode())
        firsts[i] = commit(lakefs, repo, days)
    lakefs.call("tag", lakefs.tags.create_tag, repo, lakefs_sdk.TagCreation(id="release-1", ref=firsts[1]))

    summary, _ = gc.run(repo)
    assert summary.success
    # the savepoint's commit whole, both paths; HEAD; the policy's +1 commit of tables/ (A2)
    assert read(lakefs, repo, "release-1", "tables/a.bin") == b"A1"
    assert read(lakefs, repo, "release-1", "tmp/x.bin") == b"X1"
    assert read(lakefs, repo, firsts[2], "tables/a.bin") == b"A2"
    assert read(lakefs, repo, "main", "tmp/x.bin") == b"X3" and read(lakefs, repo, "main", "tables/a.bin") == b"A3"
    # X2: no savepoint, outside the policy's paths, past lakeFS's 1-day rule: collected
    assert read(lakefs, repo, firsts[2], "tmp/x.bin") == 410
    assert summary.swept == 1

    # `savepoint list` counts every object the savepoint alone keeps alive, tmp/ included
    prefix = "LAKEFS_JANITOR_GC__"
    fields = {k[len(prefix):].lower(): v for k, v in store.janitor_env().items() if k.startswith(prefix)}
    settings = GCSettings(min_age="0s", runner="threads", store_timeout_seconds=30, **fields)
    connection = LakeFSConnection(endpoint_url=server.endpoint, access_key_id=ADMIN_ACCESS_KEY,
                                  secret_access_key=ADMIN_SECRET_KEY)
    impact = savepoints.impacts(settings, connection, repo, names=["release-1"], min_age=timedelta(0))["release-1"]
    assert (impact.objects, impact.bytes) == (2, 4)
