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

from spark_jobs.core import parquet_bytes
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


def write_plan_parts(ns: Namespace, summary: Summary, *, ranges: Iterable[str], retained: Iterable[str]) -> None:
    """A plan whose deleted list its parts already hold (``Summary.plan_parts``, written by the dataset steps)."""
    run_id = summary.run_id
    ns.write_many({core.ranges_key(run_id): json.dumps(sorted(ranges)).encode(),
                   core.retained_key(run_id): json.dumps(sorted(retained)).encode()})
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
        raise PlanError(f"no GC plan {run_id!r} in {ns.config.namespace}: {exc}", exc.reason_or("no-plan")) from None
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
    keys: list[str] | None  # None: not read (the sweep reads each part where it deletes it)
    sizes: list[int] | None
    ranges: set[str] | None  # None: not recorded (the re-check then reads every HEAD's ranges)
    retained: set[str] | None

    @property
    def parts(self) -> list[tuple[int, int]]:
        """(part number, objects) of each part of the deleted list, in key order."""
        return plan_parts(self.summary)


def plan_parts(summary: Summary) -> list[tuple[int, int]]:
    return [(int(p), int(n)) for p, n in summary.plan_parts] or [(0, summary.num_deleted_objects)]


def read_deleted_list(ns: Namespace, summary: Summary) -> tuple[list[str], list[int]]:
    """Every key (and size) a plan lists, its parts read in order: for views of one run, not for a sweep."""
    keys: list[str] = []
    sizes: list[int] = []
    for part, _ in plan_parts(summary):
        k, z = core.read_deleted(ns.read(core.plan_part_key(summary.run_id, part)))
        keys += k
        sizes += z
    return keys, sizes


def _part_rows(ns: Namespace, key: str) -> int:
    """The rows a Parquet part says it holds, from its footer alone (two ranged reads)."""

    size = ns.size(key)
    if size < 12:
        raise ValueError(f"{size} bytes is no Parquet file")
    tail = ns.read_range(key, size - 8, size)
    length = int.from_bytes(tail[:4], "little")
    if tail[4:] != b"PAR1" or length + 12 > size:
        raise ValueError("no Parquet footer")
    footer = ns.read_range(key, size - 8 - length, size - 8)
    return parquet_bytes.rows(b"PAR1" + footer + tail)


def read_plan(ns: Namespace, run_id: str, repository_id: str, *, keys: bool = True) -> StoredPlan:
    """A plan a sweep may execute, or a PlanError that says why not. ``keys``: read its deleted list whole (else
    only each part's footer is checked against what the summary says it holds)."""
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
    parts = plan_parts(summary)
    listed_keys: list[str] | None = [] if keys else None
    listed_sizes: list[int] | None = [] if keys else None
    counted = 0
    try:
        if keys:
            for part, _ in parts:
                k, z = core.read_deleted(ns.read(core.plan_part_key(run_id, part)))
                listed_keys += k  # type: ignore[operator]
                listed_sizes += z  # type: ignore[operator]
            counted = len(listed_keys)  # type: ignore[arg-type]
        else:
            from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

            with ThreadPoolExecutor(16) as pool:
                found = list(pool.map(lambda p: _part_rows(ns, core.plan_part_key(run_id, p[0])), parts))
            if any(f != n for f, (_, n) in zip(found, parts, strict=True)):
                raise ValueError("a part holds another number of objects than the summary says")
            counted = sum(found)
    except (StorageError, Exception) as exc:  # noqa: BLE001 - pyarrow's errors vary: a torn plan is no plan
        reason = exc.reason_or("failed-plan") if isinstance(exc, StorageError) else "failed-plan"
        raise PlanError(f"GC plan {run_id}: its list of objects is missing or unreadable ({exc})", reason) \
            from None
    if counted != summary.num_deleted_objects:
        raise PlanError(f"GC plan {run_id} lists {counted} objects but its summary says "
                        f"{summary.num_deleted_objects}: incomplete, not executed", "failed-plan")
    return StoredPlan(summary, listed_keys, listed_sizes, _optional_set(ns, core.ranges_key(run_id)),
                _optional_set(ns, core.retained_key(run_id)))


def _optional_set(ns: Namespace, key: str) -> set[str] | None:
    try:
        value = json.loads(ns.read(key))
    except (StorageError, ValueError):
        return None
    return set(value) if isinstance(value, list) else None
