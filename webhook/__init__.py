"""Flask app factory for the lakeFS hook receiver, the policy API, /healthz and /metrics."""

from __future__ import annotations

import redis
from flask import Flask
from prometheus_client import CollectorRegistry

from workers.clock import ClockStore
from workers.metrics import Metrics, multiprocess_enabled
from workers.settings import Settings


def create_app(settings: Settings, redis_client: redis.Redis | None = None,
               registry: CollectorRegistry | None = None) -> Flask:
    # Imported here so that importing the package has no side effects and no cycles.
    from webhook import errors, health, hooks, policy_api  # noqa: PLC0415

    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = settings.webhook_max_body_bytes
    if redis_client is None:
        # Short timeouts: lakeFS waits on pre-hooks, and a dead Redis must become a quick 503.
        redis_client = redis.Redis.from_url(settings.redis_url, socket_timeout=2, socket_connect_timeout=2)
    if registry is None and not multiprocess_enabled():
        registry = CollectorRegistry()
    app.extensions["janitor"] = {
        "settings": settings,
        "redis": redis_client,
        "clock": ClockStore(redis_client, settings.key_prefix),
        "metrics": Metrics(registry),
        "registry": registry,
    }
    errors.init_app(app)
    app.register_blueprint(hooks.bp)
    app.register_blueprint(health.bp)
    app.register_blueprint(policy_api.bp)
    return app
