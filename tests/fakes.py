"""Helpers for unit tests without services. lakeFS and Redis are never faked: integration tests run against the
real services in tests/services.py."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from workers.shared.metrics import Metrics


def fresh_metrics() -> Metrics:
    return Metrics(CollectorRegistry())
