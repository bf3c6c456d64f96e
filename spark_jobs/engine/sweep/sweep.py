"""The sweep: execute a stored, complete plan. Before deleting, re-check against the repository as it is now:
anything that became reachable since the mark (a branch reset or created onto an old commit, a new staged write
pointing at an old address) is dropped from the deletion. Only HEADs off the retained set are read, and of their
ranges only those the mark did not read. Deletions go in the store's batches, spread by the Runner, under the
per-run cap; the record (summary.json) is rewritten with what was done. Each batch is sent only after its deleter
confirmed the run still holds its lease (``engine.lease``): a run whose starter died, or that lost its lease to
another, stops within one batch.

Then the store says whether what was deleted is freed (``Namespace.freeing``): the summary splits the bytes into
freed and still billed (noncurrent versions, soft-deleted blobs). With ``purge_noncurrent`` each deleter also
removes the noncurrent versions of exactly the keys its batch deleted, after confirming the lease again."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from spark_jobs.core.freeing import DELAYED, FREED, UNKNOWN, Verdict
from spark_jobs.core.mark import keys_in_range
from spark_jobs.core.report import Summary
from spark_jobs.core.retention import commit_from_api
from spark_jobs.engine.plan import units
from spark_jobs.engine.reach.mark_source import Files
from spark_jobs.engine.runtime.context import GCError, JobConfig, OpenContext, Progress
from spark_jobs.engine.runtime.lakefs_api import LakeFSApi, LakeFSApiError
from spark_jobs.engine.runtime.parallel import Runner, in_process
from spark_jobs.engine.runtime.repository import uncommitted_addresses
from spark_jobs.engine.state import incremental, report
from spark_jobs.engine.stores import Namespace, StorageError
from spark_jobs.engine.sweep.lease_watch import LeaseLost, LeaseRef, LeaseWatch

log = logging.getLogger(__name__)

CARRY_CAPPED = 100_000  # keys a capped sweep names to the next run; more: the next run lists the namespace
# On a runner of its own (Spark), a re-check that reads more new ranges than this has executors read them, in chunks,
# each task returning only the keys of its ranges the plan holds (what the re-check spares), never every key they
# hold; fewer are read as the mark reads ranges, their keys brought to the driver (16 ranges: ≈ 800,000 keys at
# lakeFS's 50,000-entry cut). Not lean_mark.DRIVER_RANGES: a daily run's comparison holds a few files at a time, not
# the ranges' keys.
DRIVER_RANGES = 16


class DeleteContext(OpenContext):
    """A deleter's context: the namespace, and the lease it checks before each batch (None: a run without one,
    as tests and benchmarks start the engine directly)."""

    def __init__(self, config: JobConfig, lease: LeaseRef | None) -> None:
        super().__init__(config)
        self.lease = LeaseWatch(lease) if lease is not None else None

    def close(self) -> None:
        super().close()
        if self.lease is not None:
            self.lease.close()


def open_deleter(config: JobConfig, lease: LeaseRef | None) -> DeleteContext:
    return DeleteContext(config, lease)


def unit_delete(ctx: DeleteContext, batch: list[str], purge: bool = False) -> list[dict[str, Any]]:
    if ctx.lease is not None:
        ctx.lease.check()
    result = ctx.ns.delete(batch)
    out = {"deleted": result.deleted, "requests": result.requests, "backoffs": result.backoffs,
           "failed": result.failed, "purged": 0, "purged_bytes": 0, "purge_failed": []}
    if purge:
        # only the keys this batch deleted (re-checked with it); a failed one still has its current version
        gone = sorted(set(batch) - not_deleted(batch, batch, result.failed))
        if ctx.lease is not None:
            ctx.lease.check()
        purged = ctx.ns.purge_noncurrent(gone)
        out.update(purged=purged.deleted, purged_bytes=purged.freed_bytes, purge_failed=purged.failed,
                   requests=out["requests"] + purged.requests)
    return [out]


def read_freeing(ns: Namespace) -> Verdict:
    """The store's verdict; a failure to read it is said in the verdict, never a failure of the run."""
    try:
        return ns.freeing()
    except Exception as exc:  # noqa: BLE001 - after the deletions: nothing here may fail the run
        log.warning("gc: reading the settings of %s failed: %s", ns.config.namespace, exc)
        return Verdict(ns.store, UNKNOWN, f"reading the store's settings failed: {type(exc).__name__}: {exc}")


def split_bytes(summary: Summary, verdict: Verdict, swept_bytes: int) -> None:
    """The bytes deleted, freed vs still billed, and until when (None: never, or unknown)."""
    summary.freeing = verdict.as_dict()
    # A purged version is freed at once, unless a soft-delete policy keeps it too (then it is billed until then)
    purged = 0 if verdict.purge_keeps_days else min(summary.purged_bytes, swept_bytes)
    freed_now = swept_bytes if verdict.state == FREED else purged
    summary.bytes_freed, summary.bytes_pending = freed_now, swept_bytes - freed_now
    if summary.bytes_pending and verdict.state == DELAYED and verdict.days is not None and summary.swept_at:
        summary.pending_until = (datetime.fromisoformat(summary.swept_at) + timedelta(days=verdict.days)).isoformat()
    elif summary.bytes_pending and summary.swept_at and summary.purged_bytes >= swept_bytes > 0:
        # every deleted byte was purged and only the soft-delete policy holds it
        summary.pending_until = (datetime.fromisoformat(summary.swept_at)
                                 + timedelta(days=verdict.purge_keeps_days)).isoformat()


def reachable_now(api: LakeFSApi, runner: Runner, config: JobConfig, *, ctx: OpenContext, plan: report.StoredPlan,
                  partitions: int) -> tuple[set[str], int]:
    """What branches reach now that the mark did not account for, and how many ranges that read anew."""
    heads = api.branches(config.repository_id)
    moved = sorted(set(heads.values()) - (plan.retained or set()))
    metaranges = sorted({commit_from_api(api.commit(config.repository_id, h)).meta_range_id for h in moved} - {""})
    files = Files(runner=runner, open_context=config.open, partitions=partitions, driver=ctx)
    new_ranges = sorted({r for _, r in files.spans(metaranges)} - (plan.ranges or set()))
    if in_process(runner) or len(new_ranges) <= DRIVER_RANGES:
        reachable = files.addresses(new_ranges)
    else:  # only what the plan holds of them matters: the executors return that, not every key the ranges hold
        parts = tuple(p for p, n in plan.parts if n)
        size = -(-len(new_ranges) // max(1, partitions))
        chunks = [(plan.summary.run_id, parts, tuple(new_ranges[i:i + size]))
                  for i in range(0, len(new_ranges), size)] if parts else []
        reachable = set(runner.map_units(chunks, unit_planned, config.open, partitions=partitions))
    return reachable | uncommitted_addresses(api, ctx.ns, config.repository_id), len(new_ranges)


def unit_planned(ctx: OpenContext, unit: tuple[str, tuple[int, ...], tuple[str, ...]]) -> list[str]:
    """Of the keys a chunk of ranges points at, those the plan's parts hold (each part read once per chunk)."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415

    run_id, parts, range_ids = unit
    reached: set[str] = set()
    for range_id in range_ids:
        reached |= keys_in_range(ctx.read_range(range_id), ctx.prefixes, ctx.seen_blocks)
    if not reached:
        return []
    value_set = pa.array(sorted(reached), pa.string())
    out: list[str] = []
    for part in parts:
        addresses = units.read_part(ctx, run_id, part)["address"]
        out += addresses.filter(pc.is_in(addresses, value_set=value_set)).to_pylist()
    return out


def not_deleted(planned: list[str], sent: list[str], failed: list[str]) -> set[str]:
    """The planned keys a sweep did not delete: those it did not send (spared by the re-check, over the cap) and
    those that failed. A failure names its key first (``key: why``); when one cannot be matched to a key sent,
    every key sent counts as not deleted (a key asked for again and found gone costs a request, not an object)."""
    sent_set = set(sent)
    failed_keys = {f.split(": ", 1)[0] for f in failed}
    left = set(planned) - sent_set
    return left | (sent_set if not failed_keys <= sent_set else failed_keys)


def sweep(api: LakeFSApi, runner: Runner, config: JobConfig, *, mark_id: str, range_partitions: int = 50,
          address_partitions: int = 200, max_deletions: int | None = None,
          progress: Progress = lambda phase, count: None, lease: LeaseRef | None = None,
          purge_noncurrent: bool = False) -> report.Summary:
    started = time.monotonic()
    ctx = config.open()
    try:
        try:
            plan = report.read_plan(ctx.ns, mark_id, config.repository_id, keys=False)
        except report.PlanError as exc:
            raise GCError(str(exc), exc.reason) from None
        summary = plan.summary
        try:
            spare, summary.new_ranges_read = reachable_now(api, runner, config, ctx=ctx, plan=plan,
                                                           partitions=range_partitions)
        except (StorageError, LakeFSApiError, ValueError) as exc:
            # a store that did not answer is what an operator acts on, whichever step met it
            raise GCError(f"re-checking branches before the sweep failed: {exc}; nothing deleted",
                          exc.reason_or("recheck") if isinstance(exc, StorageError) else "recheck") from exc
        parts = plan.parts
        spare_keys = frozenset(spare)
        if spare_keys:
            counts = dict(runner.map_units([(mark_id, p, spare_keys) for p, _ in parts], units.count_part,
                                           config.open, partitions=address_partitions))
        else:
            counts = dict(parts)
        planned = sum(n for _, n in parts)
        doomed_total = sum(counts.values())
        summary.spared_by_recheck = planned - doomed_total
        allowances: dict[int, int | None] = {p: None for p, _ in parts}
        if max_deletions is not None and doomed_total > max_deletions:
            # a long pause must not produce one huge run: the rest is still garbage next time
            summary.capped = doomed_total - max_deletions
            left = max_deletions
            for p, _ in parts:
                allowances[p] = min(left, counts[p])
                left -= allowances[p]
        # capped keys are named to the next run when few; else it lists the namespace again
        carry = summary.capped <= CARRY_CAPPED
        progress("re-checked", doomed_total - summary.capped)
        work = [(mark_id, p, allowances[p], spare_keys, carry) for p, n in parts if n]
        try:
            results = runner.map_units(work, partial(units.sweep_part, purge=purge_noncurrent),
                                       partial(open_deleter, config, lease), partitions=address_partitions)
        except LeaseLost as exc:
            raise GCError(str(exc), exc.reason) from None
        failed = [f for r in results for f in r["failed"]]
        summary.swept = sum(r["deleted"] for r in results)
        summary.delete_requests = sum(r["requests"] for r in results)
        summary.backoffs = sum(r["backoffs"] for r in results)
        summary.num_failed, summary.failed = len(failed), failed[:100]
        summary.phase, summary.success = "swept", not failed
        summary.swept_at = datetime.now(UTC).isoformat()
        summary.seconds = {**summary.seconds, "sweep": round(time.monotonic() - started, 3)}
        summary.error = f"{len(failed)} objects could not be deleted, e.g. {failed[0]}" if failed else None
        summary.purged_versions = sum(r.get("purged", 0) for r in results)
        summary.purged_bytes = sum(r.get("purged_bytes", 0) for r in results)
        summary.purge_failed = [f for r in results for f in r.get("purge_failed", [])][:100]
        progress("deleted", summary.swept)
        split_bytes(summary, read_freeing(ctx.ns), sum(r["freed_size"] for r in results))
        # what this run leaves for the next one, with what it did not delete (so that nothing garbage is forgotten)
        incremental.promote(ctx.ns, mark_id, [k for r in results for k in r["not_deleted"]],
                            full_next=not carry)
        report.write_summary(ctx.ns, summary)
        if failed:
            raise GCError(summary.error, "storage-delete")
        return summary
    except StorageError as exc:
        raise GCError(str(exc), exc.reason_or("storage-delete")) from exc
    finally:
        ctx.close()
