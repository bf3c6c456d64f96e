"""GC safety on a real lakeFS, through the engine both runners share (in-process runner here; tests/spark runs
the same steps on Spark): a branch reset between mark and sweep loses nothing, a dry run deletes nothing, objects
newer than the cutoff survive, the plan is written under _lakefs/ only."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import lakefs_sdk
import pytest

from spark_jobs.core import report
from spark_jobs.engine.runtime.context import GCError
from spark_jobs.engine.runtime.lakefs_api import LakeFSApi
from spark_jobs.engine.sweep import sweep
from tests.gc_engine import Collector, runner_of


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def overwritten(lakefs, lakefs_server):
    """main: c0 (40 days ago) with 6 objects, c1 (30 days ago) overwriting all of them; retention 7 days."""
    name = f"gs-{uuid.uuid4().hex[:10]}"
    lakefs.repositories.create_repository(lakefs_sdk.RepositoryCreation(
        name=name, storage_namespace=f"local://{name}", default_branch="main"))
    now = datetime.now(UTC)
    commits = []
    for days in (40, 30):
        for i in range(6):
            lakefs.upload(name, "main", f"t/part-{i}", data=f"{days} {i} {uuid.uuid4()}".encode())
        commits.append(lakefs.commits.commit(name, "main", lakefs_sdk.CommitCreation(
            message=f"{days}", date=int((now - timedelta(days=days)).timestamp()))).id)
    lakefs.repositories.set_gc_rules(name, lakefs_sdk.GarbageCollectionRules(default_retention_days=7,
                                                                             branches=[]))
    yield name, commits, Collector(lakefs_server.endpoint), Path(lakefs_server.dir) / "block" / name
    lakefs.repositories.delete_repository(name, force=True)


def test_branch_reset_between_mark_and_sweep_loses_nothing(lakefs, overwritten):
    name, (c0, _c1), gc, root = overwritten
    now = datetime.now(UTC) + timedelta(seconds=1)
    marked = gc.mark(name, now=now, min_age=timedelta(0))
    assert marked.summary.num_deleted_objects == 6  # c0's versions
    old = {f"t/part-{i}": lakefs.objects.get_object(name, c0, f"t/part-{i}") for i in range(6)}
    lakefs.experimental.hard_reset_branch(name, "main", c0)  # main goes back to c0 during the run
    swept = gc.sweep(name, marked.summary.run_id)
    assert swept.spared_by_recheck == 6 and swept.swept == 0 and swept.phase == "swept"
    assert {p: lakefs.objects.get_object(name, "main", p) for p in old} == old


@pytest.mark.spark
def test_a_recheck_on_executors_spares_exactly_what_new_ranges_reach(lakefs, overwritten, monkeypatch, request):
    """On Spark, the re-check of many new ranges is done by executors, each returning only the keys of its ranges
    the plan holds (DRIVER_RANGES 0: every new range so): a branch created during the run from c0, with half of
    c0's paths deleted, spares those it still reaches and no more."""
    monkeypatch.setattr(sweep, "DRIVER_RANGES", 0)
    name, (c0, _c1), gc, _root = overwritten
    runner, runner_name = runner_of("spark", request)
    gc = replace(gc, runner=runner, runner_name=runner_name)
    now = datetime.now(UTC) + timedelta(seconds=1)
    marked = gc.mark(name, now=now, min_age=timedelta(0))
    assert marked.summary.num_deleted_objects == 6  # c0's versions
    lakefs.branches.create_branch(name, lakefs_sdk.BranchCreation(name="back", source=c0))
    lakefs.objects.delete_objects(name, "back", lakefs_sdk.PathList(paths=[f"t/part-{i}" for i in range(3)]))
    lakefs.commits.commit(name, "back", lakefs_sdk.CommitCreation(message="half of c0"))
    kept = {f"t/part-{i}": lakefs.objects.get_object(name, c0, f"t/part-{i}") for i in range(3, 6)}
    swept = gc.sweep(name, marked.summary.run_id)
    assert swept.new_ranges_read >= 1 and swept.spared_by_recheck == 3 and swept.swept == 3, swept
    assert {p: lakefs.objects.get_object(name, "back", p) for p in kept} == kept


def test_a_commit_made_and_orphaned_while_lakefs_is_asked_loses_nothing(lakefs, overwritten, monkeypatch):
    """An object staged before the run, committed between the run's two questions to lakeFS (what is staged, which
    commits exist) and orphaned at once by a reset. Asked in lakeFS's own GC order, staged entries first, the
    object is in one answer or the other; asked the other way round, it is in neither and would be deleted."""
    name, (_c0, c1), gc, _root = overwritten
    data = f"late {uuid.uuid4()}".encode()
    lakefs.upload(name, "main", "late/obj", data=data)
    now = datetime.now(UTC) + timedelta(seconds=1)
    orphaned: list[str] = []

    def after_first_answer(method: str) -> None:
        original = getattr(LakeFSApi, method)

        def wrapped(self, *args, **kwargs):
            answer = original(self, *args, **kwargs)
            if not orphaned:  # a writer acts right after lakeFS answered the first of the two questions
                orphaned.append(lakefs.commits.commit(name, "main", lakefs_sdk.CommitCreation(message="late")).id)
                lakefs.experimental.hard_reset_branch(name, "main", c1)
            return answer
        monkeypatch.setattr(LakeFSApi, method, wrapped)

    after_first_answer("prepare_uncommitted")
    after_first_answer("prepared_commits")
    summary, _ = gc.run(name, now=now, min_age=timedelta(0))
    assert orphaned and summary.phase == "swept" and summary.swept == 6  # c0's versions, nothing else
    assert lakefs.objects.get_object(name, orphaned[0], "late/obj") == data


def test_dry_run_and_cutoff_delete_nothing_and_write_only_under_lakefs(overwritten):
    name, _commits, gc, root = overwritten
    before = _files(root)
    now = datetime.now(UTC) + timedelta(seconds=1)
    dry, _ = gc.run(name, now=now, min_age=timedelta(0), dry_run=True)
    assert dry.num_deleted_objects == 6 and dry.dry_run and dry.phase == "mark"
    # default cutoff (lakeFS's 24 h grace period): every object here is minutes old, so nothing is a candidate
    safe, _ = gc.run(name, now=now, min_age=None)
    assert safe.num_deleted_objects == 0 and safe.too_new == 6 and safe.swept == 0
    after = _files(root)
    assert before <= after  # nothing deleted
    assert all(f.startswith("_lakefs/") for f in after - before)  # and nothing written outside _lakefs/
    with pytest.raises(GCError, match="was a dry run") as refused:
        gc.sweep(name, dry.run_id)
    assert refused.value.reason == "dry-run-plan"
    refused_after = _files(root)
    assert after <= refused_after and all(f.startswith("_lakefs/") for f in refused_after - after)
    assert report.run_dir(dry.run_id).startswith("_lakefs/retention/gc/unified/")
