"""The plan on Spark: the listing minus what is reached as an anti-join on executors, the plan written by them
(one Parquet part per range partition, in key order); what comes back to the driver is counters: one row per plan
part, per prefix, per aggregate (``plan/arrow.py``: the same in process)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pyarrow as pa

from spark_jobs.core.plan import PlanSummary, StoredObject
from spark_jobs.engine.backends.spark_base import SparkSteps, slice_unit, spark_schema, task_table, translated
from spark_jobs.engine.plan import units
from spark_jobs.engine.runtime.context import OpenContext


class SparkPlan(SparkSteps):
    @translated
    def judge(self, listed, kept: Sequence, *, cutoff: float, prefix_depth: int):
        """The anti-join and its counters in two jobs: one over the listing (what it holds, the data keys among
        them), one over what no kept key reaches, grouped by (old enough, prefix, slice) — a row per prefix and slice
        of the plan, never per object. The later steps that ask for those counts (``count`` of the listing,
        ``write_plan``'s rows, ``slices_of``) get them from here instead of a job of their own."""
        from pyspark.sql import functions as F  # noqa: PLC0415

        key = F.col("key")
        is_data = ~(key.startswith("_lakefs/") | (key == "_lakefs")) & (
            key.startswith("data/") | (~key.contains("/") & (key != "dummy")))
        data = listed.filter(is_data)
        unkept = self._keep(data.join(self.union(list(kept)), "key", "left_anti"))
        one = F.lit(1)
        totals = listed.agg(F.count(one).alias("listed"), F.sum(F.when(is_data, 1).otherwise(0)).alias("data")) \
            .collect()[0]
        self._remember("count", listed, int(totals["listed"]))
        old = F.col("mtime") < F.lit(cutoff)
        prefix = F.when(key.contains("/"), F.concat_ws("/", F.slice(F.split(key, "/", prefix_depth + 1), 1,
                                                                     prefix_depth))).otherwise(F.lit("(root)"))
        groups = unkept.groupBy(old.alias("old"), F.when(old, prefix).alias("prefix"),
                                F.when(old, slice_unit("key")).alias("unit")) \
            .agg(F.count(one).alias("n"), F.sum("size").alias("bytes")).collect()
        summary = PlanSummary(candidates=int(totals["data"] or 0))
        slices: set[str] = set()
        for r in groups:
            n, size = int(r["n"]), int(r["bytes"] or 0)
            if not r["old"]:
                summary.too_new += n
                continue
            summary.deleted, summary.deleted_bytes = summary.deleted + n, summary.deleted_bytes + size
            counts = summary.by_prefix.setdefault(r["prefix"], [0, 0])
            counts[0], counts[1] = counts[0] + n, counts[1] + size
            slices.add(r["unit"])
        summary.kept = summary.candidates - summary.deleted - summary.too_new
        deleted = unkept.filter(old).select(key.alias("address"), F.col("size"))
        self._remember("count", deleted, summary.deleted)
        self._remember("slices", deleted, sorted(slices))
        return deleted, summary

    @translated
    def write_plan(self, deleted, run_id: str) -> list[dict[str, int]]:
        from pyspark.sql import functions as F  # noqa: PLC0415

        rows = self._recalled("count", deleted)
        rows = deleted.count() if rows is None else rows
        if not rows:
            return []
        config = self.config

        def write(ctx: OpenContext, table: pa.Table) -> list[dict]:
            from pyspark import TaskContext  # noqa: PLC0415

            # one task's part: its range of keys, sorted (the parts together are the plan in key order)
            return [units.write_part(ctx, run_id, part=TaskContext.get().partitionId(), table=table.sort_by("address"))]

        parts = math.ceil(rows / units.ROWS_PER_PART)
        frame = deleted.repartitionByRange(parts, F.col("address")) if parts > 1 else deleted.coalesce(1)
        written = frame.mapInArrow(task_table(config, write, units.PART_SCHEMA),
                                   spark_schema(units.PART_SCHEMA)).collect()
        return sorted(({k: int(r[k]) for k in ("part", "rows", "bytes", "size")} for r in written),
                      key=lambda p: p["part"])

    @translated
    def missed(self, deleted, *, recent: set[str], dead: list[str], carried: list[str]) -> int:
        """Of the deleted objects, those whose unit is not among ``recent`` and whose key is neither in the
        ranges ``dead`` nor among ``carried`` (what the incremental rule would have checked): an anti-join."""
        from pyspark.sql import functions as F  # noqa: PLC0415

        checked = self.reach(dead)
        if carried:
            checked = self.union([checked, self.from_keys(carried)])
        unit = slice_unit()
        outside = deleted.filter(~unit.isin(sorted(recent))) if recent else deleted
        if self._is_empty(checked):
            return outside.count()
        return outside.join(checked.select(F.col("key").alias("address")), "address", "left_anti").count()

    @translated
    def slices_of(self, deleted) -> list[str]:
        known = self._recalled("slices", deleted)
        if known is not None:
            return list(known)
        unit = slice_unit()
        return sorted(r["u"] for r in deleted.select(unit.alias("u")).distinct().collect())

    @translated
    def objects(self, deleted) -> list[StoredObject]:
        """The deleted objects as Python objects: only for a caller that asks (an impact view, a test)."""
        return [StoredObject(r["address"], int(r["size"]), 0.0) for r in deleted.orderBy("address").toLocalIterator()]

    @translated
    def by_path(self, deleted, path_units: Sequence[str], depth: int) -> dict[str, list[int]]:
        """--by-path on executors: the history's entries of the plan's keys (a semi-join), each key's entry of least
        (range ordinal, path), its prefix (``units.path_prefixes``), counted per prefix: a row per prefix comes
        back."""
        from pyspark.sql import functions as F  # noqa: PLC0415

        rows = self._map(list(path_units), units.range_paths, units.PATHS_SCHEMA)
        asked = deleted.select(F.col("address").alias("key"))
        named = rows.join(asked, "key", "left_semi").groupBy("key") \
            .agg(F.min(F.struct("range", "path")).alias("first")).select("key", F.col("first.path").alias("path"))
        joined = deleted.select("address", "size").join(named, deleted["address"] == named["key"], "left") \
            .select("path", "size")

        def prefixes(batches):
            for batch in batches:
                yield units.path_prefixes(batch, depth)

        counted = joined.mapInArrow(prefixes, spark_schema(units.PREFIX_SCHEMA)).groupBy("prefix") \
            .agg(F.count(F.lit(1)).alias("objects"), F.sum("size").alias("bytes")).collect()
        return {r["prefix"]: [r["objects"], r["bytes"]] for r in counted}
