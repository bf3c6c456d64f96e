"""A GC on Spark whose starter died must stop deleting: spark-submit dies with the process that started it
(Linux's parent-death signal), and a driver that outlived it anyway (cluster mode, no prctl) stops through the
run's lease, within one batch. The next run exits 0 and reports the dead one."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis

from spark_jobs.engine.request import RunRequest
from spark_jobs.engine.runtime.context import GCError
from spark_jobs.engine.stores import StorageConfig, open_namespace
from spark_jobs.engine.sweep.lease_watch import LeaseRef
from tests.gc_engine import Collector
from tests.services import LakeFSServer, janitor_env
from tests.spark.cluster import spark_env
from tests.spark.history import build_history
from workers.gc.history import GCRuns
from workers.gc.run import storage_config
from workers.gc.submit import run_gc
from workers.shared.settings import GCSettings


@pytest.fixture
def history(lakefs) -> Iterator[str]:
    name = f"orph-{uuid.uuid4().hex[:10]}"
    build_history(lakefs, repository_id=name, storage_namespace=f"local://{name}", now=datetime.now(UTC))
    yield name
    lakefs.repositories.delete_repository(name, force=True)


def data_keys(lakefs_server: LakeFSServer, repo: str) -> set[str]:
    ns = open_namespace(StorageConfig(f"local://{repo}", str(lakefs_server.dir / "block")))
    return {o.key for o in ns.list_data()}


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_driver_whose_starter_stopped_renewing_deletes_nothing(history, lakefs_conn, local_spark, redis_server,
                                                                  lakefs_server, submit_env):
    """The lease as a driver in cluster mode sees it when its starter is gone: no renewal for 10 s."""
    client = redis.Redis.from_url(redis_server.url)
    key = f"lakefs-janitor:lock:gc:{history}"
    client.set(key, "t", px=50_000)
    before = data_keys(lakefs_server, history)
    request = RunRequest(history, "full", min_age=timedelta(0),
                         lease=LeaseRef(redis_server.url, key, "t", lease_ms=60_000, stale_ms=5_000))
    with pytest.raises(GCError) as err:
        run_gc(spark=local_spark, lakefs=lakefs_conn, request=request, storage=storage_config(GCSettings()),
               env=submit_env)
    assert err.value.reason == "lease-lost" and "not renewed its lease" in str(err.value), err.value
    assert data_keys(lakefs_server, history) == before


STARTER = """
import sys
from workers.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_killing_the_starter_kills_spark_submit_and_the_next_run_finishes(history, lakefs, lakefs_server,
                                                                          redis_server):
    env = spark_env(janitor_env(lakefs_server, redis_server.url), LAKEFS_JANITOR_SPARK__MASTER="local[2]",
                    LAKEFS_JANITOR_SPARK__RANGE_NUM_PARTITIONS="4", LAKEFS_JANITOR_SPARK__ADDRESS_NUM_PARTITIONS="4")
    before = data_keys(lakefs_server, history)
    local = {**env}
    starter = subprocess.Popen([sys.executable, "-c", STARTER, "gc", "run", f"lakefs://{history}", "--runner",
                                "spark", "--min-age", "0s", "--json"], env=local, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        submit: list[int] = []
        while time.monotonic() < deadline and not submit:
            submit = children(starter.pid)
            time.sleep(0.1)
        assert submit, "spark-submit never started"
        time.sleep(1.0)  # the JVM is up and starting the driver
    finally:
        starter.send_signal(signal.SIGKILL)
        starter.wait()
    gone_by = time.monotonic() + 15
    while time.monotonic() < gone_by and any(alive(p) for p in submit):
        time.sleep(0.1)
    assert not any(alive(p) for p in submit), "spark-submit outlived the process that started it"
    after_kill = data_keys(lakefs_server, history)
    time.sleep(5)
    assert data_keys(lakefs_server, history) == after_kill  # nothing deleted any more
    runs = GCRuns(redis.Redis.from_url(redis_server.url), "lakefs-janitor", redis_server.url)
    # The next run, on this host: the dead starter's lease is taken over at once, and the run completes.
    result = subprocess.run([sys.executable, "-c", STARTER, "gc", "run", f"lakefs://{history}", "--runner",
                             "threads", "--min-age", "0s", "--json"], env=local, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert runs.history(history)[1]["reason"] == "died"
    assert data_keys(lakefs_server, history) < before
    # ... and leaves the namespace as an unbroken run would: nothing more to collect
    dry = subprocess.run([sys.executable, "-c", STARTER, "gc", "run", f"lakefs://{history}", "--runner",
                          "threads", "--min-age", "0s", "--dry-run", "--json"], env=local, capture_output=True,
                         text=True, timeout=300)
    assert dry.returncode == 0 and json.loads(dry.stdout)["num_deleted_objects"] == 0, dry.stdout + dry.stderr


def descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        kids = children(todo.pop())
        found += kids
        todo += kids
    return found


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def find(root: int, *needles: str, deadline: float) -> int | None:
    while time.monotonic() < deadline:
        hits = [p for p in descendants(root) if all(n in cmdline(p) for n in needles)]
        if hits:
            return hits[-1]
        time.sleep(0.05)
    return None


@pytest.mark.parametrize("victim", ["driver", "executor"])
def test_a_killed_driver_or_executor_loses_nothing_and_the_next_run_converges(history, lakefs, lakefs_server,
                                                                              redis_server, victim):
    """The driver killed mid-run: the run fails with a clear message, deletes nothing more, the next run
    finishes. A Python worker (the executor side) killed mid-task: Spark retries the task (local[2,3] allows
    three attempts) and the run itself completes."""
    env = spark_env(janitor_env(lakefs_server, redis_server.url), LAKEFS_JANITOR_SPARK__MASTER="local[2,3]",
                    LAKEFS_JANITOR_SPARK__RANGE_NUM_PARTITIONS="4", LAKEFS_JANITOR_SPARK__ADDRESS_NUM_PARTITIONS="4")
    keep = {(ref, path): data for ref, path, data in readable(lakefs, history)}
    starter = subprocess.Popen([sys.executable, "-c", STARTER, "gc", "run", f"lakefs://{history}", "--runner",
                                "spark", "--min-age", "0s", "--json"], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    # the driver JVM (not the launcher that builds its command line, which names the job too)
    needles = ("bin/java", "org.apache.spark.deploy.SparkSubmit") if victim == "driver" else ("pyspark.daemon",)
    target = find(starter.pid, *needles, deadline=time.monotonic() + 90)
    assert target, f"no {victim} process appeared"
    seed = int(os.environ.get("LAKEFS_JANITOR_FAULT_SEED", str(random.randrange(1 << 30))))
    if victim == "driver":  # somewhere in the run: the walk, the mark or the sweep
        time.sleep(random.Random(seed).uniform(0, 1.0))  # the run lasts seconds more
    if victim == "executor":  # a forked worker of the daemon: the process that runs the task's Python
        worker = find(target, "pyspark.daemon", deadline=time.monotonic() + 30)
        target = worker or target
    print(f"seed {seed}: killing the {victim} ({cmdline(target)[:80]})")
    try:
        os.kill(target, signal.SIGKILL)
        hit = True
    except ProcessLookupError:  # the run got there first: then it must have completed, and the checks still hold
        hit = False
    out, err = starter.communicate(timeout=300)
    if victim == "driver" and hit and starter.returncode != 0:
        assert starter.returncode == 1 and "Traceback" not in err and "failed" in err, (out, err)
    else:
        assert starter.returncode == 0, (out, err)
    assert [k for k, data in keep.items() if read_back(lakefs, history, *k) != data] == []
    again = subprocess.run([sys.executable, "-c", STARTER, "gc", "run", f"lakefs://{history}", "--runner",
                            "threads", "--min-age", "0s", "--json"], env=env, capture_output=True, text=True,
                           timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    dry = subprocess.run([sys.executable, "-c", STARTER, "gc", "run", f"lakefs://{history}", "--runner",
                          "threads", "--min-age", "0s", "--dry-run", "--json"], env=env, capture_output=True,
                         text=True, timeout=300)
    assert json.loads(dry.stdout)["num_deleted_objects"] == 0
    assert [k for k, data in keep.items() if read_back(lakefs, history, *k) != data] == []


def read_back(lakefs, repo: str, ref: str, path: str) -> bytes | int:
    try:
        return lakefs.objects.get_object(repo, ref, path)
    except Exception as exc:  # noqa: BLE001 - the SDK's and our client's errors alike
        return getattr(exc, "status", 0) or 0


def readable(lakefs, repo: str):
    """(ref, path, bytes) of every object at every branch HEAD (with staging) and in the last day's commits:
    what the history's retention keeps and a GC must never lose."""
    refs = [b.id for b in lakefs.branches.list_branches(repo, amount=1000).results]
    cutoff = time.time() - 86400
    for b in list(refs):
        refs += [c.id for c in lakefs.refs.log_commits(repo, b, amount=100).results if c.creation_date > cutoff]
    for ref in dict.fromkeys(refs):
        for obj in lakefs.objects.list_objects(repo, ref, amount=1000).results:
            yield ref, obj.path, lakefs.objects.get_object(repo, ref, obj.path)


def test_an_executor_killed_on_the_standalone_cluster_is_replaced_and_the_run_converges(
        history, lakefs, lakefs_server, lakefs_conn, cluster_spark, spark_cluster, submit_env):
    """The executor JVM on the cluster's worker SIGKILLed at a random point of the run: the master gives the
    application a new executor, Spark retries the lost tasks (a batch delete done twice deletes nothing more), and
    the run completes; nothing that must survive is lost, and nothing is left to collect."""
    _, worker = spark_cluster
    keep = {(ref, path): data for ref, path, data in readable(lakefs, history)}
    seed = int(os.environ.get("LAKEFS_JANITOR_FAULT_SEED", str(random.randrange(1 << 30))))
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["summary"] = run_gc(spark=cluster_spark, lakefs=lakefs_conn, env=submit_env,
                                        storage=storage_config(GCSettings()),
                                        request=RunRequest(history, "full", runner="spark", min_age=timedelta(0)))
        except GCError as exc:
            outcome["error"] = exc

    started = threading.Thread(target=run, daemon=True)
    started.start()
    executor = find(worker.proc.pid, "CoarseGrainedExecutorBackend", deadline=time.monotonic() + 120)
    assert executor, "no executor started on the worker"
    time.sleep(random.Random(seed).uniform(0, 1.5))
    print(f"seed {seed}: killing the cluster's executor {executor}")
    try:
        os.kill(executor, signal.SIGKILL)
        hit = True
    except ProcessLookupError:
        hit = False  # the run ended first: it must then have completed
    started.join(600)
    assert not started.is_alive(), "the run did not end after its executor was killed"
    assert "error" not in outcome, f"seed {seed}: {outcome.get('error')}"
    summary = outcome["summary"]
    assert summary.success and summary.phase == "swept", summary
    assert [k for k, data in keep.items() if read_back(lakefs, history, *k) != data] == []
    dry = Collector(lakefs_server.endpoint).run(history, dry_run=True)[0]
    assert dry.num_deleted_objects == 0, f"seed {seed}: the run left garbage behind"
    app = max(worker.work_dir.glob("app-*"), key=lambda p: p.stat().st_mtime)
    print(f"RELIABILITY cluster-executor-killed: runs 1, kills {int(hit)}, executors of the run "
          f"{len(list(app.iterdir()))}, read back {len(keep)}, lost 0, failed re-runs 0")
