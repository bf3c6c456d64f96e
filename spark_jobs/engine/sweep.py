"""The sweep: execute a stored, successful plan. Before deleting, re-check against the repository as it is now:
anything that became reachable since the mark (a branch reset to an old commit, a new staged write pointing at an
old address) is dropped from the deletion. Only ranges the mark did not read are read again."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from spark_jobs.engine import report
from spark_jobs.engine.lakefs_api import LakeFSApi
from spark_jobs.engine.parallel import Runner
from spark_jobs.engine.plan import (
    GCError,
    Graph,
    JobContextConfig,
    OpenContext,
    retained_metaranges,
    uncommitted_addresses,
    unit_metarange_ranges,
    unit_range_addresses,
)
from spark_jobs.engine.storage import S3_BATCH, StorageError


def unit_delete(ctx: OpenContext, batch: list[str]) -> list[dict[str, Any]]:
    result = ctx.ns.delete(batch)
    return [{"deleted": result.deleted, "requests": result.requests, "failed": result.failed or []}]


def sweep(api: LakeFSApi, runner: Runner, config: JobContextConfig, *, mark_id: str, graph: Graph, now: datetime,
          range_partitions: int = 50, address_partitions: int = 200,
          progress: Callable[..., None] = lambda **_: None) -> dict[str, Any]:
    started = time.monotonic()
    ctx = config.open()
    try:
        summary = report.read_summary(ctx.ns, mark_id)
        if not summary.get("success"):
            raise GCError(f"plan {mark_id} did not succeed: refusing to sweep it", "failed-plan")
        if summary.get("dry_run"):
            raise GCError(f"plan {mark_id} is a dry run: refusing to sweep it", "dry-run-plan")
        planned = report.read_deleted(ctx.ns, mark_id)
        read_before = report.read_ranges(ctx.ns, mark_id)
        _commits, metaranges = retained_metaranges(graph, now)
        ranges_now = set(runner.map_units(metaranges, unit_metarange_ranges, config.open, partitions=range_partitions))
        new_ranges = sorted(ranges_now - read_before)
        reachable = set(runner.map_units(new_ranges, unit_range_addresses, config.open, partitions=range_partitions))
        reachable |= uncommitted_addresses(api, ctx.ns, config.repository_id, prefixes=ctx.prefixes)
        to_delete = [a for a in planned if a not in reachable]
        progress(phase="recheck", planned=len(planned), new_ranges=len(new_ranges),
                 became_reachable=len(planned) - len(to_delete))
        batches = [to_delete[i:i + S3_BATCH] for i in range(0, len(to_delete), S3_BATCH)]
        results = runner.map_units(batches, unit_delete, config.open, partitions=address_partitions)
        failed = [f for r in results for f in r["failed"]]
        record = {
            "run_id": mark_id, "success": not failed, "swept_at": datetime.now(UTC).isoformat(),
            "planned": len(planned), "became_reachable": len(planned) - len(to_delete),
            "deleted": sum(r["deleted"] for r in results), "delete_requests": sum(r["requests"] for r in results),
            "failed": failed[:100], "num_failed": len(failed), "new_ranges_read": len(new_ranges),
            "seconds": round(time.monotonic() - started, 3),
        }
        progress(phase="deleted", deleted=record["deleted"], failed=len(failed))
        report.write_sweep(ctx.ns, mark_id, record)
        if failed:
            raise GCError(f"{len(failed)} objects could not be deleted, e.g. {failed[0]}", "storage-delete")
        return record
    except StorageError as exc:
        raise GCError(str(exc), "storage") from exc
    finally:
        ctx.close()
