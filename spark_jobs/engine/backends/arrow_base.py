"""What the in-process (Arrow) steps share: the thread runner and job configuration they run with, and a pool's
batches made one table. Each step's Arrow half is in its step's package (``reach/arrow.py``, ``listing/arrow.py``,
``plan/arrow.py``, ``state/arrow.py``); ``backends/arrow.py`` puts them together as ``ArrowBackend``."""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Sequence

import pyarrow as pa

from spark_jobs.engine.runtime.context import JobConfig
from spark_jobs.engine.runtime.parallel import ThreadRunner

_MMAP_THRESHOLD = 1 << 20  # glibc's M_MMAP_THRESHOLD, fixed: blocks of 1 MiB and more mapped, given back when freed
_fixed: list[bool] = []


def map_big_blocks() -> None:
    """Blocks of 1 MiB and more (a range file read, a range's keys) mapped from the system and given back when
    freed (glibc's mallopt(M_MMAP_THRESHOLD), once per process; nothing elsewhere). glibc's own threshold follows the
    largest block freed (up to 32 MiB): after the first range file, the next ones and the keys decoded from them come
    from its arenas, where what is freed between what lives stays resident (40 MiB at 1M objects)."""
    if _fixed or not sys.platform.startswith("linux") or not hasattr(os, "confstr"):
        return
    _fixed.append(True)
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return
        ctypes.CDLL("libc.so.6").mallopt(-3, _MMAP_THRESHOLD)  # M_MMAP_THRESHOLD
    except (OSError, ValueError, AttributeError):  # not glibc: its allocator decides
        return


def released() -> None:
    """What Arrow's allocator holds of a step's freed transients given back to the system (mimalloc keeps the pages
    of freed blocks for reuse: at 1M objects tens of MiB after a step)."""
    pa.default_memory_pool().release_unused()


def table_of(batches: Sequence[pa.RecordBatch], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_batches(list(batches), schema=schema) if batches else schema.empty_table()


class ArrowSteps:
    """A run's datasets as Arrow tables in this process: the base of each step's Arrow half."""

    def __init__(self, runner: ThreadRunner, config: JobConfig) -> None:
        self.runner, self.config = runner, config
        map_big_blocks()

    def _map(self, items: Sequence, fn, schema: pa.Schema) -> pa.Table:
        batches = self.runner.map_units(list(items), lambda ctx, item: [fn(ctx, item)], self.config.open,
                                        partitions=0)
        return table_of(batches, schema)
