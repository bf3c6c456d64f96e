"""The next run's kept index in process: the reached keys counted by hash on the thread runner's pool and written
as the parts of a base (``state/spark.py``: summed and written on executors)."""

from __future__ import annotations

import pyarrow as pa

from spark_jobs.engine.backends.arrow_base import ArrowSteps, table_of
from spark_jobs.engine.plan import units
from spark_jobs.engine.state import incremental


class ArrowState(ArrowSteps):
    def index(self, reached: pa.Table) -> pa.Table:
        """The kept index (``core.kept_index``'s table: hash, count; sorted by hash) of the reached entries."""
        keys = reached["key"].combine_chunks() if reached.num_rows else pa.array([], pa.string())
        step = -(-len(keys) // max(1, self.runner.threads)) or 1
        chunks = [keys.slice(i, step) for i in range(0, len(keys), step)]
        counted = table_of(self.runner.map_units(chunks, lambda _ctx, c: [units.key_counts(c)], lambda: None,
                                                 partitions=0), units.INDEX_SCHEMA)
        summed = counted.group_by("hash").aggregate([("count", "sum")]) if counted.num_rows else counted
        hashes = summed["hash"].combine_chunks().cast(pa.int64()).view(pa.uint64()) if summed.num_rows \
            else pa.array([], pa.uint64())
        totals = summed["count_sum" if summed.num_rows else "count"]
        table = pa.table({"hash": hashes, "count": totals})
        return table.sort_by("hash")

    def write_index(self, reached: pa.Table, run_id: str, bits: int) -> list[dict]:
        """The kept index written as the 2**bits parts of a base (``incremental.write_index_parts``) by the pool."""
        ctx = self.config.open()
        try:
            return incremental.write_index_parts(ctx.ns, run_id, self.index(reached), bits=bits, runner=self.runner)
        finally:
            ctx.close()
