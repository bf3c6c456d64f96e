"""How the Spark runner (``jobs.gc.SparkRunner``) spreads the engine's per-unit work over executors: a picklable
function of one unit (a range id, a listing unit, a batch of addresses) becomes an RDD; the functions are the same
ones the thread runner calls on its pool.

Executors build their own clients (fsspec filesystem, lakeFS HTTP session) once per partition from plain
configuration shipped in the closure: nothing with a socket crosses the wire.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
U = TypeVar("U")


def _partitions(count: int, wanted: int) -> int:
    # Never more partitions than units (empty partitions only cost task launches), never fewer than one.
    return max(1, min(count, wanted))


def flat_map_units(sc, units: Sequence[T], per_partition: Callable[[Iterable[T]], Iterator[U]],
                   *, partitions: int):
    """An RDD of everything ``per_partition`` yields for the units of each partition (units spread evenly)."""
    units = list(units)
    return sc.parallelize(units, _partitions(len(units), partitions)).mapPartitions(per_partition)


def per_unit(make_context: Callable[[], Any], work: Callable[[Any, T], Iterable[U]]):
    """A mapPartitions function that builds one context (client, filesystem) per partition, calls
    ``work(context, unit)`` for each unit and yields what it returns."""
    def run(units: Iterable[T]) -> Iterator[U]:
        context = make_context()
        try:
            for unit in units:
                yield from work(context, unit)
        finally:
            close = getattr(context, "close", None)
            if callable(close):
                close()

    return run

