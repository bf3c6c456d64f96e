"""Each dataset step's time and memory in an in-process run: ``BENCH_STEP_TRACE=<file>`` makes scale_bench's
threads child wrap the Arrow backend's steps and append a line per call to the file — the step, its seconds, the
process's RSS before and after and its peak during the call (sampled every 20 ms), and the size of what it returned
when that is an Arrow table. What a run's peak is made of, step by step (bench/README.md, "Where the memory goes")."""

from __future__ import annotations

import functools
import threading
import time
from pathlib import Path
from typing import Any

STEPS = ("reach", "reach_scoped", "scope_pairs", "kept_of", "versions", "keys_not_in", "union", "from_keys",
         "staged", "listing", "checked", "asked", "judge", "write_plan", "write_index", "missed", "count_distinct",
         "by_path")
MIB = 1 << 20


class _Peak:
    """The highest RSS since the last ``reset``, sampled on a daemon thread."""

    def __init__(self) -> None:
        import psutil  # noqa: PLC0415

        self.process = psutil.Process()
        self.high = 0
        self.lock = threading.Lock()
        threading.Thread(target=self._loop, daemon=True).start()

    def rss(self) -> int:
        return self.process.memory_info().rss

    def reset(self) -> int:
        with self.lock:
            self.high = now = self.rss()
        return now

    def _loop(self) -> None:
        while True:
            now = self.rss()
            with self.lock:
                self.high = max(self.high, now)
            time.sleep(0.02)


def trace_steps(path: str) -> None:
    from spark_jobs.engine.backends.arrow import ArrowBackend  # noqa: PLC0415

    peak, depth = _Peak(), threading.local()

    def wrap(name: str, fn: Any) -> Any:
        @functools.wraps(fn)
        def traced(self: Any, *args: Any, **kwargs: Any) -> Any:
            level = getattr(depth, "n", 0)
            depth.n = level + 1
            before, started = (peak.reset() if level == 0 else peak.rss()), time.perf_counter()
            try:
                result = fn(self, *args, **kwargs)
            finally:
                depth.n = level
            held = getattr(result, "nbytes", None) if not isinstance(result, tuple) else \
                getattr(result[0], "nbytes", None)
            line = (f"{'  ' * level}{name}\t{time.perf_counter() - started:.2f} s\tRSS {before / MIB:.0f} -> "
                    f"{peak.rss() / MIB:.0f} MiB, peak {peak.high / MIB:.0f}\t"
                    f"{'' if held is None else f'returned {held / MIB:.1f} MiB'}\n")
            with Path(path).open("a") as out:
                out.write(line)
            return result
        return traced

    for name in STEPS:
        if callable(getattr(ArrowBackend, name, None)):
            setattr(ArrowBackend, name, wrap(name, getattr(ArrowBackend, name)))
