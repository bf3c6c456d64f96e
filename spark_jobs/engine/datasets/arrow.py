"""The dataset steps in process: pyarrow tables and compute on the thread runner's pool. Every kept key lives in an
Arrow column (tens of bytes per object, no Python object per key); the per-unit steps are ``units.py``'s, as on
Spark.

What the store holds is never one table here: the listing is judged slice by slice (``Listing``), each slice's
objects against the kept keys of that slice, so that a run holds the kept keys, the plan, and the slices being
listed at that moment; not a second copy of the namespace.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from spark_jobs.core import columns
from spark_jobs.core.plan import PlanSummary, StoredObject, merge_summaries
from spark_jobs.engine import incremental
from spark_jobs.engine.context import JobConfig
from spark_jobs.engine.datasets import units
from spark_jobs.engine.parallel import ThreadRunner


def _table(batches: Sequence[pa.RecordBatch], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_batches(list(batches), schema=schema) if batches else schema.empty_table()


class Listing:
    """The namespace's slices (``Namespace.list_units``), listed when the run judges them, one slice a thread."""

    def __init__(self, slices: Sequence[str]) -> None:
        self.slices = list(slices)
        self.objects: int | None = None  # how many the judge saw listed


class Buckets(Mapping):
    """The kept keys grouped by the listing slice that would hold them (``columns.units_of``): what a run holds
    is the keys (where they already are) and their positions in slice order (4 bytes a key); a slice's keys are
    taken out when the slice is judged, and go with it. The slices are found ``STEP`` keys at a time (a number
    per slice, not a copy of the keys)."""

    STEP = 65_536

    def __init__(self, keys: pa.ChunkedArray | pa.Array) -> None:
        import numpy as np  # noqa: PLC0415

        self.keys, self.spans = keys, {}
        self.order = np.empty(0, np.uint32)
        if not len(keys):
            return
        ids: dict[str, int] = {}
        codes = np.empty(len(keys), np.int32)
        for at in range(0, len(keys), self.STEP):
            part = keys.slice(at, self.STEP)
            found = columns.units_of(part.combine_chunks() if isinstance(part, pa.ChunkedArray) else part)
            found = found.dictionary_encode()
            number = np.array([ids.setdefault(u, len(ids)) for u in found.dictionary.to_pylist()], np.int32)
            codes[at:at + len(part)] = number[found.indices.to_numpy(zero_copy_only=False)]
        self.order = np.argsort(codes, kind="stable").astype(np.uint32 if len(keys) < 2**32 else np.uint64)
        counts = np.bincount(codes, minlength=len(ids))
        del codes
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        self.spans = {unit: (int(starts[n]), int(counts[n])) for unit, n in ids.items()}

    def __getitem__(self, unit: str) -> pa.Array:
        at, n = self.spans[unit]
        taken = self.keys.take(pa.array(self.order[at:at + n]))
        return taken.combine_chunks() if isinstance(taken, pa.ChunkedArray) else taken

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self.spans))

    def __len__(self) -> int:
        return len(self.spans)


def by_unit(keys: pa.ChunkedArray | pa.Array) -> Buckets:
    """The kept keys grouped by the listing slice that would hold them (``Buckets``)."""
    return Buckets(keys)


class ArrowBackend:
    """A run's datasets as Arrow tables in this process."""

    name = "arrow"
    judge_rows = 65_536  # a slice is judged in tables of about this many listed objects (its pages put together)

    def __init__(self, runner: ThreadRunner, config: JobConfig) -> None:
        self.runner, self.config = runner, config

    def _map(self, items: Sequence, fn, schema: pa.Schema) -> pa.Table:
        batches = self.runner.map_units(list(items), lambda ctx, item: [fn(ctx, item)], self.config.open,
                                        partitions=0)
        return _table(batches, schema)

    def reach(self, range_ids: Sequence[str]) -> pa.Table:
        """Every key the ranges' entries point at (one row per entry). Decoding is CPU work: as many ranges at
        once as there are cores (at least two, so that one range's read overlaps another's decode), not one per
        pool thread: each range in flight holds its file and its decompressed blocks."""
        decoders = ThreadRunner(min(self.runner.threads, max(2, os.cpu_count() or 2)))
        batches = decoders.map_units(list(range_ids), lambda ctx, item: [units.range_keys(ctx, item)],
                                     self.config.open, partitions=0)
        return _table(batches, columns.KEYS_SCHEMA)

    def staged(self, files: Sequence[str]) -> pa.Table:
        return self._map(files, units.staged_keys, columns.KEYS_SCHEMA)

    def listing(self, slices: Sequence[str]) -> Listing:
        return Listing(slices)

    def judge(self, listed: Listing | pa.Table, kept: Sequence[pa.Table], *, cutoff: float,
              prefix_depth: int) -> tuple[pa.Table, PlanSummary]:
        """The plan: each slice listed and judged against the kept keys of that slice (``columns.judge``), the
        slices' plans and counts put together (a listing already in a table: judged whole)."""
        everything = pa.concat_tables([k.select(["key"]) for k in kept]) if kept else columns.KEYS_SCHEMA.empty_table()
        if isinstance(listed, pa.Table):
            return columns.judge(listed, everything, cutoff, prefix_depth=prefix_depth)
        buckets = by_unit(everything["key"])
        empty = pa.array([], pa.string())

        def judge_slice(ctx, unit: str) -> list[tuple[pa.Table, PlanSummary, int]]:
            out, bucket = [], None
            for table in units.listing_tables(ctx, unit, self.judge_rows):
                if not columns.all_in_unit(table["key"], unit):
                    # a store that lists a key outside its slice: judged against every kept key, never fewer
                    kept_here = everything["key"]
                else:
                    bucket = buckets.get(unit, empty) if bucket is None else bucket
                    kept_here = bucket
                deleted, summary = columns.judge(table, pa.table({"key": kept_here}), cutoff,
                                                 prefix_depth=prefix_depth)
                out.append((deleted, summary, table.num_rows))
            return out

        # each slice in flight holds its listed objects (up to judge_rows), its kept keys and their hash table:
        # as many at once as twice the cores (the listing's parsing is CPU work), at most the pool's threads
        listers = ThreadRunner(min(self.runner.threads, max(2, 2 * (os.cpu_count() or 1))))
        judged = listers.map_units(listed.slices, judge_slice, self.config.open, partitions=0)
        listed.objects = sum(n for _, _, n in judged)
        deleted = pa.concat_tables([d for d, _, _ in judged]) if judged else columns.PLAN_SCHEMA.empty_table()
        return deleted.sort_by("address") if deleted.num_rows else deleted, merge_summaries(s for _, s, _ in judged)

    def write_plan(self, deleted: pa.Table, run_id: str) -> list[dict[str, int]]:
        parts = [(n, deleted.slice(at, units.ROWS_PER_PART))
                 for n, at in enumerate(range(0, deleted.num_rows, units.ROWS_PER_PART))]
        return sorted(self.runner.map_units(parts, lambda ctx, p: [units.write_part(ctx, run_id, part=p[0], table=p[1])],
                                            self.config.open, partitions=0), key=lambda p: p["part"])

    def index(self, reached: pa.Table) -> pa.Table:
        """The kept index (``core.kept_index``'s table: hash, count; sorted by hash) of the reached entries."""
        keys = reached["key"].combine_chunks() if reached.num_rows else pa.array([], pa.string())
        step = -(-len(keys) // max(1, self.runner.threads)) or 1
        chunks = [keys.slice(i, step) for i in range(0, len(keys), step)]
        counted = _table(self.runner.map_units(chunks, lambda _ctx, c: [units.key_counts(c)], lambda: None,
                                               partitions=0), units.INDEX_SCHEMA)
        summed = counted.group_by("hash").aggregate([("count", "sum")]) if counted.num_rows else counted
        hashes = summed["hash"].combine_chunks().cast(pa.int64()).view(pa.uint64()) if summed.num_rows \
            else pa.array([], pa.uint64())
        totals = summed["count_sum" if summed.num_rows else "count"]
        table = pa.table({"hash": hashes, "count": totals})
        return table.sort_by("hash")

    def write_index(self, reached: pa.Table, run_id: str, bits: int) -> list[dict]:
        """The kept index written as the 2**bits parts of a base (``incremental.write_index_parts``) by the pool."""
        ctx = self.config.open()
        try:
            return incremental.write_index_parts(ctx.ns, run_id, self.index(reached), bits=bits, runner=self.runner)
        finally:
            ctx.close()

    def keys_not_in(self, keys: pa.Table, other: pa.Table) -> set[str]:
        """The distinct keys of ``keys`` not in ``other`` (small: what only staged entries keep)."""
        if not keys.num_rows:
            return set()
        left = keys.group_by("key").aggregate([])
        if other.num_rows:
            left = left.join(other.group_by("key").aggregate([]), "key", join_type="left anti")
        return set(left["key"].to_pylist())

    def missed(self, deleted: pa.Table, *, recent: set[str], checked: pa.Table) -> int:
        """Of the deleted objects, those whose unit is not among ``recent`` and whose key not in ``checked``."""
        if not deleted.num_rows:
            return 0
        slices = columns.units_of(deleted["address"].combine_chunks())
        outside = deleted.filter(pc.invert(pc.is_in(slices, value_set=pa.array(sorted(recent), pa.string()))))
        if not outside.num_rows or not checked.num_rows:
            return outside.num_rows
        probe = outside.rename_columns(["key", "size"])
        return probe.join(checked.group_by("key").aggregate([]), "key", join_type="left anti").num_rows

    def slices_of(self, deleted: pa.Table) -> list[str]:
        return sorted(set(pc.unique(columns.units_of(deleted["address"].combine_chunks())).to_pylist())) \
            if deleted.num_rows else []

    def objects(self, deleted: pa.Table) -> list[StoredObject]:
        return [StoredObject(k, s, 0.0) for k, s in zip(deleted["address"].to_pylist(), deleted["size"].to_pylist(),
                                                          strict=True)]

    def from_keys(self, keys: list[str]) -> pa.Table:
        return pa.table({"key": pa.array(keys, pa.string())}, schema=columns.KEYS_SCHEMA)

    def union(self, datasets: list[pa.Table]) -> pa.Table:
        return pa.concat_tables([d.select(["key"]) for d in datasets])

    def count_distinct(self, keys: pa.Table) -> int:
        return keys.group_by("key").aggregate([]).num_rows if keys.num_rows else 0

    def count(self, dataset: pa.Table | Listing) -> int:
        if isinstance(dataset, Listing):
            if dataset.objects is None:
                dataset.objects = len(self.listed_objects(dataset))
            return dataset.objects
        return dataset.num_rows

    def key_set(self, keys: pa.Table) -> set[str]:
        return set(keys["key"].to_pylist())

    def listed_objects(self, listed: Listing) -> list[StoredObject]:
        """What the store holds now (listed again: the run kept no copy of it)."""
        table = self._map(listed.slices, units.listing, columns.LISTING_SCHEMA)
        return [StoredObject(*row) for row in zip(table["key"].to_pylist(), table["size"].to_pylist(),
                                                  table["mtime"].to_pylist(), strict=True)]

    def release(self, *datasets: object) -> None:
        """Nothing to free in process: the tables go with their last reference."""


def open_backend(runner: ThreadRunner, config: JobConfig) -> ArrowBackend:
    return ArrowBackend(runner, config)

