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
        from pyspark.sql import functions as F  # noqa: PLC0415

        key = F.col("key")
        is_data = ~(key.startswith("_lakefs/") | (key == "_lakefs")) & (
            key.startswith("data/") | (~key.contains("/") & (key != "dummy")))
        data = listed.filter(is_data)
        everything = self.union(list(kept))
        unkept = self._keep(data.join(everything, "key", "left_anti"))
        old = F.col("mtime") < F.lit(cutoff)
        summary = PlanSummary()
        summary.candidates = data.count()
        row = unkept.agg(F.count(F.lit(1)).alias("n"), F.sum(F.when(old, 1).otherwise(0)).alias("deleted"),
                         F.sum(F.when(old, F.col("size")).otherwise(0)).alias("bytes")).collect()[0]
        summary.kept = summary.candidates - row["n"]
        summary.deleted, summary.deleted_bytes = int(row["deleted"] or 0), int(row["bytes"] or 0)
        summary.too_new = row["n"] - summary.deleted
        deleted = unkept.filter(old).select(key.alias("address"), F.col("size"))
        prefix = F.when(key.contains("/"), F.concat_ws("/", F.slice(F.split(key, "/", prefix_depth + 1), 1,
                                                                     prefix_depth))).otherwise(F.lit("(root)"))
        for r in unkept.filter(old).groupBy(prefix.alias("prefix")).agg(
                F.count(F.lit(1)).alias("n"), F.sum("size").alias("bytes")).collect():
            summary.by_prefix[r["prefix"]] = [int(r["n"]), int(r["bytes"] or 0)]
        return deleted, summary

    @translated
    def write_plan(self, deleted, run_id: str) -> list[dict[str, int]]:
        from pyspark.sql import functions as F  # noqa: PLC0415

        rows = deleted.count()
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
        return outside.join(checked.select(F.col("key").alias("address")), "address", "left_anti").count()

    @translated
    def slices_of(self, deleted) -> list[str]:

        unit = slice_unit()
        return sorted(r["u"] for r in deleted.select(unit.alias("u")).distinct().collect())

    @translated
    def objects(self, deleted) -> list[StoredObject]:
        """The deleted objects as Python objects: only for a caller that asks (an impact view, a test)."""
        return [StoredObject(r["address"], int(r["size"]), 0.0) for r in deleted.orderBy("address").toLocalIterator()]
