"""POST /webhooks/lakefs: lakeFS action payloads feed the idle clock."""

from __future__ import annotations

import functools
import json
from datetime import UTC, datetime

from flask import Blueprint, Response, request
from prometheus_client import Counter
from werkzeug.exceptions import ClientDisconnected, HTTPException

from webhook.app_services import app_services
from webhook.auth import secret_ok
from webhook.errors import error_response
from webhook.hook_record import record
from workers.gc.history import GCRuns
from workers.idle_clock.events import EVENT_TYPES, EventError, parse_event
from workers.idle_clock.store import ClockStore
from workers.shared.metrics import Metrics

bp = Blueprint("hooks", __name__)


@functools.lru_cache(maxsize=512)
def _events(metrics: Metrics, event_type: str, outcome: str) -> Counter:
    """The hook counter's child for these labels. prometheus_client checks the labels and takes a lock on every
    labels() call; a child never changes, so each is looked up once per worker (labels are a few dozen)."""
    return metrics.webhook_events.labels(event_type, outcome)


def _event_label(payload: object) -> str:
    value = payload.get("event_type") if isinstance(payload, dict) else None
    return value if value in EVENT_TYPES else "invalid"


@bp.route("/webhooks/lakefs", methods=["POST"], provide_automatic_options=False)
def receive():
    s = app_services()
    metrics = s.metrics
    secret = s.settings.webhook_secret
    if not secret_ok(secret.get_secret_value() if secret else None):
        _events(metrics, "unknown", "unauthorized").inc()
        return error_response(401, "missing or wrong shared secret")
    payload, text, problem = _read_json()
    if problem is not None:
        _events(metrics, "invalid", "rejected").inc()
        return problem
    try:
        event = parse_event(payload, now=datetime.now(UTC), may_hold_surrogates="\\u" in text)
    except EventError as exc:
        _events(metrics, _event_label(payload), "rejected").inc()
        return error_response(422, "not a valid lakeFS event", details=exc.errors)
    try:
        # Everything the event changes in Redis (idle clock, summary, GC's commit count): one atomic round trip.
        # A 200 only once the write is where a failover keeps it (settings.replica_acks replicas), else a 503.
        outcome = record(event, clock=ClockStore.of(s), runs=GCRuns.of(s), durability=s.settings.redis_durability)
    except Exception:
        _events(metrics, event.event_type, "error").inc()
        raise
    _events(metrics, event.event_type, outcome).inc()
    return Response(_ANSWERS[outcome], status=200, mimetype="application/json")


# What jsonify({"status": ...}) would send, encoded once: the answer to every hook is one of these.
_ANSWERS = {outcome: json.dumps({"status": outcome}, separators=(",", ":")).encode() + b"\n"
            for outcome in ("recorded", "stale", "ignored")}


def _body() -> bytes:
    """The request body. The common case, a Content-Length within the limit on a server that ends the input stream
    itself (gunicorn), is one read; everything else (chunked bodies, bodies over the limit, other servers) goes
    through werkzeug's limited stream (several reads and checks per body: about twice the time of the one read in a
    profiled worker under bench/webhook's load)."""
    environ = request.environ
    length, limit = request.content_length, request.max_content_length
    if length is None or not environ.get("wsgi.input_terminated") or (limit is not None and length > limit):
        return request.get_data(cache=True)
    body = environ["wsgi.input"].read(length)
    if len(body) != length:
        raise ClientDisconnected(f"the body ended after {len(body)} of the {length} bytes its Content-Length "
                                 "announced")  # a 400, as werkzeug's own reader would answer
    return body


def _read_json() -> tuple[object, str, Response | None]:
    """The body as JSON and as text, or the 4xx that says why not. lakeFS sends UTF-8 JSON; anything else is
    refused."""
    charset = request.mimetype_params.get("charset", "utf-8").lower()
    if charset not in ("utf-8", "utf8"):
        return None, "", error_response(415, f"charset {charset[:40]!r} is not supported: send UTF-8 JSON")
    try:
        raw = _body()
    except HTTPException:
        raise  # werkzeug's own 4xx (413, disconnects) go through the JSON error handler
    except Exception:  # the server's HTTP parser (broken chunked framing) raises its own types
        return None, "", error_response(400, "the request body could not be read: broken HTTP framing "
                                             "(e.g. malformed chunked encoding)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, "", error_response(400, f"body is not valid UTF-8 (byte {exc.start})")
    try:
        return json.loads(text), text, None
    except RecursionError:
        return None, "", error_response(400, "body is JSON nested too deeply")
    except ValueError as exc:
        return None, "", error_response(400, f"body is not JSON ({exc}); expected a lakeFS action payload")
