"""The GC runner's bookkeeping without services: the run history in memory (tests/fakes.py, our own store), and
lakeFS at a closed loopback port (a real connection refused, no stand-in). The same bookkeeping against the real
lakeFS (a missing repository, a store the janitor cannot read) is in tests/integration/gc/test_gc_engine_choice.py."""

from __future__ import annotations

import pytest

from tests.fakes import FakeLock, MemoryRuns, fresh_metrics
from tests.services import free_port
from workers.gc.runner import Busy, GCError, GCRequest, execute
from workers.settings import GCSettings, LakeFSConnection


@pytest.fixture(scope="module")
def nowhere() -> LakeFSConnection:
    """lakeFS at a loopback port nobody listens on."""
    return LakeFSConnection(endpoint_url=f"http://127.0.0.1:{free_port()}", access_key_id="AKIAIOSFODNN7EXAMPLE",
                            secret_access_key="wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")


def test_a_repository_already_being_collected_is_refused(nowhere):
    runs = MemoryRuns(busy={"repo-a"})
    with pytest.raises(Busy, match="another GC"):
        execute(GCSettings(), GCRequest("repo-a"), connection=nowhere, runs=runs)
    assert runs.history("repo-a") == [] and runs.started == []


class Runs(MemoryRuns):
    """MemoryRuns that keeps the locks it handed out."""

    def __init__(self) -> None:
        super().__init__()
        self.taken: list[FakeLock] = []

    def lock(self, repository_id: str, seconds: float) -> FakeLock:
        self.taken.append(super().lock(repository_id, seconds))
        return self.taken[-1]


@pytest.mark.parametrize("engine", ["inprocess", "auto"])
def test_failures_are_recorded_with_their_reason_and_counted(nowhere, engine):
    runs, metrics = Runs(), fresh_metrics()
    with pytest.raises(GCError, match="unreachable") as err:
        execute(GCSettings(), GCRequest("missing", engine=engine), connection=nowhere, runs=runs, metrics=metrics)
    assert err.value.reason == "lakefs-unavailable"
    (entry,) = runs.history("missing")
    assert entry["success"] is False and entry["reason"] == "lakefs-unavailable"
    assert "unreachable" in entry["error"]
    assert metrics.gc_failures.labels("missing", "lakefs-unavailable")._value.get() == 1
    assert runs.started == ["missing"]  # a run restarts the event-driven commit count
    (lock,) = runs.taken
    assert lock.released and not lock.held  # the next run is not refused as busy
