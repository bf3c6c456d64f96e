"""A plain Redis (no Sentinel) that drops the worker's connections, or restarts: the Celery worker reconnects by
itself and consumes what is queued afterwards (Celery users report workers that stop consuming after a connection
reset or a Redis restart: celery #10096, #6348). Prints ``RELIABILITY`` lines (README's reliability table)."""

from __future__ import annotations

import math
import os
import re
import signal
import statistics
import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest
import redis

from tests.services import CeleryBeat, CeleryWorker, RedisServer, janitor_env, wait_until
from workers.celery.app import create_celery
from workers.shared.settings import load_settings


@pytest.fixture(scope="module")
def own_redis() -> Iterator[RedisServer]:
    server = RedisServer().start()
    yield server
    server.cleanup()


@pytest.fixture(scope="module")
def reset_env(lakefs_server, own_redis: RedisServer) -> dict[str, str]:
    return janitor_env(lakefs_server, own_redis.url)


@pytest.fixture(scope="module")
def reset_worker(reset_env: dict[str, str]) -> Iterator[CeleryWorker]:
    worker = CeleryWorker(reset_env).start()
    yield worker
    worker.cleanup()


def _consumed(app, repo: str, timeout: float = 90) -> float:
    """Send a task and wait for its result; the seconds it took."""
    started = time.monotonic()
    result = app.send_task("workers.idle_clock.tasks.reconcile_repository", args=(repo,))
    assert result.get(timeout=timeout) is not None
    return time.monotonic() - started


def test_the_worker_consumes_after_its_connections_are_dropped_and_after_a_restart(
        own_redis, reset_env, reset_worker, repo, monkeypatch):
    for key, value in reset_env.items():
        monkeypatch.setenv(key, value)
    app = create_celery(load_settings())
    _consumed(app, repo)
    admin = redis.Redis.from_url(own_redis.url)
    after_kill = []
    for _ in range(3):
        killed = admin.client_kill_filter(_type="normal", skipme=True) + admin.client_kill_filter(
            _type="pubsub", skipme=True)
        assert killed >= 1  # the worker's connections were there to drop
        after_kill.append(_consumed(app, repo))

    # A restart: the same port, an empty Redis (no persistence), every connection gone at once.
    os.killpg(own_redis.proc.pid, signal.SIGKILL)
    own_redis.proc.wait(10)
    time.sleep(1)
    own_redis.start()
    wait_until(lambda: admin.ping(), 15, "redis back")
    started = time.monotonic()
    result = app.send_task("workers.idle_clock.tasks.reconcile_repository", args=(repo,))
    result.get(timeout=90)
    assert reset_worker.proc.poll() is None, "the worker exited on the restart"
    after_restart = time.monotonic() - started
    print(f"RELIABILITY redis-connection-reset: the worker's connections dropped 3 times, each next task consumed "
          f"(in {', '.join(f'{s:.2f}' for s in after_kill)} s); Redis SIGKILLed and restarted empty on its port, "
          f"the next task consumed in {after_restart:.1f} s by the same worker")


# 25 in CI (each waits for the worker to reconnect and consume again: ~100 s on a busy machine); 50 with
# LAKEFS_JANITOR_REDIS_RESTARTS=50 (~200 s), as run before each release.
RESTARTS = int(os.environ.get("LAKEFS_JANITOR_REDIS_RESTARTS", "25"))


class Restarts(threading.Thread):
    """Restarts Redis on its port (SIGTERM and SIGKILL in turn, empty each time), each time waiting until a task
    sent after the restart came back (or the worker exited: counted, and started again as its supervisor would).

    A thread of its own, while the test's thread sends the tasks: that one alone then formats tracebacks (Celery
    logs every lost connection with one; CPython 3.11's traceback carets parse source with a shared AST state).
    """

    def __init__(self, server: RedisServer, worker: CeleryWorker, count: int, consumed: list[float]) -> None:
        super().__init__(daemon=True)
        self.server, self.worker, self.count, self.consumed = server, worker, count, consumed
        self.exits: list[tuple[int, int, str]] = []
        self.back_in: list[float] = []  # seconds from a restart to the first task sent after it coming back
        self.stuck: str | None = None

    def run(self) -> None:
        for i in range(self.count):
            os.killpg(self.server.proc.pid, signal.SIGKILL if i % 2 else signal.SIGTERM)
            self.server.proc.wait(10)
            self.server.start()
            restarted = time.monotonic()
            while not any(sent > restarted for sent in self.consumed) and self.worker.proc.poll() is None:
                if time.monotonic() - restarted > 60:
                    self.stuck = f"restart {i + 1}: no task consumed for 60 s by a worker still running"
                    return
                time.sleep(0.05)
            if self.worker.proc.poll() is not None:
                self.exits.append((i + 1, self.worker.proc.returncode, self.worker.log.read_text()[-3000:]))
                self.worker.start()
                continue
            self.back_in.append(time.monotonic() - restarted)


def settle(app, result) -> None:
    """Stop following a task's result here, errors and all, rather than in ``AsyncResult.__del__``: a Redis down at
    that moment makes it raise inside the garbage collector, and pytest formatting that (traceback carets parse
    source) in the middle of another parse corrupts CPython 3.11's AST state (the session then ends in "AST
    constructor recursion depth mismatch")."""
    try:
        app.backend.remove_pending_result(result)
    except Exception:  # noqa: BLE001, S110 - Redis down: nothing left to unsubscribe from
        pass
    result.backend = None


def _beat_sends(beat: CeleryBeat) -> tuple[Counter, int]:
    """reconcile_all sends per minute (beat's log time), and how many beat could not send."""
    text = beat.log.read_text(errors="replace")
    minutes = re.findall(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d):\d\d[^\]]*\] Scheduler: Sending due task [^\n]*reconcile_all",
                         text)
    return Counter(minutes), text.count("Couldn't apply scheduled task")


def test_the_worker_and_beat_ride_through_redis_restarts_under_load(lakefs_server, repo, monkeypatch):
    """Redis restarted RESTARTS times while tasks flow (late acks: each is unacknowledged while it runs, what the
    worker's clean-up after a lost connection has to re-queue): the worker never exits and consumes again after
    each restart; beat, its own process as deployed, sends the minute's reconcile_all exactly once every minute."""
    server = RedisServer().start()
    env = janitor_env(lakefs_server, server.url, LAKEFS_JANITOR_RECONCILE_SCHEDULE="* * * * *")
    worker, beat = CeleryWorker(env), CeleryBeat(env)
    try:
        worker.start()
        beat.start()
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        app = create_celery(load_settings())
        consumed: list[float] = []  # when each task that came back was sent (monotonic)
        lost = 0  # sent into a Redis that then restarted empty: the message went with its data
        restarts = Restarts(server, worker, RESTARTS, consumed)
        started_wall = time.time()
        restarts.start()
        while restarts.is_alive():
            sent = time.monotonic()
            try:  # four at a time: the worker's four threads busy
                results = [app.send_task("workers.idle_clock.tasks.reconcile_repository", args=(repo,))
                           for _ in range(4)]
            except Exception:  # noqa: BLE001 - Redis down longer than the publish retries
                time.sleep(0.2)
                continue
            for result in results:
                try:
                    result.get(timeout=4, propagate=False)
                    consumed.append(sent)
                except Exception:  # noqa: BLE001 - lost with the restarted Redis's data, or its result was
                    lost += 1
                finally:
                    settle(app, result)
        ended_wall = time.time()
        assert restarts.stuck is None, f"{restarts.stuck}\n{worker.log.read_text()[-3000:]}"
        assert beat.proc.poll() is None, beat.log.read_text()[-3000:]
        sends, failed = _beat_sends(beat)
        # The minutes wholly inside the restarts (beat's log has local time): each fired once, none skipped.
        minutes = [time.strftime("%Y-%m-%d %H:%M", time.localtime(t))
                   for t in range(math.ceil(started_wall / 60) * 60, int(ended_wall) - 59, 60)]
        inside = {m: sends.get(m, 0) for m in minutes}
        back_in = restarts.back_in or [0.0]
        print(f"RELIABILITY redis-restarts-under-load: Redis restarted {RESTARTS} times (SIGTERM/SIGKILL, empty) "
              f"in {ended_wall - started_wall:.0f} s under {len(consumed)} tasks: worker exits "
              f"{len(restarts.exits)}/{RESTARTS}, consuming again {statistics.median(back_in):.1f} s after a "
              f"restart (median, max {max(back_in):.1f} s), tasks lost with the restarted Redis's data {lost}; "
              f"beat sends per minute {sorted(inside.values())} over {len(inside)} minutes, failed sends {failed}")
        assert not restarts.exits, f"{len(restarts.exits)} exits in {RESTARTS} restarts; the first:\n" \
                                   f"{restarts.exits[0][2]}"
        assert failed == 0
        assert set(inside.values()) <= {1}, sends
        assert inside or ended_wall - started_wall < 120, "no whole minute inside two minutes of restarts"
    finally:
        beat.cleanup()
        worker.cleanup()
        server.cleanup()
