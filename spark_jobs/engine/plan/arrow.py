"""The plan in process: each slice listed and judged against the kept keys of that slice (``core.columns.judge``),
the plan written in parts by the thread runner's pool, and what a caller asks of it (``plan/spark.py``: the same as
an anti-join and parts written on executors)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from spark_jobs.core import columns
from spark_jobs.core.plan import PlanSummary, StoredObject, merge_summaries
from spark_jobs.engine.backends.arrow_base import ArrowSteps, rows_in
from spark_jobs.engine.listing.arrow import Listing, by_unit
from spark_jobs.engine.plan import units
from spark_jobs.engine.runtime.memory import released
from spark_jobs.engine.runtime.parallel import ThreadRunner


class ArrowPlan(ArrowSteps):
    judge_rows = 65_536  # a slice is judged in tables of about this many listed objects (its pages put together)

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
        # as many at once as the cores (at least two; the listing's parsing is CPU work under the GIL: twice the
        # cores was no faster at 1M objects on 2 cores, and held 25 MiB more), at most the pool's threads
        listers = ThreadRunner(min(self.runner.threads, max(2, os.cpu_count() or 1)))
        judged = listers.map_units(listed.slices, judge_slice, self.config.open, partitions=0)
        listed.objects = sum(n for _, _, n in judged)
        if listed.asked is not None and listed.asked.num_rows:
            # the objects an incremental run asked for (few), each slice's against that slice's kept keys
            asked = listed.asked
            slices = columns.units_of(asked["key"].combine_chunks())
            for unit in pc.unique(slices).to_pylist():
                judged.append((*columns.judge(asked.filter(pc.equal(slices, unit)),
                                              pa.table({"key": buckets.get(unit, empty)}), cutoff,
                                              prefix_depth=prefix_depth), 0))
        deleted = pa.concat_tables([d for d, _, _ in judged]) if judged else columns.PLAN_SCHEMA.empty_table()
        released()
        return deleted.sort_by("address") if deleted.num_rows else deleted, merge_summaries(s for _, s, _ in judged)

    def write_plan(self, deleted: pa.Table, run_id: str) -> list[dict[str, int]]:
        parts = [(n, deleted.slice(at, units.ROWS_PER_PART))
                 for n, at in enumerate(range(0, deleted.num_rows, units.ROWS_PER_PART))]
        return sorted(self.runner.map_units(parts, lambda ctx, p: [units.write_part(ctx, run_id, part=p[0], table=p[1])],
                                            self.config.open, partitions=0), key=lambda p: p["part"])

    def missed(self, deleted: pa.Table, *, recent: set[str], dead: Sequence[str], carried: Sequence[str]) -> int:
        """Of the deleted objects, those whose unit is not among ``recent`` and whose key is neither in the ranges
        ``dead`` nor among ``carried`` (what the incremental rule would have checked). The dead ranges are streamed
        against those few objects, a range at a time per core: their keys are never held together."""
        if not deleted.num_rows:
            return 0
        slices = columns.units_of(deleted["address"].combine_chunks())
        outside = deleted.filter(pc.invert(pc.is_in(slices, value_set=pa.array(sorted(recent), pa.string()))))
        probe = outside["address"].combine_chunks()
        if not len(probe) or not (dead or carried):
            return len(probe)

        found: list[pa.Array] = []
        if dead:
            decoders = ThreadRunner(min(self.runner.threads, max(2, os.cpu_count() or 2)))
            found = [c for t in rows_in(decoders, dead, units.range_keys, asked=probe, make_context=self.config.open)
                     for c in t["key"].chunks]
            released()
        found.append(pa.array(list(carried), pa.string()))
        checked = pa.concat_arrays([f.cast(pa.string()) for f in found])
        return len(probe) - int(pc.sum(pc.is_in(probe, value_set=checked).cast(pa.int64())).as_py() or 0)

    def slices_of(self, deleted: pa.Table) -> list[str]:
        return sorted(set(pc.unique(columns.units_of(deleted["address"].combine_chunks())).to_pylist())) \
            if deleted.num_rows else []

    def objects(self, deleted: pa.Table) -> list[StoredObject]:
        return [StoredObject(k, s, 0.0) for k, s in zip(deleted["address"].to_pylist(), deleted["size"].to_pylist(),
                                                          strict=True)]

    def by_path(self, deleted: pa.Table, path_units: Sequence[str], depth: int) -> dict[str, list[int]]:
        """--by-path: the plan's objects and bytes per logical path prefix (``core.plan.by_path_prefix``), each
        object named by its entry of least (range ordinal, path) among the history's ranges (``by_path.paths_of``'s
        choice). Only the plan's keys are kept of each range; the prefixes are counted a batch at a time."""
        import numpy as np  # noqa: PLC0415

        if not deleted.num_rows:
            return {}
        asked = pc.unique(deleted["address"].combine_chunks())
        decoders = ThreadRunner(min(self.runner.threads, max(2, os.cpu_count() or 2)))
        found = rows_in(decoders, path_units, units.range_paths, asked=asked, make_context=self.config.open)
        rows = pa.concat_tables(found) if found else units.PATHS_SCHEMA.empty_table()
        rows = rows.take(pc.sort_indices(rows, sort_keys=[("key", "ascending"), ("range", "ascending"),
                                                          ("path", "ascending")]))
        keys = rows["key"].combine_chunks()
        first = np.ones(len(keys), bool)
        if len(keys) > 1:
            first[1:] = pc.not_equal(keys[1:], keys[:-1]).to_numpy(zero_copy_only=False)
        named = rows.filter(pa.array(first)).select(["key", "path"])
        joined = deleted.select(["address", "size"]).join(named, keys="address", right_keys="key",
                                                          join_type="left outer")
        out: dict[str, list[int]] = {}
        for batch in joined.to_batches(max_chunksize=8192):
            counted = units.path_prefixes(batch, depth)
            for prefix, size in zip(counted.column("prefix").to_pylist(), counted.column("size").to_pylist(),
                                    strict=True):
                totals = out.setdefault(prefix, [0, 0])
                totals[0] += 1
                totals[1] += size
        released()
        return out
