"""How the GC's Spark job spreads the pure core functions over executors. Each helper takes a picklable function
of one unit of work (a range id, a listing unit, a batch of addresses) and gives back an RDD or a driver-side
result; the functions themselves are the ones the in-process engine runs on its thread pool.

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


def subtract(candidates, kept, partitions: int):
    """Candidates (``(address, payload)`` pairs) whose address is not in ``kept`` (an RDD of addresses),
    hash-partitioned by address into ``partitions`` partitions (the seed's address.num_partitions)."""
    keyed_kept = kept.map(lambda address: (address, None))
    return candidates.subtractByKey(keyed_kept, numPartitions=partitions)


def batches(items: Sequence[T], size: int) -> list[list[T]]:
    items = list(items)
    return [items[i:i + size] for i in range(0, len(items), size)]
