"""The GC runner's bookkeeping with in-memory stand-ins (tests/fakes.py): no services needed."""

from __future__ import annotations

import pytest

from tests.fakes import FakeLakeFS, MemoryRuns, fresh_metrics
from workers.gc.run import GCError
from workers.gc.runner import Busy, GCRequest, execute
from workers.lakefs.errors import NotFound
from workers.settings import GCSettings


def test_a_repository_already_being_collected_is_refused():
    runs = MemoryRuns(busy={"repo-a"})
    with pytest.raises(Busy, match="another GC"):
        execute(FakeLakeFS(), GCSettings(), GCRequest("repo-a"), runs=runs)
    assert runs.history("repo-a") == []


def test_failures_are_recorded_with_their_reason_and_counted():
    runs, metrics = MemoryRuns(), fresh_metrics()
    with pytest.raises(NotFound):
        execute(FakeLakeFS(), GCSettings(), GCRequest("missing"), runs=runs, metrics=metrics)
    (entry,) = runs.history("missing")
    assert entry["success"] is False and entry["reason"] == "lakefs"
    assert metrics.gc_failures.labels("missing", "lakefs")._value.get() == 1
    assert runs.started == ["missing"]  # a run restarts the event-driven commit count


def test_a_namespace_the_janitor_cannot_open_is_a_clear_failure():
    runs = MemoryRuns()
    lakefs = FakeLakeFS({"gcs-repo": "gs://bucket/ns"})
    with pytest.raises(GCError, match="only local:// and s3://") as err:
        execute(lakefs, GCSettings(), GCRequest("gcs-repo"), runs=runs)
    assert err.value.reason == "storage-config"
    assert runs.history("gcs-repo")[0]["reason"] == "storage-config"


def test_spark_progress_events_use_the_in_process_phase_names():
    from workers.gc.runner import spark_progress  # noqa: PLC0415

    assert spark_progress({"event": "progress", "phase": "commits", "commits": 40, "retained": 12}) == ("commits", 12)
    assert spark_progress({"event": "progress", "phase": "listed", "objects": 900, "units": 3}) == (
        "objects listed", 900)
    assert spark_progress({"event": "progress", "phase": "deleted", "deleted": 5}) == ("deleted", 5)
    assert spark_progress({"event": "progress", "phase": "start", "app_id": "x"}) is None
    assert spark_progress({"event": "result", "phase": "deleted"}) is None
