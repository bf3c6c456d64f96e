"""The full listing in process: what the store holds is never one table here. The namespace's slices are listed
when the plan judges them (``plan/arrow.py``), one slice a thread, each against the kept keys of that slice, so
that a run holds the kept keys, the plan, and the slices being listed at that moment; not a second copy of the
namespace (``listing/spark.py``: listed once on executors, persisted)."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from spark_jobs.core import columns
from spark_jobs.core.plan import StoredObject
from spark_jobs.engine.backends.arrow_base import ArrowSteps
from spark_jobs.engine.plan import units


class Listing:
    """The namespace's slices (``Namespace.list_units``), listed when the run judges them, one slice a thread."""

    def __init__(self, slices: Sequence[str]) -> None:
        self.slices = list(slices)
        self.objects: int | None = None  # how many the judge saw listed


def by_unit(keys: pa.ChunkedArray | pa.Array) -> dict[str, pa.Array]:
    """The kept keys grouped by the listing slice that would hold them (``columns.units_of``)."""
    if not len(keys):
        return {}
    table = pa.table({"unit": columns.units_of(keys), "key": keys}).sort_by("unit")
    counts = pc.value_counts(table["unit"])  # in order of first appearance: sorted, as the table is
    out, at = {}, 0
    for unit, n in zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist(), strict=True):
        out[unit] = table["key"].slice(at, n).combine_chunks()
        at += n
    return out


class ArrowListing(ArrowSteps):
    def listing(self, slices: Sequence[str]) -> Listing:
        return Listing(slices)

    def count(self, dataset: pa.Table | Listing) -> int:
        if isinstance(dataset, Listing):
            if dataset.objects is None:
                dataset.objects = len(self.listed_objects(dataset))
            return dataset.objects
        return dataset.num_rows

    def listed_objects(self, listed: Listing) -> list[StoredObject]:
        """What the store holds now (listed again: the run kept no copy of it)."""
        table = self._map(listed.slices, units.listing, columns.LISTING_SCHEMA)
        return [StoredObject(*row) for row in zip(table["key"].to_pylist(), table["size"].to_pylist(),
                                                  table["mtime"].to_pylist(), strict=True)]
