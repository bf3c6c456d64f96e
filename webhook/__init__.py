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
    from webhook import branch_lifecycle_api, cleaning_api, errors, health, object_lifecycle_api, receiver  # noqa: PLC0415

    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = settings.webhook_max_body_bytes
    if services is None:
        if registry is None and not multiprocess_enabled():
            registry = CollectorRegistry()
        # One attempt per command with a 1 s time-out: a hung primary costs ~1 s, and the hooks' writes retry
        # themselves (spark_jobs.engine.runtime.redis_ack.write_acknowledged: the primary asked of the Sentinels again each
        # time) within REDIS_RETRY_SECONDS, then answer 503; every other Redis error is a quick 503.
        services = Services(settings, redis_client=redis_client, registry=registry, redis_timeout_seconds=1,
                            redis_retries=False)
    app.extensions["janitor"] = services
    errors.init_app(app)
    app.register_blueprint(receiver.bp)
    app.register_blueprint(health.bp)
    app.register_blueprint(branch_lifecycle_api.bp)
    app.register_blueprint(cleaning_api.bp)
    app.register_blueprint(object_lifecycle_api.bp)
    return app
