"""Python's cyclic garbage collector, paused while a run builds its large acyclic structures.

A mark allocates hundreds of thousands of small objects (entries, keys, sets) that live until the run ends; every
700 allocations Python scans the young ones, and every so often the whole heap, to find cycles these structures
never form. On the bench's warm run of 100,000 objects + 1,000 commits the scans took a fifth of the run
(bench/README.md, "Cold and warm runs"). Reference counting still frees everything at once; a cycle made during
the run is collected after it, when the last pause ends.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_pauses = 0
_was_enabled = False


@contextmanager
def paused() -> Iterator[None]:
    """Pause the cyclic collector for the block; nested and concurrent pauses (runs in threads of one process)
    resume it when the last one ends, and only if it was on before the first."""
    global _pauses, _was_enabled  # noqa: PLW0603 - the interpreter's collector is process state
    with _lock:
        if _pauses == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _lock:
            _pauses -= 1
            if _pauses == 0 and _was_enabled:
                gc.enable()
