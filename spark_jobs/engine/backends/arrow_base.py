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
    """Those of ``few`` (distinct keys) that no ``key`` column of ``tables`` holds. Each table's keys are probed
    against ``few`` (one hash set of ``few`` per table: Arrow builds a value set anew at every call, so never a
    call per chunk), the hits then against ``few``: never a hash table of a table's keys beyond its hits."""
    import pyarrow.compute as pc  # noqa: PLC0415

    if not len(few):
        return few
    found = [chunk for table in tables if table.num_rows
             for chunk in table["key"].filter(pc.is_in(table["key"], value_set=few)).chunks if len(chunk)]
    if not found:
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
