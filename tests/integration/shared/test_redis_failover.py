"""Redis behind Sentinel (primary, replica, three Sentinels, all with passwords) and its primary SIGKILLed under
load: the receiver answers 200 or 503 and recovers by itself, the Celery worker consumes what is queued after the
switch, beat fires the next schedule once. Each test prints a ``RELIABILITY`` line (README's reliability table)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import lakefs_sdk
import pytest
import requests

from spark_jobs.engine.runtime.context import GCError
from spark_jobs.engine.runtime.redis_ack import Acknowledged
from spark_jobs.engine.sweep.lease_watch import LeaseLost, LeaseRef, LeaseWatch
from tests.fakes import fresh_metrics
from tests.gc_engine import RUNNERS
from tests.integration.conftest import commit, create_branch, upload
from tests.integration.gc.test_gc_lease import garbage
from tests.integration.gc.test_gc_threads import read
from tests.integration.shared.test_redis_connection_reset import settle
from tests.services import (
    ADMIN_ACCESS_KEY,
    ADMIN_SECRET_KEY,
    WEBHOOK_SECRET,
    CeleryWorker,
    LakeFSServer,
    ReceiverServer,
    RedisNode,
    RedisSentinelCluster,
    janitor_env,
    wait_until,
)
from workers.branch_lifecycle.policies import parse_policies
from workers.branch_lifecycle.run import LifecycleOptions, run_repository
from workers.branch_lifecycle.store import set_policies
from workers.celery.app import create_celery
from workers.gc.history import GCRuns
from workers.gc.run import GCRequest, execute
from workers.idle_clock.reconcile import reconcile_repository
from workers.idle_clock.store import ClockStore
from workers.shared.locks import named_lock, release_quietly, still_held
from workers.shared.redis_clients import redis_client
from workers.shared.settings import GCSettings, LakeFSConnection, load_settings

HEADERS = {"X-Lakefs-Janitor-Secret": WEBHOOK_SECRET}


@pytest.fixture(scope="module")
def ha() -> Iterator[RedisSentinelCluster]:
    cluster = RedisSentinelCluster().start()
    yield cluster
    cluster.cleanup()


@pytest.fixture(autouse=True)
def healed(ha: RedisSentinelCluster) -> Iterator[None]:
    """Each test starts on a whole cluster, even after one that failed half-way through a failover."""
    ha.heal()
    yield


@pytest.fixture(scope="module")
def ha_env(lakefs_server: LakeFSServer, ha: RedisSentinelCluster) -> dict[str, str]:
    # Reconcile every minute: the beat entry whose next firing after the switch the test counts.
    return janitor_env(lakefs_server, ha.url, **ha.env(), LAKEFS_JANITOR_RECONCILE_SCHEDULE="* * * * *")


@pytest.fixture(scope="module")
def ha_receiver(ha_env: dict[str, str]) -> Iterator[ReceiverServer]:
    server = ReceiverServer(ha_env).start()
    yield server
    server.cleanup()


@pytest.fixture(scope="module")
def ha_worker(ha_env: dict[str, str]) -> Iterator[CeleryWorker]:
    worker = CeleryWorker(ha_env, beat=True).start()
    yield worker
    worker.cleanup()


def hook(repo: str, branch: str) -> dict:
    now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    return {"event_type": "post-create-branch", "event_time": now, "action_name": "lakefs-janitor", "hook_id": "h",
            "repository_id": repo, "branch_id": branch, "source_ref": "main", "commit_id": f"c-{branch}"}


class HookStream:
    """Posts hooks, one new branch each, as fast as the receiver answers; remembers each answer and when."""

    def __init__(self, url: str, repo: str) -> None:
        self.url, self.repo = url, repo
        self.answers: list[tuple[float, str, int]] = []  # (monotonic time answered, branch, status)
        self.waits: list[float] = []  # seconds each answer took
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            branch = f"b{i:05d}"
            sent = time.monotonic()
            try:
                status = requests.post(f"{self.url}/webhooks/lakefs", json=hook(self.repo, branch),
                                       headers=HEADERS, timeout=30).status_code
            except requests.RequestException:
                status = 0  # no answer at all: counted, and fails the test
            self.answers.append((time.monotonic(), branch, status))
            self.waits.append(time.monotonic() - sent)
            i += 1

    def __enter__(self) -> HookStream:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)


def settings_for(ha_env: dict[str, str], monkeypatch) -> object:
    """The janitor's settings on the Sentinel-managed Redis, as the worker and the receiver read them."""
    for key, value in ha_env.items():
        monkeypatch.setenv(key, value)
    return load_settings()


def idle_after_a_day(lakefs, repo: str, settings, pattern: str) -> ClockStore:
    """A lifecycle policy deleting branches matching ``pattern`` idle for a day; the idle clocks' store."""
    set_policies(lakefs, repo, parse_policies({"policies": [{"id": "p", "patterns": [pattern],
                                                             "max_idle_age": "1d"}]}, "main"))
    return ClockStore(redis_client(settings), settings.key_prefix)


def beat_sends(worker: CeleryWorker) -> list[str]:
    """The minute (log time, to the minute) of each reconcile_all beat sent."""
    text = worker.log.read_text(errors="replace")
    return re.findall(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d):\d\d[^\]]*\] Scheduler: Sending due task [^\n]*reconcile_all",
                      text)


def test_primary_killed_while_hooks_stream_in(ha, ha_env, ha_receiver, ha_worker, lakefs, repo, monkeypatch):
    settings = settings_for(ha_env, monkeypatch)
    app = create_celery(settings)
    assert app.send_task("workers.idle_clock.tasks.reconcile_repository", args=(repo,)).get(timeout=60)
    hooks_repo = f"ha-{uuid.uuid4().hex[:10]}"

    with HookStream(ha_receiver.url, hooks_repo) as stream:
        time.sleep(1.5)
        killed_at = time.monotonic()
        old = ha.failover()
        switched_at, switched_wall = time.monotonic(), time.time()
        # Queued after the switch: the worker must consume it (and the result come back through the new primary).
        after = app.send_task("workers.idle_clock.tasks.reconcile_repository", args=(repo,))
        # Its supervisor restarts the killed node: a replica again, hooks are acknowledged by it again (until then
        # the new primary has no replica to acknowledge a write, and hooks are answered 503). So is the reconcile's
        # lock: until then the task is refused (Unconfirmed) and retried, as on a Redis blip.
        ha.restore(old)
        restored_at = time.monotonic()
        assert after.get(timeout=60) is not None
        time.sleep(2)
    statuses = Counter(status for _, _, status in stream.answers)
    assert set(statuses) <= {200, 503}, statuses
    clock = ClockStore(redis_client(settings), settings.key_prefix)
    recorded = clock.known_branches(hooks_repo)
    ok = [(t, b) for t, b, s in stream.answers if s == 200]
    after_switch = [b for t, b in ok if t > restored_at]
    lost = [b for t, b in ok if b not in recorded]
    assert after_switch, "no hook answered 200 once the killed node was a replica again"
    assert not lost, f"answered 200 and lost: {lost}"  # a replica had acknowledged each one

    # Beat: the first reconcile_all due after the switch is sent once, not once per reconnect.
    switch_minute = time.strftime("%Y-%m-%d %H:%M", time.gmtime(switched_wall))
    wait_until(lambda: [m for m in beat_sends(ha_worker) if m > switch_minute], 90, "the next beat firing",
               ha_worker.proc, ha_worker.log)
    time.sleep(5)  # a duplicate would follow within seconds
    sends = Counter(m for m in beat_sends(ha_worker) if m > switch_minute)
    first_minute = min(sends)
    assert sends[first_minute] == 1, sends
    print(f"RELIABILITY redis-failover-hooks: primary SIGKILLed, switch {switched_at - killed_at:.1f}s, hooks "
          f"{len(stream.answers)} (200: {statuses[200]}, 503: {statuses[503]}, other: "
          f"{sum(v for k, v in statuses.items() if k not in (200, 503))}), answered 200 and lost {len(lost)}, "
          f"slowest answer {max(stream.waits):.1f}s, worker consumed the task queued after the switch: yes, beat "
          f"sends of the next minute: {sends[first_minute]}")


# When the frozen primary resumes, counted from the Sentinels' promotion of the replica: at once, a few seconds
# later, or never during the stream (it stays hung; thawed only to clean up).
RESUMES = {"at-once": 0.0, "after-3s": 3.0, "never": None}
# lakeFS gives up on a hook after its time-out; the receiver answers well inside it (REDIS_RETRY_SECONDS, 3 s by
# default, plus one attempt's 1 s): not a speed check, the bound past which an answer is no answer.
ANSWER_BOUND_SECONDS = 8.0


@pytest.mark.parametrize("resume", list(RESUMES))
def test_primary_frozen_while_hooks_stream_in(ha, ha_env, ha_receiver, monkeypatch, resume):
    """The primary SIGSTOPped under a steady stream of hooks (a VM pause, a partition, a long fork look the same):
    the Sentinels promote the replica; the old primary resumes (its pending commands then run on it, and are
    thrown away when the Sentinels demote it) or stays hung. Every hook answered 200 is readable afterwards, and
    every hook is answered, 200 or 503, within a few seconds."""
    settings = settings_for(ha_env, monkeypatch)
    hooks_repo = f"hf-{uuid.uuid4().hex[:10]}"
    with HookStream(ha_receiver.url, hooks_repo) as stream:
        time.sleep(1.5)
        frozen_at = time.monotonic()
        old = ha.freeze()
        promoted_at = time.monotonic()
        if RESUMES[resume] is None:
            time.sleep(8)
        else:
            time.sleep(RESUMES[resume])
            ha.thaw(old)
            wait_until(lambda: ha.demoted(old), 60, "the old primary demoted and in sync")
            time.sleep(2)  # hooks acknowledged by the demoted node, now a replica
        ended_at = time.monotonic()
    ha.thaw(old)
    ha.wait_healthy(60)
    statuses = Counter(status for _, _, status in stream.answers)
    clock = ClockStore(redis_client(settings), settings.key_prefix)
    recorded = clock.known_branches(hooks_repo)
    ok = [b for _, b, s in stream.answers if s == 200]
    lost = [b for b in ok if b not in recorded]
    during = [(t, b, s) for t, b, s in stream.answers if frozen_at < t <= ended_at]
    print(f"RELIABILITY redis-frozen-primary-hooks ({resume}): primary SIGSTOPped, promotion after "
          f"{promoted_at - frozen_at:.1f}s, hooks {len(stream.answers)} (200: {statuses[200]}, 503: {statuses[503]}, "
          f"other: {sum(v for k, v in statuses.items() if k not in (200, 503))}; from the freeze on: "
          f"{sum(s == 200 for _, _, s in during)} x 200, {sum(s == 503 for _, _, s in during)} x 503), answered 200 "
          f"and lost {len(lost)}, slowest answer {max(stream.waits):.1f}s")
    assert set(statuses) <= {200, 503}, statuses
    assert not lost, f"answered 200 and lost: {lost[:20]} ({len(lost)})"
    assert max(stream.waits) < ANSWER_BOUND_SECONDS, sorted(stream.waits)[-5:]
    if RESUMES[resume] is not None:
        assert any(s == 200 for t, _, s in stream.answers if t > ended_at - 2), "no 200 once it was a replica again"


class Faults(threading.Thread):
    """``cycles`` times: the primary SIGKILLed (a failover) and restarted as a replica, then every Sentinel
    restarted in turn, each time waiting until a task sent afterwards came back. A thread of its own while the
    test's thread sends the tasks (see test_redis_connection_reset.Restarts for why that way round)."""

    def __init__(self, ha: RedisSentinelCluster, worker: CeleryWorker, cycles: int, consumed: list[float]) -> None:
        super().__init__(daemon=True)
        self.ha, self.worker, self.cycles, self.consumed = ha, worker, cycles, consumed
        self.stuck: str | None = None

    def _consumed_after(self, what: str) -> bool:
        moment = time.monotonic()
        while not any(sent > moment for sent in self.consumed):
            if self.worker.proc.poll() is not None or time.monotonic() - moment > 60:
                exited = self.worker.proc.poll() is not None
                self.stuck = f"after {what}: the worker {'exited' if exited else 'consumed nothing for 60 s'}"
                return False
            time.sleep(0.05)
        return True

    def run(self) -> None:
        for i in range(self.cycles):
            old = self.ha.failover()
            # The killed node back as a replica first: the tasks' locks are taken only once a replica acknowledged
            # them (until then they are refused and retried: not consumed within the test's few seconds).
            self.ha.restore(old)
            if not self._consumed_after(f"failover {i + 1}"):
                return
            for sentinel in self.ha.sentinels:
                sentinel.stop()
                sentinel.start()
            self.ha.wait_healthy(60)
            if not self._consumed_after(f"the Sentinels' restart {i + 1}"):
                return


def test_the_worker_rides_through_failovers_and_sentinel_restarts(ha, ha_env, ha_worker, repo, monkeypatch):
    """Tasks flowing while the primary fails over and the Sentinels restart, again and again: the worker (on the
    Sentinel transport) neither exits nor stops consuming."""
    app = create_celery(settings_for(ha_env, monkeypatch))
    app.send_task("workers.idle_clock.tasks.reconcile_repository", args=(repo,)).get(timeout=60)
    consumed: list[float] = []
    faults = Faults(ha, ha_worker, int(os.environ.get("LAKEFS_JANITOR_FAILOVER_CYCLES", "4")), consumed)
    started = time.monotonic()
    faults.start()
    while faults.is_alive():
        sent = time.monotonic()
        try:
            results = [app.send_task("workers.idle_clock.tasks.reconcile_repository", args=(repo,)) for _ in range(4)]
        except Exception:  # noqa: BLE001 - publishing gave up during a switch
            time.sleep(0.2)
            continue
        for result in results:
            try:
                result.get(timeout=4, propagate=False)
                consumed.append(sent)
            except Exception:  # noqa: BLE001, S110 - lost with the old primary, or its result was
                pass
            finally:
                settle(app, result)
    assert faults.stuck is None, f"{faults.stuck}\n{ha_worker.log.read_text()[-3000:]}"
    assert ha_worker.proc.poll() is None
    print(f"RELIABILITY redis-failover-worker: {faults.cycles} failovers (primary SIGKILLed) and {faults.cycles} "
          f"restarts of the three Sentinels in {time.monotonic() - started:.0f} s under {len(consumed)} tasks: "
          f"worker exits 0, it consumed again after each")


def test_a_lock_renewed_while_the_primary_hangs_reaches_the_new_primary(ha, ha_env, monkeypatch):
    """A worker's lock (lifecycle runs, object lifecycle, GC's edit locks) renewed while the primary is frozen:
    after one socket time-out the retry asks the Sentinels again and renews it on the promoted replica (redis-py
    8.1 alone kept reconnecting to the frozen address: 5 retries, 62 s, then TimeoutError)."""
    settings = settings_for(ha_env, monkeypatch)
    client = redis_client(settings)  # the worker's client: 10 s time-out, redis-py's retries
    lock = named_lock(client, f"ha-{uuid.uuid4().hex[:6]}", "run", seconds=120)
    assert lock.acquire()
    client.wait(1, 5000)  # on the replica too: the failover keeps it
    frozen = ha.primary()
    os.killpg(frozen.proc.pid, signal.SIGSTOP)
    started = time.monotonic()
    try:
        held = still_held(lock)()
        took = time.monotonic() - started
    finally:
        ha.thaw(frozen)
    assert held
    assert ha.primary_port() != frozen.port
    print(f"RELIABILITY redis-frozen-primary-lock: a lock renewed while the primary hangs: renewed on the promoted "
          f"replica after {took:.1f}s (one 10 s socket time-out, then the Sentinels asked again)")
    release_quietly(lock, "test")


@pytest.mark.parametrize(("which", "names"), [("redis", "LAKEFS_JANITOR_REDIS_URL"),
                                               ("sentinel", "LAKEFS_JANITOR_REDIS_SENTINEL_PASSWORD")])
def test_a_wrong_password_is_a_clear_error_at_start_up(ha, ha_env, which, names):
    env = dict(ha_env)
    if which == "redis":
        env["LAKEFS_JANITOR_REDIS_URL"] = ha.url.replace(ha.password, "wrong-password")
    else:
        env["LAKEFS_JANITOR_REDIS_SENTINEL_PASSWORD"] = "wrong-password"
    for command in (["-m", "workers.cli", "serve", "--bind", "127.0.0.1:1"],
                    ["-m", "celery", "-A", "workers.celery.worker", "worker", "--pool", "solo"]):
        out = subprocess.run([sys.executable, *command], env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode != 0, out
        assert names in out.stderr and "wrong-password" not in out.stderr, out.stderr[-2000:]
        assert "Traceback" not in out.stderr, out.stderr[-2000:]


def test_a_gc_lease_across_a_failover(ha, ha_env, monkeypatch):
    """The run's lease on the new primary: the deleters (here the watch a Spark job builds from the lease's URL)
    go on only while it is confirmed; a lease the failover lost stops them before their next batch, and the
    next run of the repository can start."""
    settings = settings_for(ha_env, monkeypatch)
    runs = GCRuns(redis_client(settings), f"ha-{uuid.uuid4().hex[:6]}", settings.redis_client_url())
    lease = runs.lease("repo", lease_seconds=10)
    lease.acquire()
    watch = LeaseWatch(LeaseRef.from_json(lease.ref().to_json()))  # what travels to a Spark job
    try:
        watch.check()
        killed_at = time.monotonic()
        old = ha.failover()
        try:
            watch.check()  # replicated before the kill: confirmed on the new primary
            survived = True
        except LeaseLost:  # its write lost with the old primary: the deleters stop
            survived = False
        time.sleep(lease.renew_seconds * 3)
        if survived:
            watch.check()  # renewals reach the new primary
            assert not lease.lost.is_set()
        # A lease the failover lost (replication is asynchronous): the same as its key gone on the new primary.
        runs.redis.delete(runs._lease_keys("repo")[0])
        with pytest.raises(LeaseLost, match="no longer holds"):
            watch.check()
        wait_until(lease.lost.is_set, 10, "the starter to see its lease lost")
    finally:
        lease.release()
        watch.close()
    nxt = runs.lease("repo", lease_seconds=10)
    nxt.acquire()  # the next run starts (and converges: it re-marks and sweeps what the stopped one left)
    nxt.release()
    print(f"RELIABILITY redis-failover-gc-lease: primary SIGKILLed, lease confirmed on the new primary: "
          f"{'yes' if survived else 'no (lost, deleters stopped)'}, a lost lease stopped the deleters before their "
          f"next batch: yes, next run started: yes ({time.monotonic() - killed_at:.1f}s)")
    ha.restore(old)


def test_a_failover_that_loses_writes_deletes_no_written_branch(ha, ha_env, lakefs, repo, monkeypatch):
    """The replica promoted before it caught up: the clocks of the last hook writes go back in time. The lifecycle
    run's re-check against lakeFS (HEAD moved since the clock's HEAD) keeps every branch written in the lost
    seconds, deletes only the ones really idle, and the reconciler repairs the clocks."""
    settings = settings_for(ha_env, monkeypatch)
    clock = idle_after_a_day(lakefs, repo, settings, "lw-*")
    old_time = datetime.now(UTC) - timedelta(days=10)
    names = [f"lw-{i}" for i in range(6)]
    for name in names:  # idle for 10 days, as their hooks said
        create_branch(lakefs, repo, name)
        clock.record_created(repo, name, old_time, head=dict(lakefs.branch_heads(repo))[name])
    ha.primary().client().wait(1, 5000)  # on the replica too

    replica = ha.cut_replica()
    written = names[:3]
    for name in written:  # written now; their hooks recorded on the primary only
        upload(lakefs, repo, name, "new.txt")
        head = commit(lakefs, repo, name, "written just before the failover")
        clock.record_write(repo, name, datetime.now(UTC), head=getattr(head, "id", None))
    recorded_before = {n: clock.get(repo, n).last_write_at for n in written}
    old = ha.failover_losing(replica)
    lost = [n for n in written if clock.get(repo, n).last_write_at != recorded_before[n]]
    assert lost == written, "the failover was meant to lose these writes"

    report = run_repository(lakefs, clock, repo, now=datetime.now(UTC), options=LifecycleOptions(max_deletions=100))
    outcome = {o.branch_id: o.result for o in report.outcomes}
    left = {b.id for b in lakefs.paginate("list", lakefs.branches.list_branches, repo)}
    assert set(written) <= left, outcome  # no wrong deletion
    assert not set(names[3:]) & left, outcome  # the idle ones went
    reconcile_repository(lakefs, clock, repo, now=datetime.now(UTC))
    repaired = [n for n in written if clock.get(repo, n).last_write_at > old_time + timedelta(days=9)]
    assert repaired == written
    print(f"RELIABILITY redis-failover-lost-writes: replica promoted behind, hook writes lost {len(lost)}/"
          f"{len(written)}, written branches deleted 0/{len(written)}, idle branches deleted "
          f"{len(names) - len(written)}/{len(names) - len(written)}, clocks repaired by the reconciler "
          f"{len(repaired)}/{len(lost)}")
    ha.restore(old)


# How a lease or lock counts as taken: as the settings say with Sentinel (a replica acknowledged it), or on the
# primary's word (REDIS_REPLICA_ACKS=0).
ACKS = ("replica-acked", "primary-only")


def lock_durability(settings, acks: str) -> Acknowledged | None:
    return settings.redis_durability if acks == "replica-acked" else None


@pytest.mark.parametrize("acks", ACKS)
@pytest.mark.parametrize("runner", RUNNERS)
def test_the_primary_killed_during_a_gc_sweep(ha, ha_env, lakefs, lakefs_server, repo, monkeypatch, runner, request,
                                              acks):
    """Either runner: the primary SIGKILLed once the sweep has re-checked and is about to send its batches (the
    Spark job's deleters reach the Sentinels through the lease reference it was given). The run completes (its
    lease confirmed on the new primary) or stops before deleting more (it could not be: with replica
    acknowledgement, until the killed node is back as a replica); either way nothing live is lost and the next run
    converges."""
    settings = settings_for(ha_env, monkeypatch)
    runs = GCRuns(redis_client(settings), f"ha-{uuid.uuid4().hex[:6]}", settings.redis_client_url(),
                  lock_durability=lock_durability(settings, acks))
    connection = LakeFSConnection(endpoint_url=lakefs_server.endpoint, access_key_id=ADMIN_ACCESS_KEY,
                                  secret_access_key=ADMIN_SECRET_KEY)
    first = garbage(lakefs, repo)
    spark = request.getfixturevalue("local_spark") if runner == "spark" else None
    killed: list[RedisNode] = []

    def fail_over_before_deleting(phase: str, count: int) -> None:
        if phase == "re-checked" and not killed:
            killed.append(ha.failover())

    try:
        summary = execute(GCSettings(min_age="0s"), GCRequest(repo, runner=runner), connection=connection,
                          runs=runs, metrics=fresh_metrics(), progress=fail_over_before_deleting, spark=spark)
        outcome = "completed" if summary.success else f"stopped ({summary.error})"
    except GCError as exc:
        outcome = f"stopped ({exc.reason})"
        # Stopped for its lease (the guard's check or an executor's deleter first): lease-lost on both runners.
        assert exc.reason == "lease-lost", exc
    assert killed
    assert read(lakefs, repo, "main", "a.txt") == b"v3"  # live data untouched whatever happened
    if acks == "replica-acked":  # no lease is confirmed (taken) before the new primary has a replica again
        assert outcome == "stopped (lease-lost)", outcome
        ha.restore(killed.pop())
    again = execute(GCSettings(min_age="0s"), GCRequest(repo, runner=runner), connection=connection, runs=runs,
                    metrics=fresh_metrics(), spark=spark)
    assert again.success
    assert read(lakefs, repo, first, "a.txt") == 410  # the garbage is gone after the next run at the latest
    assert read(lakefs, repo, "main", "a.txt") == b"v3"
    print(f"RELIABILITY redis-failover-gc-sweep ({runner}, {acks}): primary SIGKILLed before the sweep's batches, "
          f"first run {outcome}, next run succeeded (swept {again.swept}), live objects lost 0")
    if killed:
        ha.restore(killed[0])


@pytest.mark.parametrize("acks", ACKS)
def test_the_primary_killed_during_a_lifecycle_run(ha, ha_env, lakefs, repo, monkeypatch, acks):
    """The primary SIGKILLed once a branch lifecycle run has started deleting: the run goes on on the new primary
    or stops (Redis errors end it; with replica acknowledgement, its lock's renewal cannot be confirmed before
    the killed node is back as a replica); no written branch is deleted, and the next run deletes the idle rest."""
    settings = settings_for(ha_env, monkeypatch)
    plain = idle_after_a_day(lakefs, repo, settings, "lr-*")
    clock = ClockStore(plain.redis, plain.prefix, lock_durability=lock_durability(settings, acks))
    old_time = datetime.now(UTC) - timedelta(days=10)
    # Enough idle branches that the run is still deleting when the primary dies (asserted below).
    idle, written = [f"lr-idle-{i:03d}" for i in range(150)], [f"lr-written-{i}" for i in range(5)]
    for name in idle + written:
        create_branch(lakefs, repo, name)
        clock.record_created(repo, name, old_time, head=dict(lakefs.branch_heads(repo))[name])
    for name in written:
        upload(lakefs, repo, name, "new.txt")
        head = commit(lakefs, repo, name, "written today")
        clock.record_write(repo, name, datetime.now(UTC), head=getattr(head, "id", None))
    ha.primary().client().wait(1, 5000)

    def names() -> set[str]:
        return {b.id for b in lakefs.paginate("list", lakefs.branches.list_branches, repo)}

    killed: list[RedisNode] = []
    kill_at: list[float] = []

    def kill_after_first_deletion() -> None:
        wait_until(lambda: len(names() & set(idle)) < len(idle), 60, "the run's first deletion")
        kill_at.append(time.monotonic())
        killed.append(ha.failover())

    killer = threading.Thread(target=kill_after_first_deletion, daemon=True)
    killer.start()
    try:
        report = run_repository(lakefs, clock, repo, now=datetime.now(UTC), options=LifecycleOptions(max_deletions=500))
        done = sum(o.result == "deleted" for o in report.outcomes)
        outcome = f"went on ({done} deleted)" if report.aborted is None else \
            f"stopped after {done} deletions ({report.aborted})"
    except Exception as exc:  # noqa: BLE001 - whatever a Redis loss raises, the run must just stop
        outcome = f"stopped ({type(exc).__name__})"
    ended = time.monotonic()
    killer.join(90)
    assert killed and kill_at[0] < ended, "the primary was not killed during the run"
    assert set(written) <= names()  # no wrong deletion
    deleted_first = len(idle) - len(names() & set(idle))
    if acks == "replica-acked":  # its lock is taken only once the new primary has a replica again
        ha.restore(killed.pop())
    # The next run converges. One that starts while the clients still find their way to the new primary may leave
    # some idle branches to the run after it (a Redis error is never a reason to delete: "unavailable", or the run
    # aborted); it never keeps one for another reason. (Seen once in CI: about 25 of 148 left by the first run after.)
    for _attempt in range(3):
        after = run_repository(lakefs, clock, repo, now=datetime.now(UTC), options=LifecycleOptions(max_deletions=500))
        left = names() & set(idle)
        if not left:
            break
        why = {o.branch_id: (o.result, o.detail) for o in after.outcomes if o.branch_id in left}
        assert after.aborted is not None or all(r in {"unavailable", "not-attempted", "failed"}
                                                 for r, _ in why.values()), (after.aborted, why)
        time.sleep(2)
    # A run locked out has no outcome: the first run's lock, not released through the failover, would hold for an
    # hour (seen in CI before release_quietly waited a failover out).
    left = names() & set(idle)
    assert not left, (after.locked_out, after.aborted, after.skipped, why,
                      {b: clock.get(repo, b) for b in sorted(left)[:3]}, outcome)
    assert set(written) <= names()
    print(f"RELIABILITY redis-failover-lifecycle-run: primary SIGKILLed after the run's first deletion, the run "
          f"{outcome}, idle deleted by it {deleted_first}/{len(idle)}, written branches deleted 0/{len(written)}, "
          f"next run deleted the rest ({acks})")
    if killed:
        ha.restore(killed[0])


# Before the cut, any operation of the random lifecycle test; after it (while hook writes are being lost), those
# whose loss the re-check against lakeFS must catch. Left out after the cut, as README's "lost writes" lists them
# as beyond repair: a reset or retarget (it can bring HEAD back to where the clock last saw it) and a re-creation
# (at the commit the old branch had, it looks like the old branch); reconciles, which would record the lost writes.
AFTER_CUT = ("create", "upload", "upload", "commit", "commit", "delete_object", "merge", "revert", "cherry_pick",
             "main_commit")


def test_random_lifecycle_histories_across_a_failover_that_loses_writes(ha, ha_env, ha_receiver, lakefs,
                                                                         monkeypatch):
    """The random lifecycle test's histories and oracle (tests/integration/branch_lifecycle/test_lifecycle_random.py)
    with the replica cut off half-way and promoted after more writes: the hooks of those writes reached only the
    lost primary. Real runs on the new primary then delete no branch the seed keeps."""
    import random  # noqa: PLC0415

    from tests.integration.branch_lifecycle.test_lifecycle_random import (  # noqa: PLC0415
        ACTION_CACHE_SECONDS,
        SEED,
        Model,
        Scenario,
        bounds,
        oracle,
        random_policies,
    )
    from workers.idle_clock import hooks_install  # noqa: PLC0415

    class AfterCut(Scenario):
        def step(self) -> None:
            alive = self.alive()
            op = self.rng.choice(AFTER_CUT if alive else ("create",))
            branch = self.rng.choice(alive) if alive else None
            self.m.history.append((time.time(), op, branch))
            getattr(self, f"op_{op}")(branch)

    settings = settings_for(ha_env, monkeypatch)
    clock = ClockStore(redis_client(settings), settings.key_prefix)
    rng = random.Random(SEED)
    repos = [f"rfo-{uuid.uuid4().hex[:10]}" for _ in range(4)]
    for name in repos:
        lakefs.call("create repository", lakefs.repositories.create_repository,
                    lakefs_sdk.RepositoryCreation(name=name, storage_namespace=f"local://{name}", default_branch="main"))
        hooks_install.install(lakefs, name, hooks_install.action_file(ha_receiver.url))
    time.sleep(ACTION_CACHE_SECONDS)
    try:
        models = [Model(repo, committed={"main": set()}) for repo in repos]
        for m in models:
            s = Scenario(lakefs, clock, m, rng)
            for _ in range(rng.randint(6, 12)):
                s.step()
            s.op_reconcile()
        ha.primary().client().wait(1, 5000)
        replica = ha.cut_replica()
        before = {(m.repo, b): clock.get(m.repo, b) for m in models for b in m.lives}
        for m in models:
            s = AfterCut(lakefs, clock, m, rng)
            for _ in range(rng.randint(4, 8)):
                s.step()
            s.settle()
        written_after_cut = {(m.repo, b) for m in models for b in m.lives
                             if (m.repo, b) not in before or clock.get(m.repo, b) != before[(m.repo, b)]}
        old = ha.failover_losing(replica)
        lost = sum(clock.get(repo, b) != clock_before for (repo, b), clock_before in before.items()
                   if (repo, b) in written_after_cut) + sum(
            clock.get(repo, b).created_at is None for (repo, b) in written_after_cut if (repo, b) not in before)

        failures, deleted, kept_written = [], 0, 0
        policies_of = {m.repo: random_policies(rng) for m in models}
        for m in models:
            set_policies(lakefs, m.repo, parse_policies({"policies": [
                {k: v for k, v in p.items() if not k.endswith("_s")} for p in policies_of[m.repo]]}, "main"))
        time.sleep(rng.uniform(3, 6))  # the shorter thresholds pass
        for m in models:
            now = time.time()
            report = run_repository(lakefs, clock, m.repo, now=datetime.fromtimestamp(now, UTC),
                                    options=LifecycleOptions(max_deletions=100))
            existing = {b for b, _ in lakefs.branch_heads(m.repo, show_hidden=True)}
            assert "main" in existing
            for branch, life in m.lives.items():
                (c_lo, a_lo), _ = bounds(life)
                gone = branch not in existing
                deleted += gone
                kept_written += (m.repo, branch) in written_after_cut and not gone
                if gone and oracle(policies_of[m.repo], branch, c_lo, a_lo, now) is None:
                    failures.append(f"{m.repo}/{branch}: deleted though the seed keeps it ({life}); "
                                    f"{[(o.branch_id, o.result, o.detail) for o in report.outcomes]}; "
                                    f"ops {m.history}")
        print(f"RELIABILITY redis-failover-lost-writes-random: seed {SEED}, {len(repos)} random histories, the "
              f"replica promoted behind, branches written after the cut {len(written_after_cut)} (their hook writes "
              f"lost: {lost}, kept by the runs {kept_written}), deleted by real runs {deleted}, wrongly {len(failures)}")
        assert not failures, f"seed {SEED}:\n" + "\n".join(failures[:10])
        ha.restore(old)
    finally:
        for name in repos:
            lakefs.call("delete repository", lakefs.repositories.delete_repository, name, force=True)
