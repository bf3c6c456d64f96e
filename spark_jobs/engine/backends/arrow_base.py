"""What the in-process (Arrow) steps share: the thread runner and job configuration they run with, and a pool's
batches made one table. Each step's Arrow half is in its step's package (``reach/arrow.py``, ``listing/arrow.py``,
``plan/arrow.py``, ``state/arrow.py``); ``backends/arrow.py`` puts them together as ``ArrowBackend``."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from spark_jobs.engine.runtime.context import JobConfig
from spark_jobs.engine.runtime.memory import map_big_blocks
from spark_jobs.engine.runtime.parallel import ThreadRunner


def table_of(batches: Sequence[pa.RecordBatch], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_batches(list(batches), schema=schema) if batches else schema.empty_table()


def absent_from(few: pa.Array, tables: Sequence[pa.Table]) -> pa.Array:
    """Those of ``few`` (distinct keys) that no ``key`` column of ``tables`` holds: each table probed a chunk at a
    time against ``few``, never a hash table of the tables' keys (every kept key, on a large lake)."""
    import pyarrow.compute as pc  # noqa: PLC0415

    found = [chunk.filter(pc.is_in(chunk, value_set=few)) for table in tables for chunk in table["key"].chunks
             if len(chunk)]
    if not found or not len(few):
        return few
    return few.filter(pc.invert(pc.is_in(few, value_set=pa.concat_arrays([f.cast(pa.string()) for f in found]))))


class ArrowSteps:
    """A run's datasets as Arrow tables in this process: the base of each step's Arrow half."""

    def __init__(self, runner: ThreadRunner, config: JobConfig) -> None:
        self.runner, self.config = runner, config
        map_big_blocks()

    def _map(self, items: Sequence, fn, schema: pa.Schema) -> pa.Table:
        batches = self.runner.map_units(list(items), lambda ctx, item: [fn(ctx, item)], self.config.open,
                                        partitions=0)
        return table_of(batches, schema)
