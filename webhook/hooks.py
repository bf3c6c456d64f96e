"""POST /webhooks/lakefs: lakeFS action payloads feed the idle clock."""

from __future__ import annotations

from flask import Blueprint, jsonify, request

from webhook.auth import secret_ok
from webhook.context import services
from webhook.errors import error_response
from workers.idle_clock.events import EVENT_TYPES, EventError, clock_update, parse_event

bp = Blueprint("hooks", __name__)


def _event_label(payload: object) -> str:
    value = payload.get("event_type") if isinstance(payload, dict) else None
    return value if value in EVENT_TYPES else "invalid"


@bp.post("/webhooks/lakefs")
def receive():
    metrics = services().metrics
    secret = services().settings.webhook_secret
    if not secret_ok(secret.get_secret_value() if secret else None):
        metrics.webhook_events.labels("unknown", "unauthorized").inc()
        return error_response(401, "missing or wrong shared secret")
    payload = request.get_json(silent=True)
    if payload is None:
        metrics.webhook_events.labels("invalid", "rejected").inc()
        return error_response(400, "body is not JSON (expected a lakeFS action payload, Content-Type: application/json)")
    try:
        event = parse_event(payload)
    except EventError as exc:
        metrics.webhook_events.labels(_event_label(payload), "rejected").inc()
        return error_response(422, "not a valid lakeFS event", details=exc.errors)
    update = clock_update(event)
    if update is None:
        metrics.webhook_events.labels(event.event_type, "ignored").inc()
        return jsonify({"status": "ignored"}), 200
    try:
        changed = _apply(update)
    except Exception:
        metrics.webhook_events.labels(event.event_type, "error").inc()
        raise
    metrics.webhook_events.labels(event.event_type, "recorded" if changed else "stale").inc()
    return jsonify({"status": "recorded" if changed else "stale"}), 200


def _apply(update) -> bool:
    clock = services().clock
    if update.kind == "create":
        return clock.record_created(update.repository_id, update.branch_id, update.at, "webhook", update.head)
    if update.kind == "delete":
        return clock.record_deleted(update.repository_id, update.branch_id, update.at)
    return clock.record_write(update.repository_id, update.branch_id, update.at, "webhook", update.head)
