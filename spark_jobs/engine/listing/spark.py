"""The full listing on Spark: the namespace's slices listed on executors into a DataFrame, persisted so that every
later step reads those rows, not the store again (``listing/arrow.py``: listed slice by slice when judged); an
inventory report's data files read the same way, one file a unit, on executors (``inventory``)."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import pyarrow as pa

from spark_jobs.core import columns
from spark_jobs.core.plan import StoredObject
from spark_jobs.engine.backends.spark_base import SparkSteps, over_batches, slice_unit, spark_schema, translated
from spark_jobs.engine.listing.incremental import STAT_BATCH
from spark_jobs.engine.listing.inventory import Report, file_batch
from spark_jobs.engine.plan import units


class SparkListing(SparkSteps):
    def listing(self, slices: Sequence[str], asked=None):
        """The slices listed on executors (and on an incremental run the objects found by asking for them,
        ``asked``), persisted: listed once, every later step reads these rows, not the store again."""
        listed = self._keep(self._map(slices, units.listing, columns.LISTING_SCHEMA))
        return listed if asked is None or self._is_empty(asked) else self._keep(listed.unionByName(asked))

    def checked(self, dead: Sequence[str], carried: Sequence[str]):
        """The keys an incremental run checks (``listing.incremental.would_check``): the dead ranges' entries'
        (decoded on executors) and the carried ones (a state holds at most ``CARRIED_STAGED_MOST`` of each kind)."""
        decoded = self._map(dead, units.range_keys, columns.KEYS_SCHEMA)
        return self.union([decoded, self.from_keys(list(carried))]) if carried else decoded

    @translated
    def asked(self, checked, *, kept: Sequence, skip: Sequence[str]):
        """Of ``checked``, the distinct keys no ``kept`` dataset holds and outside the slices ``skip`` (listed
        whole): an anti-join on executors, the keys then asked for by executors (a request each, ``STAT_BATCH``
        at a time). The objects still in the store (persisted), and how many keys were asked for."""
        if self._is_empty(checked):  # no range died and the state carries nothing: nothing to ask for
            return self._empty(spark_schema(columns.LISTING_SCHEMA)), 0
        wanted = checked.select("key").distinct().join(self.union(list(kept)), "key", "left_anti")
        if skip:
            wanted = wanted.filter(~slice_unit("key").isin(sorted(skip)))
        wanted = self._keep(wanted)
        count = wanted.count()
        config = self.config

        def stat(ctx, batch):
            keys = batch.column(0).to_pylist()
            found = [units.stat_keys(ctx, keys[at:at + STAT_BATCH]) for at in range(0, len(keys), STAT_BATCH)]
            return pa.concat_batches(found) if found else pa.RecordBatch.from_pylist([], schema=columns.LISTING_SCHEMA)

        tasks = max(1, min(self.partitions, math.ceil(count / STAT_BATCH)))
        frame = wanted.repartition(tasks).mapInArrow(over_batches(config, stat), spark_schema(columns.LISTING_SCHEMA))
        return self._keep(frame), count

    def inventory(self, report: Report):
        """An inventory report's data files, each read, checked against its manifest and filtered on an executor
        (``listing.inventory.file_batch``: one file a unit), into a DataFrame of the listing's columns, persisted.
        The driver holds the manifest, never a row."""
        from pyspark.sql import functions as F  # noqa: PLC0415

        frame = self._map(report.names, functools.partial(file_batch, report), columns.LISTING_SCHEMA)
        if report.kind == "azure":  # a key named twice keeps its newest row (inventory_azure.namespace_objects)
            newest = F.max(F.struct(F.col("mtime"), F.col("size"))).alias("newest")
            frame = frame.groupBy("key").agg(newest).select("key", "newest.size", "newest.mtime")
        return self._keep(frame)

    @translated
    def count(self, dataset) -> int:
        if self._is_empty(dataset):
            return 0
        known = self._recalled("count", dataset)  # the judge's job counted the listing (plan/spark.py)
        return dataset.count() if known is None else known

    @translated
    def listed_objects(self, listed) -> list[StoredObject]:
        return [StoredObject(r["key"], int(r["size"]), float(r["mtime"])) for r in listed.toLocalIterator()]
