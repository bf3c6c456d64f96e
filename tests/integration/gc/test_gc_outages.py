"""The store failing while the collector lists and deletes, and lakeFS restarted during the sweep's re-check, on
a real lakeFS over versitygw (the real S3 server) and a real Redis, through the runner that wraps every run
(lease, history, metrics): each fault gives a complete, exact run or a non-zero outcome with a message a person
can act on and the reason in the failure metric, never a deletion of what must survive; the next run after
recovery succeeds. (Kills, Redis down and concurrent writers: ``test_gc_under_faults``; SlowDown on deletes:
``test_gc_throttling``.)"""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import parse_qs, urlsplit

import lakefs_sdk
import pytest

from spark_jobs.engine.runtime.context import GCError
from tests.fakes import fresh_metrics
from tests.integration.gc.test_gc_against_lakefs import DyingLakeFS
from tests.services import (
    ADMIN_ACCESS_KEY,
    ADMIN_SECRET_KEY,
    LakeFSServer,
    ThrottlingProxy,
    VersityGW,
    internal_error,
    janitor_env,
    throttle_answer,
)
from workers.gc.history import GCRuns
from workers.gc.run import GCRequest, execute
from workers.shared.lakefs.client import make_lakefs_for
from workers.shared.settings import GCSettings, LakeFSConnection

DAY = 86400
CLI = [sys.executable, "-m", "workers.cli"]


@pytest.fixture(scope="module")
def world():
    store = VersityGW().start()
    server = LakeFSServer(store=store).start()
    yield store, server
    server.cleanup()
    store.cleanup()


class Lake:
    """A repository whose old versions are garbage: 40 paths written three times (30, 20 days ago and now), main
    kept 7 days, a few staged overwrites; every version a retained commit or the staging area reaches is recorded
    with its bytes, and the keys of the expired versions."""

    def __init__(self, server: LakeFSServer, store: VersityGW, paths: int = 40) -> None:
        self.lakefs = make_lakefs_for(server.endpoint, ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY)
        self.store = store
        self.repo = f"o-{uuid.uuid4().hex[:10]}"
        self.namespace = store.namespace(self.repo)
        self.lakefs.call("create", self.lakefs.repositories.create_repository, lakefs_sdk.RepositoryCreation(
            name=self.repo, storage_namespace=self.namespace, default_branch="main"))
        self.survive: dict[tuple[str, str], bytes] = {}
        old: set[str] = set()
        for version, age in (("v1", 30), ("v2", 20), ("v3", 0)):
            written = {f"t/p{i}": f"{version} {uuid.uuid4().hex}".encode() for i in range(paths)}
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda item: self.lakefs.upload(self.repo, "main", item[0], data=item[1]),
                              sorted(written.items())))
            made = self.lakefs.call("commit", self.lakefs.commits.commit, self.repo, "main", lakefs_sdk.CommitCreation(
                message=version, var_date=int(time.time()) - age * DAY if age else None))
            if version == "v1":
                old = {self.key(made.id, p) for p in written}
            else:
                self.survive.update({(made.id, p): d for p, d in written.items()})
        for i in range(0, paths, 8):
            data = f"staged {uuid.uuid4().hex}".encode()
            self.lakefs.upload(self.repo, "main", f"t/p{i}", data=data)
            self.survive[("main", f"t/p{i}")] = data
        self.lakefs.call("rules", self.lakefs.repositories.set_gc_rules, self.repo,
                         lakefs_sdk.GarbageCollectionRules(default_retention_days=7, branches=[]))
        self.garbage = old

    def key(self, ref: str, path: str) -> str:
        address = self.lakefs.call("stat", self.lakefs.objects.stat_object, self.repo, ref, path).physical_address
        return address.split(f"/{self.repo}/", 1)[1]

    def data_keys(self) -> set[str]:
        fs = self.store.filesystem()
        root = self.store.fsspec_path(self.namespace) + "/"
        return {p[len(root):] for p in fs.find(root) if not p[len(root):].startswith("_lakefs/")}

    def lost(self) -> list[str]:
        out = []
        for (ref, path), data in sorted(self.survive.items()):
            try:
                got = self.lakefs.call("get", self.lakefs.objects.get_object, self.repo, ref, path)
            except Exception as exc:  # noqa: BLE001 - a lost object reads as an error (410)
                got = repr(exc)[:60]
            if got != data:
                out.append(f"{ref[:12]}:{path}")
        return out

    def close(self) -> None:
        self.lakefs.close()


def settings(store: VersityGW, endpoint: str, **extra) -> GCSettings:
    return GCSettings(min_age="0s", runner="threads", s3_endpoint_url=endpoint, s3_region=store.region,
                      s3_access_key_id=store.access_key, s3_secret_access_key=store.secret_key, **extra)


def connection(endpoint: str) -> LakeFSConnection:
    return LakeFSConnection(endpoint_url=endpoint, access_key_id=ADMIN_ACCESS_KEY, secret_access_key=ADMIN_SECRET_KEY)


def failures(metrics, repo: str, reason: str) -> float:
    return metrics.gc_failures.labels(repo, reason)._value.get()


def is_data_listing(method: str, target: str) -> bool:
    url = urlsplit(target)
    query = parse_qs(url.query)
    return method == "GET" and url.path.rstrip("/").count("/") == 1 and "/data/" in query.get("prefix", [""])[0] + "/"


# What the store answers to a share of its listings, every one of which the run must get past.
LISTING_FAULTS = {
    "500-internal-error": {"answer": internal_error("s3")},
    "503-slow-down": {"answer": throttle_answer("s3")},
    "stall-past-the-read-timeout": {"stall": 3.0},
}


@pytest.mark.parametrize("fault", list(LISTING_FAULTS))
def test_store_faults_while_listing_are_retried_and_the_run_is_exact(world, redis_client, fault):
    store, server = world
    lake = Lake(server, store)
    try:
        live = lake.data_keys() - lake.garbage
        proxy = ThrottlingProxy(store.endpoint, "s3", first=2, every=3, match=is_data_listing,
                                **LISTING_FAULTS[fault]).start()
        try:
            gc = settings(store, proxy.url, store_timeout_seconds=1)
            metrics = fresh_metrics()
            summary = execute(gc, GCRequest(lake.repo), connection=connection(server.endpoint),
                              runs=GCRuns(redis_client, f"t-{uuid.uuid4().hex[:6]}"), metrics=metrics)
        finally:
            proxy.cleanup()
        assert proxy.throttled >= 2, f"the fault was never injected ({proxy.matched} listings seen)"
        assert summary.success and summary.phase == "swept", summary
        assert lake.data_keys() == live, "the run is not exact"
        assert lake.lost() == []
        print(f"RELIABILITY store-listing-{fault}: runs 1, faults {proxy.throttled}, read back "
              f"{len(lake.survive)}, lost 0, failed re-runs 0")
    finally:
        lake.close()


@pytest.mark.parametrize("fault", ["500-internal-error", "stall-past-the-read-timeout"])
def test_store_faults_while_deleting_are_retried_and_the_sweep_is_exact(world, redis_client, fault):
    """A batch delete that times out may have been carried out by the store: sent again, it deletes nothing more
    (an object already gone counts as deleted)."""
    store, server = world
    lake = Lake(server, store)
    fault_kw = {"answer": internal_error("s3")} if fault == "500-internal-error" else {"stall": 3.0}
    try:
        live = lake.data_keys() - lake.garbage
        proxy = ThrottlingProxy(store.endpoint, "s3", first=1, every=2, **fault_kw).start()
        try:
            summary = execute(settings(store, proxy.url, store_timeout_seconds=1), GCRequest(lake.repo),
                              connection=connection(server.endpoint),
                              runs=GCRuns(redis_client, f"t-{uuid.uuid4().hex[:6]}"), metrics=fresh_metrics())
        finally:
            proxy.cleanup()
        assert proxy.throttled >= 1 and summary.success and summary.swept == len(lake.garbage)
        assert summary.backoffs >= 1
        assert lake.data_keys() == live and lake.lost() == []
    finally:
        lake.close()


def test_a_store_gone_while_listing_fails_clearly_and_the_next_run_succeeds(world, redis_client):
    store, server = world
    lake = Lake(server, store)
    try:
        before = lake.data_keys()
        proxy = ThrottlingProxy(store.endpoint, "s3", first=1, match=is_data_listing, gone=True).start()
        gc = settings(store, proxy.url)
        runs = GCRuns(redis_client, f"t-{uuid.uuid4().hex[:6]}")
        metrics = fresh_metrics()
        with pytest.raises(GCError) as err:
            execute(gc, GCRequest(lake.repo), connection=connection(server.endpoint), runs=runs, metrics=metrics)
        message = str(err.value)
        reason = "storage-unavailable"
        assert err.value.reason == reason and failures(metrics, lake.repo, reason) == 1, message
        assert "listing data/" in message and lake.namespace in message and "unreachable" in message, message
        assert "Traceback" not in message and runs.history(lake.repo)[0]["reason"] == reason
        assert proxy.throttled == 1
        assert lake.data_keys() == before and lake.lost() == []
        summary = execute(settings(store, store.endpoint), GCRequest(lake.repo), connection=connection(server.endpoint),
                          runs=runs, metrics=metrics)
        assert summary.success and lake.data_keys() == before - lake.garbage and lake.lost() == []
    finally:
        lake.close()


def _nth(method: str, suffix: str, n: int):
    """The ``n``-th (from 1) request by ``method`` to a path ending in ``suffix``."""
    return lambda m, path, seen: m == method and path.endswith(suffix) and sum(
        1 for sm, sp in seen if sm == method and sp.endswith(suffix)) == n - 1


# Where lakeFS restarts: reading the history (the first page of a branch's log), in the mark (asking for the
# staged addresses), and at the sweep's re-check (the second listing of the branches; the first is the mark's).
RESTART_AT = {
    "walk": _nth("GET", "/commits", 1),
    "mark": _nth("POST", "/gc/prepare_uncommited", 1),
    "recheck": _nth("GET", "/branches", 2),
}


class RestartingLakeFS(DyingLakeFS):
    """The reverse proxy in front of the real lakeFS, which at a chosen request stops lakeFS and starts it again
    (same folder, database and port) before forwarding: ``down_for`` seconds later, or only when ``back()`` is
    called (``down_for`` None)."""

    def __init__(self, server: LakeFSServer, at, down_for: float | None) -> None:
        self.lakefs_server = server
        self.at = at
        self.down_for = down_for
        self.restarted = threading.Event()
        self.hit = threading.Event()
        super().__init__(server.endpoint, self._at)

    def _at(self, method: str, path: str, seen) -> bool:
        if not self.hit.is_set() and self.at(method, path, seen):
            self.hit.set()
            self.lakefs_server.stop()
            if self.down_for is not None:
                time.sleep(self.down_for)
                self.back()
        return False  # forwarded: answered by the restarted lakeFS, or refused while it is down

    def back(self) -> None:
        if not self.restarted.is_set():
            self.lakefs_server.start()
            self.restarted.set()


@pytest.mark.parametrize(("point", "down_for"), [("walk", 0.0), ("mark", 0.0), ("recheck", 0.0), ("recheck", None)],
                         ids=["restarted-in-the-walk", "restarted-in-the-mark", "restarted-at-the-recheck",
                              "down-through-the-recheck"])
def test_lakefs_restarted_or_down_during_a_run(world, redis_client, point, down_for):
    store, server = world
    lake = Lake(server, store, paths=12)
    proxy = RestartingLakeFS(server, RESTART_AT[point], down_for)
    try:
        before = lake.data_keys()
        gc = settings(store, store.endpoint)
        runs = GCRuns(redis_client, f"t-{uuid.uuid4().hex[:6]}")
        metrics = fresh_metrics()
        try:
            summary = execute(gc, GCRequest(lake.repo), connection=connection(proxy.url), runs=runs,
                              metrics=metrics)
            outcome = f"complete ({summary.swept} deleted)"
            assert summary.success and lake.data_keys() == before - lake.garbage
        except GCError as exc:
            outcome = f"failed: {exc}"
            assert exc.reason in ("recheck", "lakefs-unavailable"), exc.reason
            assert failures(metrics, lake.repo, exc.reason) == 1
            assert "unreachable" in str(exc) and "Traceback" not in str(exc), str(exc)
            if point == "recheck":
                assert "nothing deleted" in str(exc), str(exc)
            proxy.back()
            assert lake.data_keys() == before
        assert proxy.hit.is_set(), f"the run never reached its {point}"
        if down_for is None:
            assert outcome.startswith("failed"), "lakeFS was down for the whole re-check, yet the run went on"
        assert lake.lost() == []
        again = execute(gc, GCRequest(lake.repo), connection=connection(server.endpoint), runs=runs, metrics=metrics)
        assert again.success and lake.data_keys() == before - lake.garbage and lake.lost() == []
        print(f"RELIABILITY lakefs-{'down' if down_for is None else 'restarted'}-at-{point}: runs 2, faults 1, "
              f"read back {len(lake.survive)}, lost 0, failed re-runs 0; first run {outcome[:80]}")
    finally:
        proxy.back()
        proxy.die()
        lake.close()


def test_a_run_killed_while_its_delete_batch_is_in_flight(world, redis_server, redis_client):
    """SIGKILL of `gc run` while the store holds its batch delete (the request reaches the store after its sender
    is dead, as a slow store does): only planned garbage goes, and the next run reports the dead one and
    converges."""
    store, server = world
    lake = Lake(server, store)
    seed = random.randrange(1 << 30)
    try:
        before = lake.data_keys()
        proxy = ThrottlingProxy(store.endpoint, "s3", first=1, stall=3.0).start()  # the first batch delete
        try:
            env = janitor_env(server, redis_server.url, **store.janitor_env(proxy.url))
            proc = subprocess.Popen([*CLI, "gc", "run", f"lakefs://{lake.repo}", "--min-age", "0s", "--runner",
                                     "threads"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            deadline = time.monotonic() + 120
            while proxy.throttled == 0 and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            assert proxy.throttled == 1, f"the run never sent its delete ({proc.poll()})"
            time.sleep(random.Random(seed).uniform(0, 1.5))
            proc.kill()
            proc.wait()
            time.sleep(3.5)  # the held request reaches the store after its sender died
        finally:
            proxy.cleanup()
        gone = before - lake.data_keys()
        assert gone <= lake.garbage, f"seed {seed}: deleted what is not garbage: {sorted(gone - lake.garbage)[:5]}"
        assert lake.lost() == []
        again = subprocess.run([*CLI, "gc", "run", f"lakefs://{lake.repo}", "--min-age", "0s", "--runner",
                                "threads"], env=janitor_env(server, redis_server.url, **store.janitor_env()),
                               capture_output=True, text=True, timeout=300)
        assert again.returncode == 0, again.stdout + again.stderr
        assert lake.data_keys() == before - lake.garbage and lake.lost() == []
        assert any(e.get("reason") == "died" for e in GCRuns(redis_client, "lakefs-janitor").history(lake.repo))
        print(f"RELIABILITY killed-mid-batch (S3): runs 2, kills 1, deleted by the dead run's batch {len(gone)}, "
              f"read back {len(lake.survive)}, lost 0, failed re-runs 0")
    finally:
        lake.close()


def test_a_cache_whose_sizes_cannot_be_listed_is_ignored_and_the_run_goes_on(world, redis_client):
    """The mark cache is an optimisation: when ``_lakefs/`` cannot be listed to check it (here: access denied to
    that one listing), the run reads every range itself, plans the same, and keeps the cache it could not check."""
    store, server = world
    lake = Lake(server, store, paths=12)
    denied = (403, {"Content-Type": "application/xml"}, b'<?xml version="1.0" encoding="UTF-8"?>\n<Error>'
              b"<Code>AccessDenied</Code><Message>Access Denied</Message><RequestId>fault</RequestId></Error>")

    def lakefs_listing(method: str, target: str) -> bool:
        query = parse_qs(urlsplit(target).query)
        return method == "GET" and query.get("prefix", [""])[0].endswith("/_lakefs/")

    try:
        runs = GCRuns(redis_client, f"t-{uuid.uuid4().hex[:6]}")
        first = execute(settings(store, store.endpoint), GCRequest(lake.repo, dry_run=True),
                        connection=connection(server.endpoint), runs=runs)
        assert first.cache.get("written") is True, first.cache
        proxy = ThrottlingProxy(store.endpoint, "s3", first=10**6, match=lakefs_listing, answer=denied).start()
        try:
            summary = execute(settings(store, proxy.url), GCRequest(lake.repo), connection=connection(server.endpoint),
                              runs=runs)
        finally:
            proxy.cleanup()
        assert proxy.throttled >= 1, "the _lakefs/ listing was never made"
        assert summary.cache["state"] == "ignored" and "listing _lakefs/ failed" in summary.cache["reason"], \
            summary.cache
        assert summary.success and summary.swept == first.num_deleted_objects == len(lake.garbage)
        assert lake.lost() == []
    finally:
        lake.close()
