"""In-memory stand-ins for unit tests of orchestration code (no lakeFS, no Redis). Integration tests never use
them: they run against the real services in tests/services.py."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry

from workers.lakefs.errors import NotFound
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


class _Repositories:
    def __init__(self, known: dict[str, str]):
        self.known = known

    def get_repository(self, repository_id: str, **_: object):
        if repository_id not in self.known:
            raise NotFound(f"get repository: lakeFS answered 404: repository {repository_id!r} not found", 404)
        return type("Repository", (), {"id": repository_id, "storage_namespace": self.known[repository_id]})()


class FakeLakeFS:
    """Just enough of workers.lakefs.client.LakeFS to exercise error paths: repositories and their namespaces."""

    def __init__(self, repositories: dict[str, str] | None = None):
        self.repositories = _Repositories(repositories or {})

    def call(self, what: str, fn, *args, **kwargs):
        return fn(*args, **kwargs)


def fresh_metrics() -> Metrics:
    return Metrics(CollectorRegistry())
