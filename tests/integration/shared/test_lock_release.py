"""A run's lock released at the end of the run while Redis is briefly gone (a failover, a restart): the release
waits it out, or the lock would block the next run for its whole timeout (an hour for a branch lifecycle run:
seen in CI after a Sentinel failover)."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest

from spark_jobs.engine.runtime.redis_connect import connect
from tests.services import RedisServer
from workers.shared.locks import named_lock, release_quietly


@pytest.fixture
def durable_redis() -> Iterator[RedisServer]:
    server = RedisServer(durable=True).start()
    yield server
    server.cleanup()


def kill(server: RedisServer) -> None:
    """SIGKILL: what the append-only file holds is what a restart finds."""
    assert server.proc is not None
    os.killpg(server.proc.pid, signal.SIGKILL)
    server.proc.wait(5)
    server.proc = None


def client_of(server: RedisServer):
    # One attempt per command (no retries of the client's own): what is retried is the release's doing.
    return connect(server.url, socket_timeout=1, socket_connect_timeout=1, retries=False)


def test_a_release_waits_out_a_redis_restart(durable_redis):
    client = client_of(durable_redis)
    lock = named_lock(client, "t", "lifecycle:repo", seconds=600)
    assert lock.acquire()
    kill(durable_redis)
    restarted = threading.Timer(3.0, durable_redis.start)
    restarted.start()
    try:
        release_quietly(lock, "test")
    finally:
        restarted.join()
    assert client.get("t:lock:lifecycle:repo") is None  # released: the next run is not locked out
    assert named_lock(client, "t", "lifecycle:repo", seconds=600).acquire()


def test_a_release_gives_up_after_its_patience(durable_redis, caplog):
    client = client_of(durable_redis)
    lock = named_lock(client, "t", "lifecycle:repo", seconds=600)
    assert lock.acquire()
    kill(durable_redis)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="workers.shared.locks"):
        release_quietly(lock, "test", patience=2)  # returns, never raises: the run's own outcome stands
    assert time.monotonic() - started < 10
    assert "could not release the test lock within 2s" in caplog.text
    durable_redis.start()
    assert client.pttl("t:lock:lifecycle:repo") > 0  # still there: it expires by itself


def test_a_release_of_an_expired_lock_says_so(durable_redis, caplog):
    client = client_of(durable_redis)
    lock = named_lock(client, "t", "lifecycle:repo", seconds=600)
    assert lock.acquire()
    client.delete("t:lock:lifecycle:repo")
    with caplog.at_level(logging.WARNING, logger="workers.shared.locks"):
        release_quietly(lock, "test")
    assert "test lock expired before the run ended" in caplog.text
