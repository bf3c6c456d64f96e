"""How a runner spreads one function over many units of work. The engine's steps are written once, as functions
of (context, unit); a runner only decides where they run: ``ThreadRunner`` on a thread pool in this process (no
JVM, small repositories in seconds), ``SparkRunner`` on executors (spark_jobs/jobs/gc.py). One step that overlaps
the driver's own work goes to ``in_background``."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol


class Runner(Protocol):
    def map_units(self, units: Sequence[Any], fn: Callable[[Any, Any], Iterable[Any]],
                  make_context: Callable[[], Any], *, partitions: int) -> list[Any]:
        """Everything ``fn(context, unit)`` yields for every unit, in any order; one context per partition."""

    def datasets(self, config: Any, *, partitions: int) -> Any:
        """The dataset backend of this runner (``engine.backends``)."""

    def wants_datasets(self, *, ranges: int, cache: bool) -> bool:
        """Whether a run that the dataset steps can plan (engine/plan/datasets.eligible) is planned by them, for a
        repository whose retained commits reach ``ranges`` range files."""


# Above this many retained ranges (≈ 600,000 objects at lakeFS's ≈ 37,000 entries a range), or this many entries in
# fewer ranges (their metaranges' counts: a range can hold 150,000), the thread runner plans a full run as Arrow
# datasets: the mark cache's Python objects grow with the objects (1–3 KiB each, 2.4 KiB measured at 100k), the
# Arrow columns by tens of bytes. Below both the cache makes a small repository's repeated full runs cheap; --no-cache
# takes the datasets at any size.
DATASETS_ABOVE_RANGES = 16
DATASETS_ABOVE_ENTRIES = 50_000


class ThreadRunner:

    in_process = True  # what its units read, this process holds (``parallel.in_process``)

    def __init__(self, threads: int = 8) -> None:
        self.threads = threads

    def datasets(self, config: Any, *, partitions: int) -> Any:
        from spark_jobs.engine.backends.arrow import ArrowBackend  # noqa: PLC0415

        return ArrowBackend(self, config)

    def wants_datasets(self, *, ranges: int, cache: bool, entries: Callable[[], int] | None = None) -> bool:
        if not cache or ranges > DATASETS_ABOVE_RANGES:
            return True
        return entries is not None and entries() > DATASETS_ABOVE_ENTRIES  # few ranges, but big ones

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


def in_background(name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future:
    """``fn`` on a daemon thread of its own, its result or error in the Future: what a run overlaps with its own
    work (the mark cache read while lakeFS answers, written while the namespace is listed). A daemon, so that a
    run that fails before using it does not keep its process alive until, say, a history-sized listing ends, as
    an executor's thread would at exit; whoever needs it done waits on the Future."""
    future: Future = Future()

    def work() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits, as an executor does
            future.set_exception(exc)

    threading.Thread(target=work, name=name, daemon=True).start()
    return future


# Up to this many units, a step runs on the driver's threads whatever the runner: an incremental run's steps (the
# ranges that changed, the recent slices, the keys asked for) are a few dozen units, and a Spark job costs more in
# scheduling than that work (measured: 0.85 s against 0.19 s for a day on one table at 1M objects)
FEW_UNITS = 64


def fitting(runner: Runner, units: Sequence[Any]) -> Runner:
    """``runner`` for many units, the driver's threads for few."""
    return ThreadRunner() if len(units) <= FEW_UNITS else runner


def in_process(runner: Runner) -> bool:
    """Whether ``runner`` runs its units in this process (the thread runner): whatever a step reads there, the
    driver holds, wherever the step runs; a runner of its own (Spark's executors) keeps it off the driver."""
    return bool(getattr(runner, "in_process", False))


def wants_datasets(runner: Runner, *, ranges: int, cache: bool, entries: Callable[[], int] | None = None) -> bool:
    """``runner.wants_datasets``; a runner that does not say (a profiling runner, say) keeps the object path.
    ``entries``: the retained ranges' entries, counted only if the runner asks (few ranges may be big ones)."""
    ask = getattr(runner, "wants_datasets", None)
    return bool(ask(ranges=ranges, cache=cache, entries=entries)) if callable(ask) else False
