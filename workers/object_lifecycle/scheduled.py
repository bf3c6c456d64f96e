"""Scheduled object lifecycle runs: every repository in turn, one pass at a time across workers and replicas."""

from __future__ import annotations

import logging
from datetime import datetime

from workers.lakefs.client import LakeFS
from workers.locks import release_quietly
from workers.metrics import Metrics
from workers.object_lifecycle.run import RunOptions, RunReport, run_repository
from workers.object_lifecycle.store import ObjectLifecycleRecords
from workers.settings import Settings

log = logging.getLogger(__name__)

__all__ = ["options_from", "run_all", "run_repository"]


def options_from(settings: Settings) -> RunOptions:
    return RunOptions(max_deletions=settings.object_lifecycle_max_deletions_per_run,
                      lock_seconds=settings.object_lifecycle_lock_seconds)


def run_all(lakefs: LakeFS, records: ObjectLifecycleRecords, now: datetime, *, options: RunOptions,
            metrics: Metrics | None = None) -> list[RunReport] | None:
    """Every repository in turn; None when another pass holds the lock."""
    lock = records.run_lock(None, options.lock_seconds)
    if not lock.acquire():
        return None
    try:
        reports = []
        for repo in lakefs.paginate("list repositories", lakefs.repositories.list_repositories):
            try:
                reports.append(run_repository(lakefs, records, repo.id, now=now, options=options, metrics=metrics))
            except Exception:  # one broken repository must not stop the others
                log.exception("object lifecycle: run for %s failed", repo.id)
        return reports
    finally:
        release_quietly(lock, "object lifecycle")
