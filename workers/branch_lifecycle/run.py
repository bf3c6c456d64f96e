"""A branch lifecycle run for one repository: one real run at a time (a Redis lock that expires, so a crashed run
cannot block the next one forever), its metrics, and the optional warning before a deletion. The plan and the
deletions themselves are ``deletions``'s."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

import requests

from spark_jobs.core.durations import parse_duration
from workers.branch_lifecycle.deletions import Plan, RunReport, decision_dict, execute, pending_within, plan
from workers.branch_lifecycle.store import LifecycleRecords
from workers.idle_clock.store import ClockStore
from workers.shared.lakefs.client import LakeFS
from workers.shared.locks import release_quietly, still_held
from workers.shared.metrics import Metrics
from workers.shared.runs import refuse_future
from workers.shared.settings import Settings

log = logging.getLogger(__name__)

Notifier = Callable[[str, dict], None]


@dataclass(frozen=True)
class LifecycleOptions:
    max_deletions: int = 100
    adopt_untracked: bool = False
    lock_seconds: int = 3600
    warn_before: timedelta | None = None
    notify_url: str | None = None
    max_stats: int = 1000  # staged objects stat'ed per branch when it is looked at again before deletion

    @classmethod
    def from_settings(cls, s: Settings) -> LifecycleOptions:
        warn = parse_duration(s.lifecycle_warn_before) if s.lifecycle_warn_before else None
        return cls(max_deletions=s.lifecycle_max_deletions, adopt_untracked=s.lifecycle_adopt_untracked,
                   lock_seconds=s.lifecycle_lock_seconds, warn_before=warn, notify_url=s.lifecycle_notify_url,
                   max_stats=s.reconcile_max_staged_stats)


def post_json(url: str, body: dict) -> None:
    requests.post(url, json=body, timeout=10).raise_for_status()


def run_repository(lakefs: LakeFS, clock: ClockStore, repository_id: str, *, now: datetime, options: LifecycleOptions,
                   dry_run: bool = False, metrics: Metrics | None = None,
                   notify: Notifier = post_json) -> RunReport:
    """One run over the repository's branches: a real one holds the repository's lock, counts its metrics and
    sends the warnings; a dry run deletes and writes nothing, and takes no lock."""
    if not dry_run:
        refuse_future(now, would="would delete branches that are not idle yet")
    if dry_run:  # deletes nothing, writes nothing: no reason to hold up a real run
        the_plan = plan(lakefs, clock, repository_id, now=now, adopt_untracked=options.adopt_untracked,
                        max_stats=options.max_stats)
        return execute(lakefs, clock, the_plan, dry_run=True, max_deletions=options.max_deletions,
                       max_stats=options.max_stats)
    lock = LifecycleRecords.beside(clock).run_lock(repository_id, options.lock_seconds)
    if not lock.acquire():
        log.info("lifecycle: another run holds the lock for %s; skipped", repository_id)
        return RunReport(repository_id, dry_run, locked_out=True)
    started = time.monotonic()
    try:
        the_plan = plan(lakefs, clock, repository_id, now=now, adopt_untracked=options.adopt_untracked,
                        max_stats=options.max_stats, record=True)
        report = execute(lakefs, clock, the_plan, max_deletions=options.max_deletions, metrics=metrics,
                         still_ours=still_held(lock), max_stats=options.max_stats)
        _report_pending(the_plan, report, options, metrics)
        _warn(clock, the_plan, options, notify)
    finally:
        release_quietly(lock, "lifecycle")
    if metrics:
        metrics.lifecycle_seconds.observe(time.monotonic() - started)
        if report.succeeded:
            metrics.lifecycle_last_success.labels(repository_id).set(time.time())
    return report


def _report_pending(the_plan: Plan, report: RunReport, options: LifecycleOptions, metrics: Metrics | None) -> None:
    if metrics is None:
        return
    deleted = {o.branch_id for o in report.outcomes if o.result in ("deleted", "gone")}
    due = [d for d in pending_within(the_plan, options.warn_before or timedelta(0)) if d.branch_id not in deleted]
    metrics.pending_deletion.labels(the_plan.repository_id).set(len(due))


def _warn(clock: ClockStore, the_plan: Plan, options: LifecycleOptions, notify: Notifier) -> None:
    window = options.warn_before or timedelta(0)
    upcoming = [d for d in pending_within(the_plan, window) if d.action == "keep"]
    if not (options.notify_url and upcoming):
        return
    records = LifecycleRecords.beside(clock)
    ttl = int(window.total_seconds()) + 86400
    fresh = [d for d in upcoming if records.first_warning(the_plan.repository_id, d.branch_id, d.delete_at, ttl_seconds=ttl)]
    if not fresh:
        return
    body = {"repository_id": the_plan.repository_id, "evaluated_at": the_plan.now.isoformat(),
            "branches": [decision_dict(d) for d in fresh]}
    try:
        notify(options.notify_url, body)
    except requests.RequestException as exc:
        log.warning("lifecycle: warning POST to %s failed (%s); will retry next run", options.notify_url, exc)
        records.forget_warnings(the_plan.repository_id, [(d.branch_id, d.delete_at) for d in fresh])
