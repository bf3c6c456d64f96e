"""A GC run's lease on a real Redis and a real lakeFS: one run per repository, a dead holder freed and reported,
and deleters (threads, Spark executors) that stop within one batch once the run lost its lease."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta

import pytest
import redis

from spark_jobs.engine.runtime.context import GCError, JobConfig
from spark_jobs.engine.stores import StorageConfig
from spark_jobs.engine.sweep.lease_watch import LeaseLost, LeaseRef, LeaseWatch
from spark_jobs.engine.sweep.sweep import open_deleter, unit_delete
from tests.fakes import fresh_metrics
from tests.integration.conftest import commit, upload
from tests.integration.gc.test_gc_threads import old_commit, read, rules
from tests.services import free_port
from workers.gc.history import GCRuns
from workers.gc.run import Busy, GCRequest, execute
from workers.shared.metrics import Metrics
from workers.shared.settings import GCSettings, LakeFSConnection

PREFIX = "lakefs-janitor"


@pytest.fixture
def connection(lakefs_server) -> LakeFSConnection:
    from tests.services import ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY  # noqa: PLC0415

    return LakeFSConnection(endpoint_url=lakefs_server.endpoint, access_key_id=ADMIN_ACCESS_KEY,
                            secret_access_key=ADMIN_SECRET_KEY)


@pytest.fixture
def runs(redis_client, redis_server) -> GCRuns:
    return GCRuns(redis_client, PREFIX, redis_server.url)


def garbage(lakefs, repo) -> str:
    """One object outside retention (a.txt v1 of a 30-day-old commit: main's HEAD 7 days ago is the 20-day-old
    one); returns that commit."""
    upload(lakefs, repo, "main", "a.txt", b"v1")
    first = old_commit(lakefs, repo, "main", 30)
    upload(lakefs, repo, "main", "a.txt", b"v2")
    old_commit(lakefs, repo, "main", 20)
    upload(lakefs, repo, "main", "a.txt", b"v3")
    commit(lakefs, repo, "main", "now")
    rules(lakefs, repo, default=7)
    return first.id


def metric(metrics: Metrics, repo: str, reason: str) -> float:
    return metrics.gc_failures.labels(repo, reason)._value.get()


def test_the_watch_refuses_a_lease_that_is_gone_taken_stale_or_unconfirmable(redis_client, redis_server):
    key = f"{PREFIX}:lock:gc:watch-test"
    ref = LeaseRef(redis_server.url, key, "mine", lease_ms=60_000, stale_ms=5_000)
    with pytest.raises(LeaseLost, match="no longer holds"):
        LeaseWatch(ref).check()
    redis_client.set(key, "mine", px=60_000)
    LeaseWatch(ref).check()  # just renewed: fine
    redis_client.set(key, "theirs", px=60_000)
    with pytest.raises(LeaseLost, match="no longer holds"):
        LeaseWatch(ref).check()
    redis_client.set(key, "mine", px=50_000)  # last renewed 10 s ago
    with pytest.raises(LeaseLost, match=r"not renewed its lease for 1\d\.\ds"):
        LeaseWatch(ref).check()
    down = LeaseRef(f"redis://127.0.0.1:{free_port()}/0", key, "mine", 60_000, 5_000)
    with pytest.raises(LeaseLost, match="could not be confirmed"):
        LeaseWatch(down).check()
    redis_client.delete(key)


def test_every_batch_checks_the_lease_first(lakefs, gc, repo, namespace, local_root, redis_client, redis_server):
    for i in range(3):
        upload(lakefs, repo, "main", f"x{i}", b"x")
    keys = sorted(o.key for o in namespace.list_data())
    assert len(keys) == 3
    key = f"{PREFIX}:lock:gc:{repo}"
    ref = LeaseRef(redis_server.url, key, "tok", lease_ms=60_000, stale_ms=5_000)
    redis_client.set(key, "tok", px=60_000)
    config = JobConfig(gc.api, StorageConfig(f"local://{repo}", local_root), repo)
    ctx = open_deleter(config, ref)
    try:
        assert unit_delete(ctx, keys[:1])[0]["deleted"] == 1
        redis_client.set(key, "another-run", px=60_000)  # the lease changed hands between two batches
        with pytest.raises(LeaseLost):
            unit_delete(ctx, keys[1:])
    finally:
        ctx.close()
        redis_client.delete(key)
    left = {o.key for o in namespace.list_data()}
    assert left == set(keys[1:])  # the second batch was never sent


def test_a_run_that_lost_its_lease_deletes_nothing_on_either_runner(lakefs, any_runner_gc, repo, namespace,
                                                                     redis_client, redis_server):
    first = garbage(lakefs, repo)
    key = f"{PREFIX}:lock:gc:{repo}"
    redis_client.set(key, "tok", px=50_000)  # the starter has not renewed for 10 s: it is gone
    ref = LeaseRef(redis_server.url, key, "tok", lease_ms=60_000, stale_ms=5_000)
    try:
        with pytest.raises(GCError) as err:  # on both runners: an executor's LeaseLost is classified as the threads'
            any_runner_gc._go(repo, "full", min_age=timedelta(0), lease=ref)
        assert "not renewed its lease" in str(err.value) and err.value.reason == "lease-lost"
    finally:
        redis_client.delete(key)
    assert read(lakefs, repo, first, "a.txt") == b"v1"  # garbage, but this run no longer owned the repository


def test_a_busy_repository_names_its_holder_and_fails_nothing(lakefs, repo, runs, connection):
    garbage(lakefs, repo)
    holder = runs.lease(repo, 30)
    holder.acquire()
    try:
        with pytest.raises(Busy, match=rf"another GC of lakefs://{repo} is running \(pid {os.getpid()} on "):
            execute(GCSettings(min_age="0s"), GCRequest(repo), connection=connection, runs=runs)
        assert runs.history(repo) == []
        assert runs.lease_state(repo)[0] == "running"
    finally:
        holder.release()
    assert runs.lease_state(repo) == ("idle", None)


HOLD = """
import sys, time, redis
from workers.gc.history import GCRuns
lease = GCRuns(redis.Redis.from_url(sys.argv[1]), sys.argv[2]).lease(sys.argv[3], 600)
lease.acquire()
print("held", flush=True)
time.sleep(600)
"""


def test_a_holder_killed_on_this_host_is_taken_over_at_once_and_reported(lakefs, repo, runs, connection,
                                                                         redis_server):
    first = garbage(lakefs, repo)
    proc = subprocess.Popen([sys.executable, "-c", HOLD, redis_server.url, PREFIX, repo], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert runs.lease_state(repo)[0] == "running"  # its 10-minute lease is still there
    metrics = fresh_metrics()
    summary = execute(GCSettings(min_age="0s"), GCRequest(repo), connection=connection, runs=runs, metrics=metrics)
    assert summary.success and summary.swept == 1
    assert read(lakefs, repo, first, "a.txt") == 410
    latest, died = runs.history(repo)[:2]
    assert latest["success"] is True
    assert died["reason"] == "died" and f"pid {proc.pid} on " in died["error"]
    assert metric(metrics, repo, "died") == 1
    assert runs.lease_state(repo) == ("idle", None)


def test_a_holder_elsewhere_frees_the_repository_when_its_lease_runs_out(lakefs, repo, runs, connection):
    first = garbage(lakefs, repo)
    key, holder_key = f"{PREFIX}:lock:gc:{repo}", f"{PREFIX}:gc-holder:{repo}"
    runs.redis.set(key, "t-elsewhere", px=3000)
    runs.redis.set(holder_key, json.dumps({"token": "t-elsewhere", "host": "worker-7", "pid": 1,
                                           "process_start": "1", "boot_id": "b", "pid_namespace": "p",
                                           "started_at": "2026-11-23T00:00:00+00:00", "mode": "run"}))
    settings = GCSettings(min_age="0s", lease_seconds=3)
    with pytest.raises(Busy, match=r"pid 1 on worker-7.*free within [0-3]s"):
        execute(settings, GCRequest(repo), connection=connection, runs=runs)
    assert runs.lease_state(repo)[0] == "running"
    time.sleep(3.2)
    assert runs.lease_state(repo)[0] == "died"  # what `gc show` reports before the next run
    summary = execute(settings, GCRequest(repo), connection=connection, runs=runs)
    assert summary.success and read(lakefs, repo, first, "a.txt") == 410
    assert runs.history(repo)[1]["reason"] == "died"


def test_failures_are_recorded_with_their_reason_counted_and_free_the_repository(runs):
    nowhere = LakeFSConnection(endpoint_url=f"http://127.0.0.1:{free_port()}", access_key_id="AKIAIOSFODNN7EXAMPLE",
                               secret_access_key="wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    metrics = fresh_metrics()
    repo = f"missing-{time.time_ns()}"
    for runner in ("threads", "auto"):
        with pytest.raises(GCError, match="unreachable") as err:
            execute(GCSettings(), GCRequest(repo, runner=runner), connection=nowhere, runs=runs, metrics=metrics)
        assert err.value.reason == "lakefs-unavailable"
    entry = runs.history(repo)[0]
    assert entry["success"] is False and entry["reason"] == "lakefs-unavailable" and "unreachable" in entry["error"]
    assert metric(metrics, repo, "lakefs-unavailable") == 2
    assert runs.lease_state(repo) == ("idle", None)  # the second run was not refused as busy


def test_renamed_lock_setting_is_refused_with_the_new_name():
    from pydantic import ValidationError  # noqa: PLC0415

    with pytest.raises(ValidationError, match="gc.lease_seconds"):
        GCSettings(lock_seconds=60)


def test_renewals_keep_a_long_run_alive(redis_client, redis_server):
    lease = GCRuns(redis_client, PREFIX, redis_server.url).lease(f"renew-{time.time_ns()}", 3)
    lease.acquire()
    try:
        time.sleep(4)  # longer than the lease: only renewals keep it
        LeaseWatch(lease.ref()).check()
    finally:
        lease.release()
    with pytest.raises(LeaseLost):
        LeaseWatch(lease.ref()).check()
    assert isinstance(redis_client, redis.Redis)


def test_gc_show_names_a_run_that_is_running_or_died(cli, repo, runs):
    lease = runs.lease(repo, 30)
    lease.acquire()
    try:
        assert f"running now: pid {os.getpid()} on " in cli("gc", "show", f"lakefs://{repo}").output
    finally:
        lease.release()
    runs.redis.set(f"{PREFIX}:gc-holder:{repo}", json.dumps({
        "token": "t", "host": "worker-7", "pid": 12, "process_start": "1", "boot_id": "b", "pid_namespace": "p",
        "started_at": "2026-11-23T00:00:00+00:00", "mode": "run"}))
    out = cli("gc", "show", f"lakefs://{repo}").output
    assert "died: the run of pid 12 on worker-7, started 2026-11-23T00:00:00+00:00 stopped renewing" in out
    runs.redis.delete(f"{PREFIX}:gc-holder:{repo}")
