"""One typed bundle of the clients every entry point needs (CLI, Celery worker, Flask app).

A shared module: it knows no domain; a domain builds its stores from it (``ClockStore.of(services)``).

Each client is built on first use, never at import time, and any of them can be handed in instead (unit tests
pass in-memory stand-ins from tests/fakes.py). The lakeFS SDK is imported only when a lakeFS client is built,
so the receiver, which never calls lakeFS with the service's own credentials, does not load it.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

import redis

from workers.shared.metrics import Metrics, multiprocess_enabled
from workers.shared.redis_clients import redis_client
from workers.shared.settings import Settings

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from workers.shared.lakefs.client import LakeFS


class Services:
    def __init__(self, settings: Settings, *, lakefs: LakeFS | None = None, redis_client: redis.Redis | None = None,
                 metrics: Metrics | None = None, registry: CollectorRegistry | None = None,
                 redis_timeout_seconds: float = 10.0, redis_retries: bool = True) -> None:
        self.settings = settings
        self.registry = registry
        self._redis_timeout, self._redis_retries = redis_timeout_seconds, redis_retries
        for name, value in (("lakefs", lakefs), ("redis", redis_client), ("metrics", metrics)):
            if value is not None:
                self.__dict__[name] = value  # what cached_property would have built

    @cached_property
    def lakefs(self) -> LakeFS:
        from workers.shared.lakefs.client import make_lakefs  # noqa: PLC0415 - the SDK loads only where it is used

        return make_lakefs(self.settings.lakefs, self.settings.lakefs_timeout_seconds)

    @cached_property
    def redis(self) -> redis.Redis:
        return redis_client(self.settings, timeout_seconds=self._redis_timeout, retries=self._redis_retries)

    @cached_property
    def metrics(self) -> Metrics:
        if self.registry is not None or multiprocess_enabled():
            return Metrics(self.registry)
        from prometheus_client import REGISTRY  # noqa: PLC0415

        return Metrics(REGISTRY)
