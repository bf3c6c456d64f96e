"""The GC's records in the namespace, as ``spark_jobs.core.report`` lays them out (where lakeFS's own GC writes its
report, so tools that read lakeFS GC reports read ours), read and written through the engine's fsspec namespace.
Plans are interchangeable between engines: either can sweep a plan the other marked."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from spark_jobs.core import report as core
from spark_jobs.core.plan import StoredObject
from spark_jobs.engine.storage import Namespace, StorageError

run_dir = core.run_dir


def write_plan(ns: Namespace, run_id: str, *, summary: dict[str, Any], deleted: Sequence[StoredObject],
               ranges: Sequence[str]) -> None:
    ns.write(core.deleted_key(run_id), core.deleted_parquet([o.key for o in deleted], [o.size for o in deleted]))
    ns.write(core.ranges_key(run_id), json.dumps(sorted(ranges)).encode())
    # summary.json last: its presence with success=true is what makes the plan usable.
    ns.write(core.summary_key(run_id), json.dumps(summary, sort_keys=True, indent=2).encode())


def read_summary(ns: Namespace, run_id: str) -> dict[str, Any]:
    try:
        return json.loads(ns.read(core.summary_key(run_id)))
    except StorageError:
        raise StorageError(f"no GC plan {run_id!r} in {ns.config.namespace} "
                           f"({core.summary_key(run_id)} is missing)") from None


def read_deleted(ns: Namespace, run_id: str) -> list[str]:
    return core.read_deleted(ns.read(core.deleted_key(run_id)))[0]


def read_ranges(ns: Namespace, run_id: str) -> set[str]:
    """The ranges the mark read; none known (a plan the in-process engine wrote) means the re-check reads all."""
    try:
        return set(json.loads(ns.read(core.ranges_key(run_id))))
    except StorageError:
        return set()


def write_sweep(ns: Namespace, run_id: str, record: dict[str, Any]) -> None:
    ns.write(core.sweep_key(run_id), json.dumps(record, sort_keys=True, indent=1).encode())
