"""A plain Redis (no Sentinel) that drops the worker's connections, or restarts: the Celery worker reconnects by
itself and consumes what is queued afterwards (Celery users report workers that stop consuming after a connection
reset or a Redis restart: celery #10096, #6348). Prints ``RELIABILITY`` lines (README's reliability table)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest
import redis
from celery.exceptions import TimeoutError as CeleryTimeout

from tests.services import CeleryWorker, RedisServer, janitor_env, wait_until
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
    how = "by the same worker"
    try:
        result.get(timeout=30)
    except CeleryTimeout:
        # kombu 5.7 sometimes fails its own clean-up after such a loss ("Unrecoverable error: AttributeError:
        # 'NoneType' object has no attribute 'hostname'") and the worker exits 1; every deploy restarts it
        # (systemd Restart=on-failure, compose restart: unless-stopped, Kubernetes). A worker still running but
        # not consuming would be the failure: that is what this test exists to catch.
        assert reset_worker.proc.poll() not in (None, 0), "the worker is alive but does not consume"
        how = f"after the worker exited {reset_worker.proc.returncode} and was restarted, as its supervisor would"
        reset_worker.start()
        result.get(timeout=90)
    after_restart = time.monotonic() - started
    print(f"RELIABILITY redis-connection-reset: the worker's connections dropped 3 times, each next task consumed "
          f"(in {', '.join(f'{s:.2f}' for s in after_kill)} s); Redis SIGKILLed and restarted empty on its port, "
          f"the next task consumed in {after_restart:.1f} s {how}")
