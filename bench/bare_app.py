"""Baselines for bench/webhook.py: bare Flask JSON endpoints on the receiver's route.

``app`` parses the JSON body and answers with a small JSON object, as the receiver does, and nothing else: no
shared-secret check, no validation, no Redis, no metrics. ``ping_app`` does the same plus one Redis PING per
request through a client built like the receiver's, i.e. the cheapest request that still makes one synchronous
Redis round trip: the tracked baseline, since every hook the receiver records has to reach Redis once.

bench/webhook.py serves them with exactly the gunicorn command line that ``lakefs-janitor serve`` produces for the
receiver (only the bind port and the app differ), so receiver / ping_app is the cost of the receiver's own work
on top of Flask + gunicorn + one Redis round trip.

    gunicorn ... bench.bare_app:app
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime

import redis
from flask import Flask, jsonify, request

SCRIPT_REPOSITORY = "bench-script"


def _make(name: str, call: Callable[[dict], object] | None) -> Flask:
    flask_app = Flask(name)

    @flask_app.post("/webhooks/lakefs")
    def receive():
        payload = request.get_json(silent=True)
        if payload is None:
            return jsonify({"error": "body is not JSON"}), 400
        if call is not None:
            call(payload)
        return jsonify({"status": "ok"}), 200

    @flask_app.get("/healthz")
    def healthz():
        return jsonify({"status": "ok"})

    return flask_app


app = _make(__name__, None)


def _ping_client() -> redis.Redis | None:
    url = os.environ.get("LAKEFS_JANITOR_REDIS_URL")
    # The same options as webhook.create_app; connections are made lazily, in the worker, on first use.
    return redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2) if url else None


def _ping(client: redis.Redis | None) -> Callable[[dict], object] | None:
    return None if client is None else (lambda payload: client.ping())


def _hook_script(client: redis.Redis | None) -> Callable[[dict], object] | None:
    """The receiver's one Redis call for a post-commit or post-merge (webhook.hook_record.record's, step for step)."""
    if client is None:
        return None
    from workers.gc.history import GCRuns  # noqa: PLC0415 - only this app needs the project
    from workers.idle_clock.store import ClockStore  # noqa: PLC0415

    clock, runs = ClockStore(client), GCRuns(client, "lakefs-janitor")

    def call(payload: dict) -> object:
        at = datetime.fromisoformat(payload["event_time"])
        change = clock.change("write", SCRIPT_REPOSITORY, payload["branch_id"], at=at, source="webhook",
                              head=payload["commit_id"])
        return clock.record(change, runs.commit_step(SCRIPT_REPOSITORY, payload["commit_id"]))

    return call


ping_app = _make(__name__, _ping(_ping_client()))


def __getattr__(name: str) -> Flask:
    """``script_app`` is built only where it is served: the other baselines' processes never import the project."""
    if name == "script_app":
        globals()[name] = _make(__name__, _hook_script(_ping_client()))
        return globals()[name]
    raise AttributeError(name)
