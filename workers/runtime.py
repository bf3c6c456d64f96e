"""The clients a worker process needs, built once per process on first use (never at import time)."""

from __future__ import annotations

from functools import cached_property

import redis

from workers.clock import ClockStore
from workers.lakefs_client import LakeFS, make_lakefs
from workers.metrics import Metrics, multiprocess_enabled
from workers.settings import Settings


class Services:
    def __init__(self, settings: Settings, metrics: Metrics | None = None):
        self.settings = settings
        self._metrics = metrics

    @cached_property
    def lakefs(self) -> LakeFS:
        return make_lakefs(self.settings.lakefs, self.settings.lakefs_timeout_seconds)

    @cached_property
    def redis(self) -> redis.Redis:
        return redis.Redis.from_url(self.settings.redis_url, socket_timeout=10, socket_connect_timeout=5)

    @cached_property
    def clock(self) -> ClockStore:
        return ClockStore(self.redis, self.settings.key_prefix)

    @cached_property
    def metrics(self) -> Metrics:
        if self._metrics is not None:
            return self._metrics
        from prometheus_client import REGISTRY  # noqa: PLC0415

        return Metrics(None if multiprocess_enabled() else REGISTRY)
