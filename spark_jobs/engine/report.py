"""The GC's records in the namespace, where lakeFS's own GC writes its report:
``_lakefs/retention/gc/unified/<run_id>/summary.json`` and ``deleted/part-00000.parquet`` (column ``address``),
so tools that read lakeFS GC reports read ours. We add ``ranges.json`` (the ranges the mark read, so the sweep's
re-check reads only new ones) and ``sweep.json`` (what a sweep of this plan did)."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from typing import Any

from spark_jobs.engine.storage import Namespace, StorageError

REPORT_PREFIX = "_lakefs/retention/gc/unified"


def run_dir(run_id: str) -> str:
    if not run_id or "/" in run_id or run_id.startswith("."):
        raise ValueError(f"bad GC run id {run_id!r}")
    return f"{REPORT_PREFIX}/{run_id}"


def write_plan(ns: Namespace, run_id: str, *, summary: dict[str, Any], deleted: Sequence[str],
               ranges: Sequence[str]) -> None:
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.parquet as pq  # noqa: PLC0415

    base = run_dir(run_id)
    table = pa.table({"address": pa.array(sorted(deleted), type=pa.string())})
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="snappy")
    ns.write(f"{base}/deleted/part-00000.parquet", buf.getvalue())
    ns.write(f"{base}/ranges.json", json.dumps(sorted(ranges)).encode())
    # summary.json last: its presence with success=true is what makes the plan usable.
    ns.write(f"{base}/summary.json", json.dumps(summary, sort_keys=True, indent=1).encode())


def read_summary(ns: Namespace, run_id: str) -> dict[str, Any]:
    try:
        return json.loads(ns.read(f"{run_dir(run_id)}/summary.json"))
    except StorageError:
        raise StorageError(f"no GC plan {run_id!r} in {ns.config.namespace} "
                           f"({run_dir(run_id)}/summary.json is missing)") from None


def read_deleted(ns: Namespace, run_id: str) -> list[str]:
    import pyarrow.parquet as pq  # noqa: PLC0415

    data = ns.read(f"{run_dir(run_id)}/deleted/part-00000.parquet")
    return pq.read_table(io.BytesIO(data)).column("address").to_pylist()


def read_ranges(ns: Namespace, run_id: str) -> set[str]:
    return set(json.loads(ns.read(f"{run_dir(run_id)}/ranges.json")))


def write_sweep(ns: Namespace, run_id: str, record: dict[str, Any]) -> None:
    ns.write(f"{run_dir(run_id)}/sweep.json", json.dumps(record, sort_keys=True, indent=1).encode())
