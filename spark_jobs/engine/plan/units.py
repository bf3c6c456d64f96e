"""The per-unit steps both dataset backends run (on the driver's threads or on executors): each turns one unit of
work (a range file, a listing slice, a file of staged addresses, a part of the plan) into Arrow record batches or
a few counters, never into a Python object per key."""

from __future__ import annotations

import io
import logging
from collections.abc import Container, Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from spark_jobs.core import columns, kept_index, parquet_bytes
from spark_jobs.core import report as core_report
from spark_jobs.core.addresses import FULL, RELATIVE
from spark_jobs.core.cleaning import CleaningPolicy
from spark_jobs.core.path_columns import scope_masks, versions_limits
from spark_jobs.core.plan import path_prefix
from spark_jobs.core.range_arrow import numbered_batch_groups, range_batch_groups
from spark_jobs.engine.runtime.context import GCError, OpenContext

log = logging.getLogger(__name__)

INDEX_SCHEMA = pa.schema([pa.field("hash", pa.int64(), nullable=False),  # a uint64 seen as signed (Spark)
                          pa.field("count", pa.int64(), nullable=False)])
PART_SCHEMA = pa.schema([pa.field("part", pa.int64(), nullable=False), pa.field("rows", pa.int64(), nullable=False),
                         pa.field("bytes", pa.int64(), nullable=False), pa.field("size", pa.int64(), nullable=False)])
HASH_STEP = 8192  # keys hashed per Python list (key_counts)
ROWS_PER_PART = 250_000  # ≈ 5–25 MB of Parquet (every file the GC writes stays far under 1 GiB); a sweep unit each


def range_keys(ctx: OpenContext, range_id: str) -> pa.RecordBatch:
    """The namespace-relative keys one range's entries point at, in key order, repeats kept (one per entry):
    addresses outside the namespace left out."""
    parts = []
    for batch in range_batch_groups(ctx.read_range(range_id)):  # a group of blocks at a time: bounded transients
        keys = columns.relative_keys(batch.column("address"), batch.column("address_type"), ctx.prefixes)
        parts.append(keys.filter(keys.is_valid()))
        del batch, keys
    # the keys that outlive the decode in blocks of their own (the system's allocator: a range's keys are MiBs, mapped
    # and given back whole), not between the decode's freed transients in Arrow's allocator, which keeps those pages
    keys = pa.concat_arrays(parts, memory_pool=pa.system_memory_pool()) if parts else pa.array([], pa.string())
    return pa.RecordBatch.from_arrays([keys], schema=columns.KEYS_SCHEMA)


# A range's entries inside the namespace: what the scoped reach's rows, --by-path's and keep_versions' are made of.
ENTRY_GROUP_BLOCKS = 64  # ≈ 1,500 entries at lakeFS's 4 KB blocks: what keep_versions decodes again or skips
ENTRIES_SCHEMA = pa.schema([pa.field("path", pa.binary(), nullable=False),
                            pa.field("key", pa.string(), nullable=False)])


def range_entry_groups(ctx: OpenContext, range_id: str, *, only: Container[int] | None = None,
                       blocks: int = ENTRY_GROUP_BLOCKS) -> Iterator[tuple[int, pa.RecordBatch]]:
    """The path and namespace-relative key (``ENTRIES_SCHEMA``) of the entries of one range, ``blocks`` data
    blocks at a time, in key order, addresses outside the namespace left out: every group, empty ones included,
    numbered by its place in the file (``numbered_batch_groups``), so that a second read with ``only`` (those
    groups alone, the others' blocks left undecoded) gives each group as the first read gave it."""
    for group, batch in numbered_batch_groups(ctx.read_range(range_id), blocks, only=only):
        keys = columns.relative_keys(batch.column("address"), batch.column("address_type"), ctx.prefixes)
        valid = keys.is_valid()
        yield group, pa.RecordBatch.from_arrays([batch.column("path").filter(valid), keys.filter(valid)],
                                                schema=ENTRIES_SCHEMA)
        del batch, keys


# A path-scoped reach's rows: the key, its range (the unit's ordinal in the run's range list: a number, not the
# 64-character id, in every row) and the scope of its path (``core.mark.scope_mask``).
SCOPED_SCHEMA = pa.schema([pa.field("key", pa.string(), nullable=False),
                           pa.field("range", pa.int64(), nullable=False),
                           pa.field("scope", pa.int64(), nullable=False)])


def scoped_unit(ordinal: int, range_id: str) -> str:
    """The name of a scoped reach's unit: a range and its ordinal (a unit is one string on Spark)."""
    return f"{ordinal}:{range_id}"


def range_scoped_keys(ctx: OpenContext, unit: str, *, path_policies: tuple[CleaningPolicy, ...]) -> pa.RecordBatch:
    """``range_keys`` of the range ``unit`` names (``scoped_unit``), each key with the unit's ordinal and the scope
    mask of its entry's path over ``path_policies`` (``core.mark.scope_mask``, a batch at a time:
    ``core.path_columns``)."""
    ordinal, range_id = unit.split(":", 1)
    keys_parts, masks_parts = [], []
    for _, entries in range_entry_groups(ctx, range_id, blocks=512):
        masks_parts.append(scope_masks(entries.column("path"), path_policies))
        keys_parts.append(entries.column("key"))
        del entries
    keys = pa.concat_arrays(keys_parts, memory_pool=pa.system_memory_pool()) if keys_parts else \
        pa.array([], pa.string())
    masks = pa.concat_arrays(masks_parts) if masks_parts else pa.array([], pa.int64())
    return pa.RecordBatch.from_arrays([keys, pa.array(np.full(len(keys), int(ordinal), np.int64)), masks],
                                      schema=SCOPED_SCHEMA)


# --by-path's rows: an entry's key, its range's ordinal among the history's ranges (sorted), its path.
PATHS_SCHEMA = pa.schema([pa.field("key", pa.string(), nullable=False),
                          pa.field("range", pa.int64(), nullable=False),
                          pa.field("path", pa.binary(), nullable=False)])
PREFIX_SCHEMA = pa.schema([pa.field("prefix", pa.string(), nullable=False),
                           pa.field("size", pa.int64(), nullable=False)])


def range_paths(ctx: OpenContext, unit: str) -> pa.RecordBatch:
    """Every entry of the range ``unit`` names (``scoped_unit``) inside the namespace: key, ordinal, path."""
    ordinal, range_id = unit.split(":", 1)
    parts = []
    for _, entries in range_entry_groups(ctx, range_id, blocks=512):
        parts.append(pa.RecordBatch.from_arrays(
            [entries.column("key"), pa.array(np.full(entries.num_rows, int(ordinal), np.int64)),
             entries.column("path")], schema=PATHS_SCHEMA))
        del entries
    return pa.concat_batches(parts) if parts else pa.RecordBatch.from_pylist([], schema=PATHS_SCHEMA)


def path_prefixes(batch: pa.RecordBatch, depth: int) -> pa.RecordBatch:
    """(path or null, size) rows of deleted objects as (prefix, size): ``core.plan.path_prefix`` of each path."""
    prefixes = [path_prefix(None if p is None else p.decode(errors="replace"), depth)
                for p in batch.column("path").to_pylist()]
    return pa.RecordBatch.from_arrays([pa.array(prefixes, pa.string()), batch.column("size")],
                                      schema=PREFIX_SCHEMA)


# keep_versions' rows: the key of an entry and its path, the line (a matching branch's ordinal) and the position on
# it where the line first holds the entry's range, and how many versions of the path the line keeps.
VERSIONS_SCHEMA = pa.schema([pa.field("line", pa.int64(), nullable=False),
                             pa.field("path", pa.binary(), nullable=False),
                             pa.field("key", pa.string(), nullable=False),
                             pa.field("at", pa.int64(), nullable=False),
                             pa.field("keep", pa.int64(), nullable=False)])


def version_unit(line: int, at: int, range_id: str) -> str:
    return f"{line}:{at}:{range_id}"


def version_range(unit: str) -> str:
    """The range a keep_versions unit (``version_unit``) names."""
    return unit.split(":", 2)[2]


def versions_of(unit: str, entries: pa.RecordBatch, *, lines: tuple[tuple[CleaningPolicy, ...], ...]) -> pa.RecordBatch:
    """keep_versions' rows of ``entries`` (rows of ``ENTRIES_SCHEMA``, of the range ``unit`` names:
    ``version_unit``): those whose path the line's keep_versions policies (``lines[line]``) keep versions of, each
    with its line, position and limit (``core.mark.versions_limit``). Row by row (a row's fate is its path's alone),
    so a caller may filter the entries first: the limits are the costly part (a regular expression per policy's
    path pattern)."""
    import pyarrow.compute as pc  # noqa: PLC0415

    line, at, _ = unit.split(":", 2)
    paths, keys = entries.column("path"), entries.column("key")
    limits = versions_limits(paths, lines[int(line)])
    n = entries.num_rows
    return pa.RecordBatch.from_arrays(
        [pa.array(np.full(n, int(line), np.int64)), paths, keys, pa.array(np.full(n, int(at), np.int64)), limits],
        schema=VERSIONS_SCHEMA).filter(pc.greater(limits, 0))


def range_versions(ctx: OpenContext, unit: str, *, lines: tuple[tuple[CleaningPolicy, ...], ...]) -> pa.RecordBatch:
    """``versions_of`` every entry of the range ``unit`` names, a group of 512 blocks at a time (what a task holds
    at once is the file, one group's entries and the rows kept)."""
    parts = [versions_of(unit, batch, lines=lines)
             for _, batch in range_entry_groups(ctx, version_range(unit), blocks=512)]
    return pa.concat_batches(parts) if parts else pa.RecordBatch.from_pylist([], schema=VERSIONS_SCHEMA)


def key_counts(keys: pa.Array) -> pa.RecordBatch:
    """The kept index's records of ``keys``: hash -> how many of them (``kept_index.key_hash``). The keys become
    Python strings ``HASH_STEP`` at a time, never all at once."""
    hashes = np.empty(len(keys), np.uint64)
    for at in range(0, len(keys), HASH_STEP):
        part = keys.slice(at, HASH_STEP).to_pylist()
        hashes[at:at + len(part)] = np.fromiter(map(kept_index.key_hash, part), np.uint64, len(part))
        del part
    unique, counts = np.unique(hashes, return_counts=True)
    return pa.RecordBatch.from_arrays([pa.array(unique.view(np.int64)), pa.array(counts.astype(np.int64))],
                                      schema=INDEX_SCHEMA)


def listing(ctx: OpenContext, unit: str) -> pa.RecordBatch:
    """One slice of the namespace (``Namespace.list_unit_batches``) as one batch."""
    batches = list(ctx.ns.list_unit_batches(unit))
    if not batches:
        return pa.RecordBatch.from_pylist([], schema=columns.LISTING_SCHEMA)
    return batches[0] if len(batches) == 1 else pa.concat_batches(batches)


def stat_keys(ctx: OpenContext, keys: list[str]) -> pa.RecordBatch:
    """Of ``keys``, the objects still in the store, with their sizes and times (a request each: an incremental run's
    keys that may have become garbage outside the slices it lists)."""
    found = ctx.ns.stat(keys)
    return pa.RecordBatch.from_arrays([pa.array([o.key for o in found], pa.string()),
                                       pa.array([o.size for o in found], pa.int64()),
                                       pa.array([o.mtime for o in found], pa.float64())],
                                      schema=columns.LISTING_SCHEMA)


def listing_tables(ctx: OpenContext, unit: str, rows: int) -> Iterator[pa.Table]:
    """One slice of the namespace (``Namespace.list_unit_batches``) in tables of about ``rows`` objects (its pages
    put together, the last table shorter; none when the slice is empty): what judging it holds at once."""
    held: list[pa.RecordBatch] = []
    count = 0
    for batch in ctx.ns.list_unit_batches(unit):
        held.append(batch)
        count += batch.num_rows
        if count >= rows:
            yield pa.Table.from_batches(held, schema=columns.LISTING_SCHEMA)
            held, count = [], 0
    if count:
        yield pa.Table.from_batches(held, schema=columns.LISTING_SCHEMA)


def staged_keys(ctx: OpenContext, key: str) -> pa.RecordBatch:
    """The staged addresses of one file lakeFS wrote for ``prepare_uncommitted``, as namespace-relative keys."""
    import pyarrow.compute as pc  # noqa: PLC0415

    data = ctx.ns.read(key)  # outside the try: a store that fails is not a corrupt file (its StorageError's reason)
    try:
        table = parquet_bytes.read(data, columns=["physical_address"])
    except Exception as exc:  # noqa: BLE001 - pyarrow's errors vary; without this list nothing is safe
        raise GCError(f"lakeFS's list of uncommitted addresses {key} is unreadable: {exc}", "corrupt-metadata") \
            from None
    addresses = table.column("physical_address").combine_chunks().cast(pa.string())
    kinds = pc.if_else(pc.match_substring(addresses, "://"), pa.scalar(FULL, pa.int8()),
                       pa.scalar(RELATIVE, pa.int8()))
    keys = columns.relative_keys(addresses, kinds, ctx.prefixes)
    return pa.RecordBatch.from_arrays([keys.filter(keys.is_valid())], schema=columns.KEYS_SCHEMA)


def write_part(ctx: OpenContext, run_id: str, *, part: int, table: pa.Table) -> dict[str, int]:
    """One part of the plan (``core.report.plan_part_key``), sorted by key, in lakeFS's report layout."""
    import pyarrow.compute as pc  # noqa: PLC0415
    import pyarrow.parquet as pq  # noqa: PLC0415

    out = io.BytesIO()
    pq.write_table(table.select(["address", "size"]), out, compression="snappy")
    data = out.getvalue()
    ctx.ns.write(core_report.plan_part_key(run_id, part), data)
    size = int(pc.sum(table["size"]).as_py() or 0) if table.num_rows else 0
    return {"part": part, "rows": table.num_rows, "bytes": len(data), "size": size}


def read_part(ctx: OpenContext, run_id: str, part: int) -> pa.Table:
    return parquet_bytes.read(ctx.ns.read(core_report.plan_part_key(run_id, part)), columns=["address", "size"])


def batches(table: pa.Table, size: int) -> Iterator[list[str]]:
    keys = table["address"].combine_chunks() if table.num_rows else pa.array([], pa.string())
    for i in range(0, len(keys), size):
        yield keys.slice(i, size).to_pylist()


def count_part(ctx: OpenContext, unit: tuple[str, int, frozenset[str]]) -> list[tuple[int, int]]:
    """(part, how many of its keys the sweep would delete): those not in the spare set."""
    import pyarrow.compute as pc  # noqa: PLC0415

    run_id, part, spare = unit
    table = read_part(ctx, run_id, part)
    left = table.num_rows - (int(pc.sum(pc.is_in(table["address"], value_set=pa.array(sorted(spare), pa.string())))
                                 .as_py() or 0) if spare and table.num_rows else 0)
    return [(part, left)]


def sweep_part(ctx: Any, unit: tuple[str, int, int | None, frozenset[str], bool], *,
               purge: bool) -> list[dict[str, Any]]:
    """Delete one part of a plan, in the store's batches: its keys not in the spare set (what became reachable
    since the mark), the first ``allowance`` of them (None: all; the rest is capped, named back when ``carry``).
    Counters, the failures, and the keys not deleted that the next run must know of."""
    import pyarrow.compute as pc  # noqa: PLC0415

    from spark_jobs.engine.sweep.sweep import not_deleted, unit_delete  # noqa: PLC0415 - the one deleter and its rule

    run_id, part, allowance, spare, carry = unit
    table = read_part(ctx, run_id, part)
    spared: list[str] = []
    if spare and table.num_rows:
        hit = pc.is_in(table["address"], value_set=pa.array(sorted(spare), pa.string()))
        spared = table.filter(hit)["address"].to_pylist()
        table = table.filter(pc.invert(hit))
    doomed = table if allowance is None else table.slice(0, allowance)
    capped = table.slice(doomed.num_rows)
    out: dict[str, Any] = {"part": part, "doomed": doomed.num_rows, "spared": len(spared), "capped": capped.num_rows,
                           "deleted": 0, "requests": 0, "backoffs": 0, "failed": [], "purged": 0, "purged_bytes": 0,
                           "purge_failed": []}
    for batch in batches(doomed, ctx.ns.batch):
        (result,) = unit_delete(ctx, batch, purge)
        for k in ("deleted", "requests", "backoffs", "purged", "purged_bytes"):
            out[k] += result[k]
        out["failed"] += result["failed"]
        out["purge_failed"] += result["purge_failed"]
    keys = doomed["address"].to_pylist() if out["failed"] else []
    lost = not_deleted(keys, keys, out["failed"]) if out["failed"] else set()
    total = int(pc.sum(doomed["size"]).as_py() or 0) if doomed.num_rows else 0
    if lost:
        sizes = dict(zip(keys, doomed["size"].to_pylist(), strict=True))
        total -= sum(sizes[k] for k in lost)
    out["freed_size"] = total
    out["not_deleted"] = sorted(lost) + spared + (capped["address"].to_pylist() if carry else [])
    return [out]
