"""The full listing on Spark: the namespace's slices listed on executors into a DataFrame, persisted so that every
later step reads those rows, not the store again (``listing/arrow.py``: listed slice by slice when judged)."""

from __future__ import annotations

from collections.abc import Sequence

from spark_jobs.core import columns
from spark_jobs.core.plan import StoredObject
from spark_jobs.engine.backends.spark_base import SparkSteps, translated
from spark_jobs.engine.plan import units


class SparkListing(SparkSteps):
    def listing(self, slices: Sequence[str]):
        # listed once: every later step reads the persisted rows, not the store again
        return self._keep(self._map(slices, units.listing, columns.LISTING_SCHEMA))

    @translated
    def count(self, dataset) -> int:
        return dataset.count()

    @translated
    def listed_objects(self, listed) -> list[StoredObject]:
        return [StoredObject(r["key"], int(r["size"]), float(r["mtime"])) for r in listed.toLocalIterator()]
