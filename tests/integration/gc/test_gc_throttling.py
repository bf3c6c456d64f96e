"""A throttled sweep completes exactly (lakeFS issue #5729): every planned object deleted, nothing else, and the
back-offs reported. On each cloud store's real server (versitygw, Azurite, fake-gcs-server) behind a proxy that
answers the store's own "slow down" (SlowDown, ServerBusy 503, 429) to batch deletes, and with versitygw's own
--max-requests limit under concurrent requests."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import lakefs_sdk
import pytest

from spark_jobs.engine.runtime.parallel import ThreadRunner
from spark_jobs.engine.stores import STORES as NAMESPACES
from tests.gc_engine import Collector
from tests.integration.gc.test_gc_stores import store_world
from tests.services import ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY, FaultProxy, LakeFSServer, Store, VersityGW
from workers.shared.lakefs.client import make_lakefs_for


def _repository(server: LakeFSServer, store: Store) -> tuple[str, str]:
    lakefs = make_lakefs_for(server.endpoint, ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY)
    try:
        name = f"t-{uuid.uuid4().hex[:10]}"
        namespace = store.namespace(name)
        lakefs.call("create", lakefs.repositories.create_repository, lakefs_sdk.RepositoryCreation(
            name=name, storage_namespace=namespace, default_branch="main"))
        lakefs.call("rules", lakefs.repositories.set_gc_rules, name,
                    lakefs_sdk.GarbageCollectionRules(default_retention_days=1, branches=[]))
        lakefs.upload(name, "main", "keep.txt", data=b"keep")
        lakefs.call("commit", lakefs.commits.commit, name, "main", lakefs_sdk.CommitCreation(message="c"))
        return name, namespace
    finally:
        lakefs.close()


def _garbage(store: Store, namespace: str, count: int) -> set[str]:
    """Uploads never linked to lakeFS, written straight to the store: garbage once past the cutoff."""
    fs = store.filesystem()
    keys = {f"data/gbench{i % 7}/obj-{i:05d}" for i in range(count)}
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda k: fs.pipe_file(store.fsspec_path(namespace, k), b"g"), sorted(keys)))
    return keys


def _data_keys(store: Store, namespace: str) -> set[str]:
    root = store.fsspec_path(namespace) + "/"
    return {p[len(root):] for p in store.filesystem().find(root) if not p[len(root):].startswith("_lakefs/")}


@pytest.fixture(scope="module", params=["s3", "azure", "gcs"])
def cloud_world(request):
    yield from store_world(request.param)


def test_a_sweep_the_store_throttles_completes_and_reports_its_back_offs(cloud_world):
    store, server, _ = cloud_world
    repo, namespace = _repository(server, store)
    garbage = _garbage(store, namespace, 2 * NAMESPACES[store.kind].batch + 10)  # three batch deletes
    live = _data_keys(store, namespace) - garbage
    proxy = FaultProxy(store.endpoint, store.kind, first=3, every=2).start()
    try:
        gc = Collector(server.endpoint, {store.kind: store.fsspec_options(proxy.url)}, runner=ThreadRunner(4))
        summary, _ = gc.run(repo)
    finally:
        proxy.cleanup()
    assert summary.success and summary.phase == "swept"
    assert summary.num_deleted_objects == len(garbage) and summary.swept == len(garbage)
    assert summary.backoffs >= proxy.throttled >= 3  # every "slow down" slowed the sweep down
    assert _data_keys(store, namespace) == live
    print(f"RELIABILITY throttled-sweep-{store.kind}: runs 1, faults {proxy.throttled} ({proxy.matched} batch "
          f"deletes), back-offs {summary.backoffs}, deleted {summary.swept}, lost 0")


def test_a_sweep_under_versitygw_max_requests_completes_exactly():
    store = VersityGW(max_requests=1).start()
    server = LakeFSServer(store=store).start()
    try:
        repo, namespace = _repository(server, store)
        garbage = _garbage(store, namespace, 2500)
        live = _data_keys(store, namespace) - garbage
        gc = Collector(server.endpoint, {"s3": store.fsspec_options()}, runner=ThreadRunner(8), max_in_flight=8)
        summary, _ = gc.run(repo)
        assert summary.success and summary.swept == len(garbage) == summary.num_deleted_objects
        assert _data_keys(store, namespace) == live
        print(f"versitygw --max-requests 1: {summary.backoffs} back-offs, {summary.delete_requests} delete requests")
    finally:
        server.cleanup()
        store.cleanup()
