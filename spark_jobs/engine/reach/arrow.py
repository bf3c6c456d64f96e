"""Reach in process: the keys the retained ranges' entries point at (and the staged entries'), as Arrow tables on
the thread runner's pool (``reach/spark.py``: the same on executors)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import pyarrow as pa

from spark_jobs.core import columns
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

    def staged(self, files: Sequence[str]) -> pa.Table:
        return self._map(files, units.staged_keys, columns.KEYS_SCHEMA)
