"""GET /healthz (Redis reachable?) and GET /metrics."""

from __future__ import annotations

import redis
from flask import Blueprint, Response, jsonify
from prometheus_client import CONTENT_TYPE_LATEST

from webhook.app_services import app_services
from workers.shared.metrics import exposition

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def healthz():
    try:
        app_services().redis.ping()
    except redis.RedisError as exc:
        return jsonify({"status": "unavailable", "redis": str(exc)}), 503
    return jsonify({"status": "ok", "redis": "ok"})


@bp.get("/metrics")
def metrics():
    return Response(exposition(app_services().registry), mimetype=CONTENT_TYPE_LATEST)
