"""How an engine runs one function over many units of work. The GC's steps are written once, as functions of
(context, unit); an engine only decides where they run: ``ThreadRunner`` on a thread pool in this process (no
JVM, small repositories in seconds), the Spark job's runner on executors (spark_jobs/jobs/gc.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol


class Runner(Protocol):
    def map_units(self, units: Sequence[Any], fn: Callable[[Any, Any], Iterable[Any]],
                  make_context: Callable[[], Any], *, partitions: int) -> list[Any]:
        """Everything ``fn(context, unit)`` yields for every unit, in any order; one context per partition."""


class ThreadRunner:
    def __init__(self, threads: int = 8) -> None:
        self.threads = threads

    def map_units(self, units: Sequence[Any], fn: Callable[[Any, Any], Iterable[Any]],
                  make_context: Callable[[], Any], *, partitions: int) -> list[Any]:
        units = list(units)
        if not units:
            return []
        chunks = max(1, min(len(units), self.threads))
        # Contiguous slices, as Spark's parallelize cuts them: neighbouring units (versions of one key span)
        # share a context
        size = -(-len(units) // chunks)
        parts = [units[i:i + size] for i in range(0, len(units), size)]

        def run(part: list[Any]) -> list[Any]:
            context = make_context()
            try:
                return [item for unit in part for item in fn(context, unit)]
            finally:
                close = getattr(context, "close", None)
                if callable(close):
                    close()

        with ThreadPoolExecutor(chunks) as pool:
            return [item for result in pool.map(run, parts) for item in result]
