"""Reach on Spark: the keys the retained ranges' entries point at (and the staged entries'), read on executors
straight into Arrow batches, kept as a persisted DataFrame (``reach/arrow.py``: the same in process)."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from spark_jobs.core import columns
from spark_jobs.core.cleaning import CleaningPolicy
from spark_jobs.engine.backends.spark_base import SparkSteps, translated
from spark_jobs.engine.plan import units


class SparkReach(SparkSteps):
    def reach(self, range_ids: Sequence[str]):
        return self._keep(self._map(range_ids, units.range_keys, columns.KEYS_SCHEMA))

    def reach_scoped(self, range_ids: Sequence[str], path_policies: tuple[CleaningPolicy, ...]):
        """``reach`` with each key's range ordinal and path scope (``units.range_scoped_keys``), persisted: the
        distinct pairs and the kept keys both read it."""
        step = functools.partial(units.range_scoped_keys, path_policies=path_policies)
        return self._keep(self._map([units.scoped_unit(i, r) for i, r in enumerate(range_ids)], step,
                                    units.SCOPED_SCHEMA))

    @translated
    def scope_pairs(self, scoped) -> list[tuple[int, int]]:
        """The distinct (range ordinal, scope mask) pairs, made distinct on executors: what reaches the driver grows
        with ranges and the scopes their paths fall in, never with objects."""
        return [(r["range"], r["scope"]) for r in scoped.select("range", "scope").distinct().collect()]

    def kept_of(self, scoped, live: Sequence[tuple[int, int]]):
        """The keys of the rows whose (range, scope) is ``live``: a semi-join with the live pairs, broadcast (a
        row per range and scope)."""
        from pyspark.sql import functions as F  # noqa: PLC0415

        wanted = self.spark.createDataFrame(list(live), "range bigint, scope bigint")
        return scoped.join(F.broadcast(wanted), ["range", "scope"], "left_semi").select("key")

    def versions(self, version_units: Sequence[str], lines: tuple[tuple[CleaningPolicy, ...], ...], *,
                 reached=None):
        """What keep_versions keeps (``units.range_versions`` on executors): per line and path, its distinct keys
        ranked by the position where the line first holds them (a window on executors), the first ``keep`` of
        each. Every path is ranked (``reached`` is for the Arrow half, whose ranking is held in one process)."""
        step = functools.partial(units.range_versions, lines=lines)
        return self._keep(self.latest(self._map(list(version_units), step, units.VERSIONS_SCHEMA)))

    def latest(self, rows):
        """The keys of ``units.VERSIONS_SCHEMA`` rows within their (line, path)'s first ``keep`` distinct versions,
        ranked by the least position of each."""
        from pyspark.sql import Window  # noqa: PLC0415
        from pyspark.sql import functions as F  # noqa: PLC0415

        first = rows.groupBy("line", "path", "key").agg(F.min("at").alias("at"), F.max("keep").alias("keep"))
        # rank(): two versions first held at one position (none in lakeFS's data) share a rank: never fewer kept
        ranked = first.withColumn("rank", F.rank().over(Window.partitionBy("line", "path").orderBy("at")))
        return ranked.where(F.col("rank") <= F.col("keep")).select("key")

    def staged(self, files: Sequence[str]):
        # read once: the judge, the staged-only keys and their count read the persisted rows
        return self._keep(self._map(files, units.staged_keys, columns.KEYS_SCHEMA))
