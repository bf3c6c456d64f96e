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


# Arrow builds an ``is_in`` value set anew at every call: rows are probed against one in blocks of at least this
# many (and at least as many as the set holds), so that building the set never costs more than probing.
PROBE_ROWS = 1_000_000


def rows_in(runner: ThreadRunner, units: Sequence[str], decode, *, asked: pa.Array, make_context) -> list[pa.Table]:
    """The rows of every unit's decoded batch (``decode(ctx, unit)``) whose ``key`` is in ``asked``: the pool's
    threads decode their share of the units one at a time and probe what they hold in blocks (``PROBE_ROWS``), so
    the set of ``asked`` is built once per block instead of once per unit, and no more than a block is held."""
    import pyarrow.compute as pc  # noqa: PLC0415

    units = list(units)
    if not units or not len(asked):
        return []
    block = max(PROBE_ROWS, len(asked))
    shares = max(1, min(len(units), runner.threads))
    groups = [units[i::shares] for i in range(shares)]

    def probe(held: list[pa.RecordBatch]) -> pa.Table:
        table = pa.Table.from_batches(held)
        return table.filter(pc.is_in(table["key"], value_set=asked))

    def share(ctx, group: list[str]) -> list[pa.Table]:
        found, held, rows = [], [], 0
        for unit in group:
            batch = decode(ctx, unit)
            if batch.num_rows:
                held.append(batch)
                rows += batch.num_rows
            if rows >= block:
                found.append(probe(held))
                held, rows = [], 0
        if held:
            found.append(probe(held))
        return [t for t in found if t.num_rows]

    return runner.map_units(groups, share, make_context, partitions=0)


class ArrowSteps:
    """A run's datasets as Arrow tables in this process: the base of each step's Arrow half."""

    def __init__(self, runner: ThreadRunner, config: JobConfig) -> None:
        self.runner, self.config = runner, config
        map_big_blocks()

    def _map(self, items: Sequence, fn, schema: pa.Schema) -> pa.Table:
        batches = self.runner.map_units(list(items), lambda ctx, item: [fn(ctx, item)], self.config.open,
                                        partitions=0)
        return table_of(batches, schema)
