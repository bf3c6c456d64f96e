"""What the Spark steps share: a DataFrame of unit names mapped on executors into Arrow batches (``mapInArrow``,
one context per task), a task's rows written as files, what failed on an executor read back as the thread runner
raises it, and the base of each step's Spark half (``reach/spark.py``, ``listing/spark.py``, ``plan/spark.py``,
``state/spark.py``; ``backends/spark.py`` puts them together as ``SparkBackend``). pyspark is imported inside the
functions, only when a Spark runner asks for this backend."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

import pyarrow as pa

from spark_jobs.engine.runtime.context import JobConfig, OpenContext

UNIT_SCHEMA = "unit string"


def over_units(config: JobConfig, fn: Callable[[OpenContext, str], pa.RecordBatch]):
    """A mapInArrow function: one context per task, ``fn`` of every unit named in its batches."""
    return _per_task(config, lambda ctx, batch: (fn(ctx, unit) for unit in batch.column(0).to_pylist()))


def over_batches(config: JobConfig, fn: Callable[[OpenContext, pa.RecordBatch], pa.RecordBatch]):
    """A mapInArrow function: one context per task, ``fn`` of every batch of its rows."""
    return _per_task(config, lambda ctx, batch: (fn(ctx, batch),))


def _per_task(config: JobConfig, outputs: Callable[[OpenContext, pa.RecordBatch], Iterable[pa.RecordBatch]]):
    """A mapInArrow function: one context per task (closed when the task ends), the non-empty batches ``outputs``
    gives for each batch of the task's rows, each made when the one before has been taken."""
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        ctx = config.open()
        try:
            for batch in batches:
                for out in outputs(ctx, batch):
                    if out.num_rows:
                        yield out
        finally:
            ctx.close()

    return run


def task_table(config: JobConfig, fn: Callable[[OpenContext, pa.Table], list[dict]], schema: pa.Schema):
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


def executor_error(exc: Exception) -> Exception:
    """What failed on an executor, as the thread runner raises it: an error comes back from Py4J as text (the
    task's Python traceback), and the run's callers classify lost leases, store errors and corrupt metadata by type
    (the Spark runner's steps and the dataset backend alike)."""
    import re  # noqa: PLC0415

    from spark_jobs.core.kept_index import IndexError_  # noqa: PLC0415
    from spark_jobs.core.sstable import SSTableError  # noqa: PLC0415
    from spark_jobs.engine.runtime.context import GCError  # noqa: PLC0415
    from spark_jobs.engine.stores import StorageError  # noqa: PLC0415
    from spark_jobs.engine.sweep.lease_watch import LeaseLost  # noqa: PLC0415

    text = str(exc)
    # a deleter that lost the lease stopped on purpose: that, not what it broke, is why the run stopped
    if found := re.search(r"spark_jobs\.engine\.sweep\.lease_watch\.LeaseLost: ([^\n]*)", text):
        return LeaseLost(found.group(1).strip())
    if found := re.search(r"spark_jobs\.engine\.listing\.inventory\.InventoryError: ([^\n]*)", text):
        from spark_jobs.engine.listing.inventory import InventoryError  # noqa: PLC0415

        return InventoryError(found.group(1).strip())  # a report's data file that is not what its manifest says
    if found := re.search(r"spark_jobs\.engine\.stores\.base\.StorageError: ([^\n]*)", text):
        return StorageError(found.group(1).strip())
    if found := re.search(r"spark_jobs\.core\.sstable\.SSTableError: ([^\n]*)", text):
        return SSTableError(found.group(1).strip())
    if found := re.search(r"spark_jobs\.core\.kept_index\.IndexError_: ([^\n]*)", text):
        return IndexError_(found.group(1).strip())  # a damaged kept index: the run lists everything instead
    if found := re.search(r"spark_jobs\.engine\.runtime\.context\.GCError: ([^\n]*)", text):
        return GCError(found.group(1).strip(), "executor")
    return exc


def translated(method):
    """A backend method whose Spark actions fail as the thread runner's steps do (``executor_error``)."""
    import functools  # noqa: PLC0415

    @functools.wraps(method)
    def call(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except Exception as exc:
            error = executor_error(exc)
            if error is exc:
                raise
            raise error from None

    return call


def slice_unit(column: str = "address"):
    """``listing.incremental.unit_of`` of a key column (the plan's ``address``): ``data/<slice>/``, or the root
    (``""``)."""
    from pyspark.sql import functions as F  # noqa: PLC0415

    return F.when(F.col(column).startswith("data/") & (F.size(F.split(column, "/")) >= 3),
                  F.regexp_extract(column, r"^(data/[^/]*/)", 1)).otherwise(F.lit(""))


def spark_schema(schema: pa.Schema) -> str:
    names = {pa.string(): "string", pa.int64(): "bigint", pa.float64(): "double", pa.binary(): "binary"}
    return ", ".join(f"{f.name} {names[f.type]}" for f in schema)


class SparkSteps:
    """A run's datasets as Spark DataFrames on executors: the base of each step's Spark half."""

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
        # what one job already counted, asked again by a later step: id(frame) -> (frame, value); the frame is held
        # so that its id cannot name another frame before release()
        self._known: dict[tuple[str, int], tuple[object, object]] = {}

    def _units(self, names: Sequence[str]):
        # units spread one per partition up to the partition count: a range or a slice is a task's worth
        frame = self.spark.createDataFrame([(n,) for n in names], UNIT_SCHEMA)
        return frame.repartition(max(1, min(len(names), self.partitions)))

    def _map(self, names: Sequence[str], fn, schema: pa.Schema):
        if not names:
            return self._empty(spark_schema(schema))
        return self._units(names).mapInArrow(over_units(self.config, fn), spark_schema(schema))

    def _empty(self, schema: str):
        """An empty DataFrame known to be empty: the steps that read it skip their jobs (``_is_empty``). A run with
        no staged file, no dead range or nothing carried would otherwise pay a Spark job or two per step for no
        row (each 0.1–0.9 s of scheduling, most of a small lake's daily run)."""
        frame = self.spark.createDataFrame([], schema)
        self._remember("empty", frame, True)
        return frame

    def _is_empty(self, frame) -> bool:
        # only what this backend made empty: a count a job once found 0 is no proof (a persisted listing whose
        # blocks were lost is listed again, and may then hold rows)
        return self._recalled("empty", frame) is True

    def _remember(self, what: str, frame, value) -> None:
        self._known[(what, id(frame))] = (frame, value)

    def _recalled(self, what: str, frame):
        known = self._known.get((what, id(frame)))
        return None if known is None or known[0] is not frame else known[1]

    def _keep(self, frame):
        from pyspark import StorageLevel  # noqa: PLC0415

        frame = frame.persist(StorageLevel.MEMORY_AND_DISK)
        self._persisted.append(frame)
        return frame

    def union(self, datasets: list):
        """The key columns of ``datasets`` one after the other (known-empty ones left out: a union of none of them
        is known empty too)."""
        rows = [frame for frame in datasets if not self._is_empty(frame)]
        if not rows:
            return self._empty("key string")
        out = rows[0].select("key")
        for frame in rows[1:]:
            out = out.unionByName(frame.select("key"))
        return out
