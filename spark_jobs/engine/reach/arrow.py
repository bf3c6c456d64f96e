"""Reach in process: the keys the retained ranges' entries point at (and the staged entries'), as Arrow tables on
the thread runner's pool (``reach/spark.py``: the same on executors)."""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence

import pyarrow as pa

from spark_jobs.core import columns
from spark_jobs.core.cleaning import CleaningPolicy
from spark_jobs.engine.backends.arrow_base import ArrowSteps, table_of
from spark_jobs.engine.plan import units
from spark_jobs.engine.runtime.memory import released
from spark_jobs.engine.runtime.parallel import ThreadRunner


class ArrowReach(ArrowSteps):
    def reach(self, range_ids: Sequence[str]) -> pa.Table:
        """Every key the ranges' entries point at (one row per entry). Decoding is CPU work: as many ranges at
        once as there are cores (at least two, so that one range's read overlaps another's decode), not one per
        pool thread: each range in flight holds its file and its decompressed blocks."""
        decoders = ThreadRunner(min(self.runner.threads, max(2, os.cpu_count() or 2)))
        batches = decoders.map_units(list(range_ids), lambda ctx, item: [units.range_keys(ctx, item)],
                                     self.config.open, partitions=0)
        table = table_of(batches, columns.KEYS_SCHEMA)
        del batches
        released()
        return table

    def reach_scoped(self, range_ids: Sequence[str], path_policies: tuple[CleaningPolicy, ...]) -> pa.Table:
        """Every key the ranges' entries point at, with its range's ordinal in ``range_ids`` and its path's scope
        (``units.range_scoped_keys``): what ``kept_of`` filters once the driver judged each (range, scope)."""
        decoders = ThreadRunner(min(self.runner.threads, max(2, os.cpu_count() or 2)))
        step = functools.partial(units.range_scoped_keys, path_policies=path_policies)
        batches = decoders.map_units([units.scoped_unit(i, r) for i, r in enumerate(range_ids)],
                                     lambda ctx, item: [step(ctx, item)], self.config.open, partitions=0)
        table = table_of(batches, units.SCOPED_SCHEMA)
        del batches
        released()
        return table

    def scope_pairs(self, scoped: pa.Table) -> list[tuple[int, int]]:
        """The distinct (range ordinal, scope mask) pairs: as many as ranges times the scopes their paths fall in."""
        pairs = scoped.group_by(["range", "scope"], use_threads=False).aggregate([])
        return list(zip(pairs["range"].to_pylist(), pairs["scope"].to_pylist(), strict=True))

    def kept_of(self, scoped: pa.Table, live: Sequence[tuple[int, int]]) -> pa.Table:
        """The keys of the rows whose (range, scope) is ``live``."""
        wanted = pa.table({"range": pa.array([r for r, _ in live], pa.int64()),
                           "scope": pa.array([m for _, m in live], pa.int64())})
        return scoped.join(wanted, keys=["range", "scope"], join_type="left semi").select(["key"]) \
            .cast(columns.KEYS_SCHEMA)

    def staged(self, files: Sequence[str]) -> pa.Table:
        return self._map(files, units.staged_keys, columns.KEYS_SCHEMA)
