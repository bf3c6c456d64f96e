"""The full listing in process: what the store holds is never one table here. The namespace's slices are listed
when the plan judges them (``plan/arrow.py``), one slice a thread, each against the kept keys of that slice, so
that a run holds the kept keys, the plan, and the slices being listed at that moment; not a second copy of the
namespace (``listing/spark.py``: listed once on executors, persisted). An inventory report's data files are read by the
pool's threads, one file a unit, into one Arrow table of the namespace's rows (``inventory``)."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from spark_jobs.core import columns
from spark_jobs.core.key_set import KeySet
from spark_jobs.core.plan import StoredObject
from spark_jobs.engine.backends.arrow_base import ArrowSteps
from spark_jobs.engine.listing.incremental import STAT_BATCH
from spark_jobs.engine.listing.inventory import Report, file_batch
from spark_jobs.engine.plan import units


class Listing:
    """The namespace's slices (``Namespace.list_units``), listed when the run judges them, one slice a thread; on
    an incremental run the recent slices, and ``asked``: the objects found by asking for them (``asked``)."""

    def __init__(self, slices: Sequence[str], asked: pa.Table | None = None) -> None:
        self.slices = list(slices)
        self.asked = asked
        self.objects: int | None = None  # how many the judge saw listed (the slices' objects)


class Buckets(Mapping):
    """The kept keys grouped by the listing slice that would hold them (``columns.units_of``): what a run holds
    is the keys (where they already are) and their positions in slice order (4 bytes a key); a slice's keys are
    taken out when the slice is judged, and go with it. The slices are found ``STEP`` keys at a time (a number
    per slice, not a copy of the keys)."""

    STEP = 65_536

    def __init__(self, keys: pa.ChunkedArray | pa.Array) -> None:
        import numpy as np  # noqa: PLC0415

        self.keys, self.spans = keys, {}
        self.order = np.empty(0, np.uint32)
        # where each chunk starts (and, last, the end): a position's chunk
        self.starts = np.cumsum([0, *(len(c) for c in keys.chunks)]) if isinstance(keys, pa.ChunkedArray) \
            else np.array([0, len(keys)])
        if not len(keys):
            return
        ids: dict[str, int] = {}
        codes = np.empty(len(keys), np.int32)
        for at in range(0, len(keys), self.STEP):
            part = keys.slice(at, self.STEP)
            found = columns.units_of(part.combine_chunks() if isinstance(part, pa.ChunkedArray) else part)
            found = found.dictionary_encode()
            number = np.array([ids.setdefault(u, len(ids)) for u in found.dictionary.to_pylist()], np.int32)
            codes[at:at + len(part)] = number[found.indices.to_numpy(zero_copy_only=False)]
        self.order = np.argsort(codes, kind="stable").astype(np.uint32 if len(keys) < 2**32 else np.uint64)
        counts = np.bincount(codes, minlength=len(ids))
        del codes
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        self.spans = {unit: (int(starts[n]), int(counts[n])) for unit, n in ids.items()}

    def __getitem__(self, unit: str) -> pa.Array:
        """The unit's keys, taken chunk by chunk: Arrow's take over a chunked array of strings first makes the
        chunks one array, a copy of every kept key per slice in flight."""
        import numpy as np  # noqa: PLC0415

        at, n = self.spans[unit]
        positions = self.order[at:at + n]  # ascending within a unit (a stable sort)
        if not isinstance(self.keys, pa.ChunkedArray):
            return self.keys.take(pa.array(positions))
        cuts = np.searchsorted(positions, self.starts)
        parts = [chunk.take(pa.array(positions[cuts[i]:cuts[i + 1]] - self.starts[i]))
                 for i, chunk in enumerate(self.keys.chunks) if cuts[i + 1] > cuts[i]]
        return pa.concat_arrays(parts) if parts else pa.array([], self.keys.type)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self.spans))

    def __len__(self) -> int:
        return len(self.spans)


def by_unit(keys: pa.ChunkedArray | pa.Array) -> Buckets:
    """The kept keys grouped by the listing slice that would hold them (``Buckets``)."""
    return Buckets(keys)


def newest_per_key(table: pa.Table) -> pa.Table:
    """One row per key, the newest (an Azure report may name a key twice: duplicates, a version row; as
    ``inventory_azure.namespace_objects``)."""
    if table.num_rows < 2:
        return table
    table = table.sort_by([("key", "ascending"), ("mtime", "descending")])
    keys = table["key"].combine_chunks()
    before = pa.concat_arrays([pa.array([None], pa.string()), keys.slice(0, len(keys) - 1)])
    return table.filter(pc.fill_null(pc.not_equal(keys, before), True))


class ArrowListing(ArrowSteps):
    def listing(self, slices: Sequence[str], asked: pa.Table | None = None) -> Listing:
        return Listing(slices, asked)

    def checked(self, dead: Sequence[str], carried: Sequence[str]) -> pa.Table:
        """The keys an incremental run checks (``listing.incremental.would_check``): the dead ranges' entries'
        (decoded as the reach decodes) and the carried ones."""
        return pa.concat_tables([self.reach(dead), self.from_keys(list(carried))])

    def asked(self, checked: pa.Table, *, kept: Sequence[pa.Table], skip: Sequence[str]) -> tuple[pa.Table, int]:
        """Of ``checked``, the keys no ``kept`` table holds and outside the slices ``skip`` (listed whole), asked for
        (a request each, ``STAT_BATCH`` keys a unit of the pool): the objects still in the store, and how many keys
        were asked for. The kept keys go into one set (``KeySet``, read in place) that every checked key is probed
        against, so that only the few left are made distinct: making every checked key distinct first, then probing
        each kept table against them, held three copies of the day's dead entries (at 1M objects +310 MiB)."""
        keys = checked["key"]
        kept = [table["key"] for table in kept if table.num_rows]
        if len(keys) and kept:
            keys = keys.filter(pc.invert(KeySet(kept).holds(keys)))
        few = pc.unique(keys.combine_chunks()) if len(keys) else pa.array([], pa.string())
        if len(few) and skip:
            few = few.filter(pc.invert(pc.is_in(columns.units_of(few), value_set=pa.array(sorted(skip), pa.string()))))
        batches = [few.slice(at, STAT_BATCH).to_pylist() for at in range(0, len(few), STAT_BATCH)]
        return self._map(batches, units.stat_keys, columns.LISTING_SCHEMA), len(few)

    def inventory(self, report: Report) -> pa.Table:
        """An inventory report's data files, each read, checked and filtered by a thread of the pool into Arrow
        columns (``listing.inventory.file_batch``): the namespace's rows of the report, one table."""
        table = self._map(report.names, functools.partial(file_batch, report), columns.LISTING_SCHEMA)
        return newest_per_key(table) if report.kind == "azure" else table

    def count(self, dataset: pa.Table | Listing) -> int:
        if isinstance(dataset, Listing):
            asked = 0 if dataset.asked is None else dataset.asked.num_rows
            if dataset.objects is None:
                dataset.objects = len(self.listed_objects(dataset)) - asked
            return dataset.objects + asked
        return dataset.num_rows

    def listed_objects(self, listed: Listing | pa.Table) -> list[StoredObject]:
        """What the store holds now (listed again: the run kept no copy of it), or what a report said it held."""
        table = listed if isinstance(listed, pa.Table) else self._map(listed.slices, units.listing,
                                                                       columns.LISTING_SCHEMA)
        if isinstance(listed, Listing) and listed.asked is not None:
            table = pa.concat_tables([table, listed.asked])
        return [StoredObject(*row) for row in zip(table["key"].to_pylist(), table["size"].to_pylist(),
                                                  table["mtime"].to_pylist(), strict=True)]
