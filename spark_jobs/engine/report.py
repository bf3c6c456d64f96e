"""The GC's records in the namespace, as ``spark_jobs.core.report`` lays them out (where lakeFS's own GC writes its
report, so tools that read lakeFS GC reports read ours): one run id, one record (summary.json, rewritten by the
sweep), the plan's deleted list, the ranges and commits the mark read and retained. A plan marked on one runner
is swept on the other."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from spark_jobs.core import report as core
from spark_jobs.core.plan import StoredObject
from spark_jobs.core.report import Summary
from spark_jobs.engine.stores import Namespace, StorageError


def new_run_id(now: datetime) -> str:
    """Sorts newest first like lakeFS's descending xids: 10^10 - seconds, then randomness."""
    return f"{10**10 - int(now.timestamp()):010d}-{secrets.token_hex(6)}"


class PlanError(RuntimeError):
    """A plan that cannot be swept: missing, unreadable, incomplete, of another format, or a dry run."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def write_plan(ns: Namespace, summary: Summary, *, deleted: Sequence[StoredObject], ranges: Iterable[str],
               retained: Iterable[str]) -> None:
    run_id = summary.run_id
    ns.write_many({core.deleted_key(run_id): core.deleted_parquet([o.key for o in deleted], [o.size for o in deleted]),
                   core.ranges_key(run_id): json.dumps(sorted(ranges)).encode(),
                   core.retained_key(run_id): json.dumps(sorted(retained)).encode()})
    # summary.json last: its presence with marked=true is what makes the plan usable.
    write_summary(ns, summary)


def write_summary(ns: Namespace, summary: Summary) -> None:
    ns.write(core.summary_key(summary.run_id), summary.dumps())


def read_summary(ns: Namespace, run_id: str) -> Summary:
    try:
        key = core.summary_key(run_id)
    except ValueError as exc:
        raise PlanError(str(exc), "no-plan") from None
    try:
        raw = ns.read(key)
    except StorageError as exc:
        raise PlanError(f"no GC plan {run_id!r} in {ns.config.namespace}: {exc}", "no-plan") from None
    try:
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        return Summary.from_dict(data)
    except (ValueError, TypeError) as exc:
        raise PlanError(f"GC plan {run_id}: unreadable summary.json ({exc})", "no-plan") from None


@dataclass
class StoredPlan:
    summary: Summary
    keys: list[str]
    sizes: list[int]
    ranges: set[str] | None  # None: not recorded (the re-check then reads every HEAD's ranges)
    retained: set[str] | None


def read_plan(ns: Namespace, run_id: str, repository_id: str) -> StoredPlan:
    """A plan a sweep may execute, or a PlanError that says why not."""
    summary = read_summary(ns, run_id)
    if summary.format != core.FORMAT:
        raise PlanError(f"GC plan {run_id} has format {summary.format}, this janitor sweeps format {core.FORMAT}: "
                        "run a new plan", "no-plan")
    if summary.repository_id != repository_id:
        raise PlanError(f"plan {run_id} belongs to lakefs://{summary.repository_id}, not {repository_id}", "no-plan")
    if not summary.marked:
        raise PlanError(f"GC plan {run_id} did not complete its mark; it will not be executed", "failed-plan")
    if summary.dry_run:
        raise PlanError(f"plan {run_id} was a dry run; run a plan without --dry-run to sweep", "dry-run-plan")
    try:
        keys, sizes = core.read_deleted(ns.read(core.deleted_key(run_id)))
    except (StorageError, Exception) as exc:  # noqa: BLE001 - pyarrow's errors vary: a torn plan is no plan
        raise PlanError(f"GC plan {run_id}: its list of objects is missing or unreadable ({exc})", "failed-plan") \
            from None
    if len(keys) != summary.num_deleted_objects:
        raise PlanError(f"GC plan {run_id} lists {len(keys)} objects but its summary says "
                        f"{summary.num_deleted_objects}: incomplete, not executed", "failed-plan")
    return StoredPlan(summary, keys, sizes, _optional_set(ns, core.ranges_key(run_id)),
                _optional_set(ns, core.retained_key(run_id)))


def _optional_set(ns: Namespace, key: str) -> set[str] | None:
    try:
        value = json.loads(ns.read(key))
    except (StorageError, ValueError):
        return None
    return set(value) if isinstance(value, list) else None
