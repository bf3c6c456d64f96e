"""In-memory stand-ins of our own stores for unit tests of orchestration code (no Redis). lakeFS is never faked:
unit tests reach it at a closed loopback port, integration tests run against the real services in
tests/services.py."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry

from workers.metrics import Metrics


class FakeLock:
    def __init__(self, held: bool = False):
        self.held = held
        self.released = False

    def acquire(self) -> bool:
        if self.held:
            return False
        self.held = True
        return True

    def locked(self) -> bool:
        return self.held

    def release(self) -> None:
        self.held, self.released = False, True


@dataclass
class MemoryRuns:
    """workers.gc.store.GCRuns, in memory."""

    busy: set[str] = field(default_factory=set)
    entries: dict[str, list[dict]] = field(default_factory=dict)
    started: list[str] = field(default_factory=list)

    def lock(self, repository_id: str, seconds: float) -> FakeLock:
        return FakeLock(held=repository_id in self.busy)

    def record(self, repository_id: str, entry: dict) -> None:
        self.entries.setdefault(repository_id, []).insert(0, entry)

    def history(self, repository_id: str, limit: int = 50) -> list[dict]:
        return self.entries.get(repository_id, [])[:limit]

    def run_started(self, repository_id: str) -> None:
        self.started.append(repository_id)


def fresh_metrics() -> Metrics:
    return Metrics(CollectorRegistry())
