"""Flask app factory for the lakeFS hook receiver, the policy API, /healthz and /metrics."""

from __future__ import annotations

import redis
from flask import Flask
from prometheus_client import CollectorRegistry

from workers.shared.metrics import multiprocess_enabled
from workers.shared.services import Services
from workers.shared.settings import Settings


def create_app(settings: Settings, *, redis_client: redis.Redis | None = None,
               registry: CollectorRegistry | None = None, services: Services | None = None) -> Flask:
    # Imported here so that importing the package has no side effects and no cycles.
    from webhook import cleaning_api, errors, health, object_lifecycle_api, policy_api, receiver  # noqa: PLC0415

    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = settings.webhook_max_body_bytes
    if services is None:
        if registry is None and not multiprocess_enabled():
            registry = CollectorRegistry()
        # Short Redis timeouts: lakeFS waits on pre-hooks, and a dead Redis must become a quick 503.
        services = Services(settings, redis_client=redis_client, registry=registry, redis_timeout_seconds=2)
    app.extensions["janitor"] = services
    errors.init_app(app)
    app.register_blueprint(receiver.bp)
    app.register_blueprint(health.bp)
    app.register_blueprint(policy_api.bp)
    app.register_blueprint(cleaning_api.bp)
    app.register_blueprint(object_lifecycle_api.bp)
    return app
