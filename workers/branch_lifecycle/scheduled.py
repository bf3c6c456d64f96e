"""The scheduled branch lifecycle: every repository in turn, one pass at a time across workers and replicas."""

from __future__ import annotations

from datetime import datetime

from workers.branch_lifecycle.deletions import RunReport
from workers.branch_lifecycle.run import LifecycleOptions, run_repository
from workers.branch_lifecycle.store import LifecycleRecords
from workers.idle_clock.store import ClockStore
from workers.shared import runs
from workers.shared.lakefs.client import LakeFS
from workers.shared.metrics import Metrics


def run_all(lakefs: LakeFS, clock: ClockStore, now: datetime, *, options: LifecycleOptions,
            metrics: Metrics | None = None) -> list[RunReport] | None:
    """Every repository in turn; None when another pass (another worker or beat replica) holds the lock."""
    return runs.run_all(lakefs, LifecycleRecords.beside(clock).run_lock(None, options.lock_seconds),
                        lambda repository_id: run_repository(lakefs, clock, repository_id, now=now, options=options,
                                                             metrics=metrics), what="lifecycle")
