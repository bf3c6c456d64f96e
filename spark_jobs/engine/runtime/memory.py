"""How a process's allocators give memory back: what a run reads and decodes in blocks of megabytes (range files,
their decoded columns, a range's keys) must leave the process when freed, or the high-water mark of one step
stays resident for the rest of the run (measured at 1M objects: bench/README.md "The in-process run, phase by
phase")."""

from __future__ import annotations

import ctypes
import os
import sys

import pyarrow as pa

_MMAP_THRESHOLD = 1 << 20  # glibc's M_MMAP_THRESHOLD, fixed: blocks of 1 MiB and more mapped, given back when freed
_fixed: list[bool] = []


def map_big_blocks() -> None:
    """Blocks of 1 MiB and more (a range file read, a range's keys) mapped from the system and given back when
    freed (glibc's mallopt(M_MMAP_THRESHOLD), once per process). glibc's own threshold follows the
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
