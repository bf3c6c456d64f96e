"""What the in-process (Arrow) steps share: the thread runner and job configuration they run with, and a pool's
batches made one table. Each step's Arrow half is in its step's package (``reach/arrow.py``, ``listing/arrow.py``,
``plan/arrow.py``, ``state/arrow.py``); ``backends/arrow.py`` puts them together as ``ArrowBackend``."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from spark_jobs.core.key_set import KeySet
from spark_jobs.engine.runtime.context import JobConfig
from spark_jobs.engine.runtime.memory import map_big_blocks
from spark_jobs.engine.runtime.parallel import ThreadRunner


def table_of(batches: Sequence[pa.RecordBatch], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_batches(list(batches), schema=schema) if batches else schema.empty_table()


def rows_in(runner: ThreadRunner, units: Sequence[str], decode, *, asked: pa.Array, make_context) -> list[pa.Table]:
    """The rows of every unit's decoded batch (``decode(ctx, unit)``) whose ``key`` is in ``asked``: the pool's
    threads decode their units one at a time and probe each against one set of ``asked`` (``KeySet``, built once:
    Arrow's ``is_in`` builds its value set anew at every call), so that no more than a unit a thread is held."""

    units = list(units)
    if not units or not len(asked):
        return []
    held = KeySet(asked)

    def probe(ctx, unit: str) -> list[pa.Table]:
        batch = decode(ctx, unit)
        found = batch.filter(held.holds(batch.column("key"))) if batch.num_rows else batch
        return [pa.Table.from_batches([found])] if found.num_rows else []

    return runner.map_units(units, probe, make_context, partitions=0)


class ArrowSteps:
    """A run's datasets as Arrow tables in this process: the base of each step's Arrow half."""

    def __init__(self, runner: ThreadRunner, config: JobConfig) -> None:
        self.runner, self.config = runner, config
        map_big_blocks()

    def _map(self, items: Sequence, fn, schema: pa.Schema) -> pa.Table:
        batches = self.runner.map_units(list(items), lambda ctx, item: [fn(ctx, item)], self.config.open,
                                        partitions=0)
        return table_of(batches, schema)
