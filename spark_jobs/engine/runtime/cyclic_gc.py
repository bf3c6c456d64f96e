"""Python's cyclic garbage collector, paused while a run builds its large acyclic structures.

A mark allocates hundreds of thousands of small objects (entries, keys, sets) that live until the run ends; every
700 allocations Python scans the young ones, and every so often the whole heap, to find cycles these structures
never form. On the bench's warm run of 100,000 objects + 1,000 commits the scans took a fifth of the run
(bench/README.md, "Cold and warm runs"). Reference counting still frees everything at once.

Resuming the collector is not free either: everything the run allocated and still holds when it ends (its result,
the S3 client and its service model, the modules it imported) is young to the collector, and the first allocation
after the pause scans it, then the whole heap: ≈ 0.1 s at the end of a daily run on S3 (≈ 170,000 objects;
bench/README.md, "The random day on versitygw after trimming the run's serial ends"), a twentieth of the run. So the
last pause to end freezes what is alive (``gc.freeze``: moved out of the collector's sight, as webhook/wsgi.py does
before forking) instead of letting it be scanned, and the next pause to start gives it back and collects once, so
that a cycle the run left behind is freed by the next run's start: a run in a process of its own (spark-submit, the
CLI) never pays the scan, a long-lived worker pays it once per run, at the start rather than the end.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_pauses = 0
_was_enabled = False
_frozen = False  # what the last pause froze is still out of the collector's sight


@contextmanager
def paused() -> Iterator[None]:
    """Pause the cyclic collector for the block; nested and concurrent pauses (runs in threads of one process)
    resume it when the last one ends, and only if it was on before the first."""
    global _pauses, _was_enabled, _frozen  # noqa: PLW0603 - the interpreter's collector is process state
    thaw = False
    with _lock:
        if _pauses == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
            thaw, _frozen = _frozen, False
            if thaw:
                gc.unfreeze()
        _pauses += 1
    try:
        if thaw:  # the previous run's leftovers: a cycle among them is freed now, not kept frozen for good
            gc.collect()  # (outside the lock: a finalizer it runs may start a run)
        yield
    finally:
        with _lock:
            _pauses -= 1
            if _pauses == 0 and _was_enabled:
                gc.freeze()
                _frozen = True
                gc.enable()
