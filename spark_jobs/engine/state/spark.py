"""The next run's kept index on Spark: the reached keys counted by hash and summed on executors, each part of the
base sorted and written by one task (``state/arrow.py``: the same in process)."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from spark_jobs.engine.backends.spark_base import SparkSteps, spark_schema, task_table, translated
from spark_jobs.engine.plan import units
from spark_jobs.engine.runtime.context import OpenContext

_WRITTEN_PART = pa.schema([pa.field("part", pa.int64(), nullable=False), pa.field("keys", pa.int64(), nullable=False),
                           pa.field("sha256", pa.string(), nullable=False)])


def _counts(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        if batch.num_rows:
            yield units.key_counts(batch.column(0))


class SparkState(SparkSteps):
    @translated
    def write_index(self, reached, run_id: str, bits: int) -> list[dict]:
        """The kept index summed by hash on executors and written by them as the 2**bits parts of a base
        (``core.kept_index.split_parts``): the rows of one part go to one task, which sorts and writes it. The driver
        gets a row per part (its head's digest and its keys) and writes the parts no key fell in (empty files)."""
        import numpy as np  # noqa: PLC0415
        from pyspark.sql import functions as F  # noqa: PLC0415

        from spark_jobs.core import kept_index  # noqa: PLC0415
        from spark_jobs.engine.state import incremental  # noqa: PLC0415

        config = self.config
        counted = reached.select("key").mapInArrow(_counts, spark_schema(units.INDEX_SCHEMA)) \
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

        rows = parted.repartition(1 << bits, "part").mapInArrow(task_table(config, write, _WRITTEN_PART),
                                                                spark_schema(_WRITTEN_PART)).collect()
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
