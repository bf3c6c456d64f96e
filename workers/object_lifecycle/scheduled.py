"""Scheduled object lifecycle runs: every repository in turn, one pass at a time across workers and replicas."""

from __future__ import annotations

from datetime import datetime

from workers.object_lifecycle.outcomes import RunReport
from workers.object_lifecycle.run import RunOptions, run_repository
from workers.object_lifecycle.store import ObjectLifecycleRecords
from workers.shared import runs
from workers.shared.lakefs.client import LakeFS
from workers.shared.metrics import Metrics
from workers.shared.settings import Settings

__all__ = ["options_from", "run_all", "run_repository"]


def options_from(settings: Settings) -> RunOptions:
    return RunOptions(max_deletions=settings.object_lifecycle_max_deletions_per_run,
                      lock_seconds=settings.object_lifecycle_lock_seconds)


def run_all(lakefs: LakeFS, records: ObjectLifecycleRecords, now: datetime, *, options: RunOptions,
            metrics: Metrics | None = None) -> list[RunReport] | None:
    """Every repository in turn; None when another pass holds the lock."""
    return runs.run_all(lakefs, records.run_lock(None, options.lock_seconds),
                        lambda repository_id: run_repository(lakefs, records, repository_id, now=now,
                                                             options=options, metrics=metrics),
                        what="object lifecycle")
