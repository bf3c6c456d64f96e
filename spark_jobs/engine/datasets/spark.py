"""The dataset steps on Spark: DataFrames whose rows never reach the driver. Ranges, slices and staged files are
read on executors straight into Arrow batches (``mapInArrow`` over a DataFrame of unit names), the difference is
an anti-join on executors, the plan is written by executors (one Parquet part per range partition, in key order)
and what comes back to the driver is counters: one row per plan part, per prefix, per aggregate. pyspark is
imported only here, and only when a Spark runner asks for this backend."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence

import pyarrow as pa

from spark_jobs.core import columns
from spark_jobs.core.plan import PlanSummary, StoredObject
from spark_jobs.engine.context import JobConfig, OpenContext
from spark_jobs.engine.datasets import units

UNIT_SCHEMA = "unit string"
_WRITTEN_PART = pa.schema([pa.field("part", pa.int64(), nullable=False), pa.field("keys", pa.int64(), nullable=False),
                           pa.field("sha256", pa.string(), nullable=False)])


def _over_units(config: JobConfig, fn: Callable[[OpenContext, str], pa.RecordBatch]):
    """A mapInArrow function: one context per task, ``fn`` of every unit named in its batches."""
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ctx = config.open()
        try:
            for batch in batches:
                for unit in batch.column(0).to_pylist():
                    out = fn(ctx, unit)
                    if out.num_rows:
                        yield out
        finally:
            ctx.close()

    return run


def _task_table(config: JobConfig, fn: Callable[[OpenContext, pa.Table], list[dict]], schema: pa.Schema):
    """A mapInArrow function that writes files: a task's rows as one table, given with a context to ``fn``; the rows
    it returns (one per file written) are what the driver gets."""
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        received = [b for b in batches if b.num_rows]
        if not received:
            return
        ctx = config.open()
        try:
            rows = fn(ctx, pa.Table.from_batches(received))
        finally:
            ctx.close()
        if rows:
            yield pa.RecordBatch.from_pylist(rows, schema=schema)

    return run


def _counts(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        if batch.num_rows:
            yield units.key_counts(batch.column(0))


def executor_error(exc: Exception) -> Exception:
    """What failed on an executor, as the thread runner raises it: an error comes back from Py4J as text (the
    task's Python traceback), and the run's callers classify lost leases, store errors and corrupt metadata by type
    (the Spark runner's steps and the dataset backend alike)."""
    import re  # noqa: PLC0415

    from spark_jobs.core.kept_index import IndexError_  # noqa: PLC0415
    from spark_jobs.core.sstable import SSTableError  # noqa: PLC0415
    from spark_jobs.engine.context import GCError  # noqa: PLC0415
    from spark_jobs.engine.lease_watch import LeaseLost  # noqa: PLC0415
    from spark_jobs.engine.stores import StorageError  # noqa: PLC0415

    text = str(exc)
    # a deleter that lost the lease stopped on purpose: that, not what it broke, is why the run stopped
    if found := re.search(r"spark_jobs\.engine\.lease_watch\.LeaseLost: ([^\n]*)", text):
        return LeaseLost(found.group(1).strip())
    if found := re.search(r"spark_jobs\.engine\.stores\.base\.StorageError: ([^\n]*)", text):
        return StorageError(found.group(1).strip())
    if found := re.search(r"spark_jobs\.core\.sstable\.SSTableError: ([^\n]*)", text):
        return SSTableError(found.group(1).strip())
    if found := re.search(r"spark_jobs\.core\.kept_index\.IndexError_: ([^\n]*)", text):
        return IndexError_(found.group(1).strip())  # a damaged kept index: the run lists everything instead
    if found := re.search(r"spark_jobs\.engine\.context\.GCError: ([^\n]*)", text):
        return GCError(found.group(1).strip(), "executor")
    return exc


def _translated(method):
    """A backend method whose Spark actions fail as the thread runner's steps do (``executor_error``)."""
    import functools  # noqa: PLC0415

    @functools.wraps(method)
    def call(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except Exception as exc:
            translated = executor_error(exc)
            if translated is exc:
                raise
            raise translated from None

    return call


def _slice_unit():
    """``incremental.unit_of`` of the plan's ``address`` column: ``data/<slice>/``, or the root (``""``)."""
    from pyspark.sql import functions as F  # noqa: PLC0415

    return F.when(F.col("address").startswith("data/") & (F.size(F.split("address", "/")) >= 3),
                  F.regexp_extract("address", r"^(data/[^/]*/)", 1)).otherwise(F.lit(""))


def _spark_schema(schema: pa.Schema) -> str:
    names = {pa.string(): "string", pa.int64(): "bigint", pa.float64(): "double", pa.binary(): "binary"}
    return ", ".join(f"{f.name} {names[f.type]}" for f in schema)


class SparkBackend:
    """A run's datasets as Spark DataFrames on executors."""

    name = "spark"

    def __init__(self, sc, config: JobConfig, *, partitions: int) -> None:
        from pyspark.sql import SparkSession  # noqa: PLC0415

        self.spark = SparkSession(sc) if SparkSession.getActiveSession() is None else SparkSession.getActiveSession()
        self.config, self.partitions = config, max(1, partitions)
        if not sc.getConf().contains("spark.sql.autoBroadcastJoinThreshold"):
            # a join side under 10 MB (a small lake's kept keys) would be collected to the driver and broadcast:
            # per-object data through the driver, exactly what the plan must never do
            self.spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
        if not sc.getConf().contains("spark.sql.shuffle.partitions"):
            # Spark's 200 shuffle partitions are tasks of a few keys on a small lake; the run's own partition count
            # (lakefs.gc.range.num_partitions) sizes its joins unless the job sets Spark's
            self.spark.conf.set("spark.sql.shuffle.partitions", str(self.partitions))
        self._persisted: list = []

    def _units(self, names: Sequence[str]):
        # units spread one per partition up to the partition count: a range or a slice is a task's worth
        frame = self.spark.createDataFrame([(n,) for n in names], UNIT_SCHEMA)
        return frame.repartition(max(1, min(len(names), self.partitions)))

    def _map(self, names: Sequence[str], fn, schema: pa.Schema):
        if not names:
            return self.spark.createDataFrame([], _spark_schema(schema))
        return self._units(names).mapInArrow(_over_units(self.config, fn), _spark_schema(schema))

    def _keep(self, frame):
        from pyspark import StorageLevel  # noqa: PLC0415

        frame = frame.persist(StorageLevel.MEMORY_AND_DISK)
        self._persisted.append(frame)
        return frame

    def reach(self, range_ids: Sequence[str]):
        return self._keep(self._map(range_ids, units.range_keys, columns.KEYS_SCHEMA))

    def staged(self, files: Sequence[str]):
        return self._map(files, units.staged_keys, columns.KEYS_SCHEMA)

    def listing(self, slices: Sequence[str]):
        # listed once: every later step reads the persisted rows, not the store again
        return self._keep(self._map(slices, units.listing, columns.LISTING_SCHEMA))

    @_translated
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

    @_translated
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
        written = frame.mapInArrow(_task_table(config, write, units.PART_SCHEMA),
                                   _spark_schema(units.PART_SCHEMA)).collect()
        return sorted(({k: int(r[k]) for k in ("part", "rows", "bytes", "size")} for r in written),
                      key=lambda p: p["part"])

    @_translated
    def write_index(self, reached, run_id: str, bits: int) -> list[dict]:
        """The kept index summed by hash on executors and written by them as the 2**bits parts of a base
        (``core.kept_index.split_parts``): the rows of one part go to one task, which sorts and writes it. The driver
        gets a row per part (its head's digest and its keys) and writes the parts no key fell in (empty files)."""
        import numpy as np  # noqa: PLC0415
        from pyspark.sql import functions as F  # noqa: PLC0415

        from spark_jobs.core import kept_index  # noqa: PLC0415
        from spark_jobs.engine import incremental  # noqa: PLC0415

        config = self.config
        counted = reached.select("key").mapInArrow(_counts, _spark_schema(units.INDEX_SCHEMA)) \
            .groupBy("hash").agg(F.sum("count").alias("count"))
        # a uint64 seen as signed: its top bits, unsigned, name its part
        parted = counted.withColumn("part", F.expr(f"shiftrightunsigned(hash, {64 - bits})") if bits else F.lit(0))

        def write(ctx: OpenContext, table: pa.Table) -> list[dict]:
            out = []
            parts = table["part"].to_numpy()
            hashes = table["hash"].to_numpy().view(np.uint64)
            counts = table["count"].to_numpy()
            for part in np.unique(parts).tolist():  # the parts hashed to this task, each whole
                mine = parts == part
                order = np.argsort(hashes[mine], kind="stable")
                out.append(incremental.write_index_part(ctx.ns, run_id, part=int(part), table=pa.table({
                    "hash": pa.array(hashes[mine][order]), "count": pa.array(counts[mine][order])})))
            return out

        rows = parted.repartition(1 << bits, "part").mapInArrow(_task_table(config, write, _WRITTEN_PART),
                                                                _spark_schema(_WRITTEN_PART)).collect()
        written = {int(r["part"]): {"part": int(r["part"]), "keys": int(r["keys"]), "sha256": r["sha256"]}
                   for r in rows}
        ctx = config.open()
        try:
            for part in range(1 << bits):
                if part not in written:  # no key fell in it: an empty part
                    written[part] = incremental.write_index_part(ctx.ns, run_id, part=part, table=kept_index.build({}))
        finally:
            ctx.close()
        return [written[p] for p in sorted(written)]

    @_translated
    def keys_not_in(self, keys, other) -> set[str]:
        return {r["key"] for r in keys.select("key").distinct().join(other.select("key"), "key", "left_anti")
                .toLocalIterator()}

    @_translated
    def missed(self, deleted, *, recent: set[str], checked) -> int:
        from pyspark.sql import functions as F  # noqa: PLC0415

        unit = _slice_unit()
        outside = deleted.filter(~unit.isin(sorted(recent))) if recent else deleted
        return outside.join(checked.select(F.col("key").alias("address")), "address", "left_anti").count()

    @_translated
    def slices_of(self, deleted) -> list[str]:

        unit = _slice_unit()
        return sorted(r["u"] for r in deleted.select(unit.alias("u")).distinct().collect())

    @_translated
    def objects(self, deleted) -> list[StoredObject]:
        """The deleted objects as Python objects: only for a caller that asks (an impact view, a test)."""
        return [StoredObject(r["address"], int(r["size"]), 0.0) for r in deleted.orderBy("address").toLocalIterator()]

    def from_keys(self, keys: list[str]):
        return self.spark.createDataFrame([(k,) for k in keys], "key string")

    def union(self, datasets: list):
        out = datasets[0].select("key")
        for frame in datasets[1:]:
            out = out.unionByName(frame.select("key"))
        return out

    @_translated
    def count_distinct(self, keys) -> int:
        return keys.select("key").distinct().count()

    @_translated
    def count(self, dataset) -> int:
        return dataset.count()

    @_translated
    def key_set(self, keys) -> set[str]:
        return {r["key"] for r in keys.select("key").toLocalIterator()}

    @_translated
    def listed_objects(self, listed) -> list[StoredObject]:
        return [StoredObject(r["key"], int(r["size"]), float(r["mtime"])) for r in listed.toLocalIterator()]

    def release(self, *datasets: object) -> None:
        for frame in self._persisted:
            frame.unpersist()
        self._persisted.clear()
