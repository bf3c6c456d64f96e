"""The next run's kept index in process: the reached keys counted by hash on the thread runner's pool and written
as the parts of a base (``state/spark.py``: summed and written on executors)."""

from __future__ import annotations

import pyarrow as pa

from spark_jobs.engine.backends.arrow_base import ArrowSteps, table_of
from spark_jobs.engine.plan import units
from spark_jobs.engine.state import incremental


def summed(counted: pa.Table) -> pa.Table:
    """The counts of each hash summed (``core.kept_index``'s table: hash as uint64, count; sorted by hash), with
    numpy: 16 bytes a record, no Acero plan."""
    import numpy as np  # noqa: PLC0415

    hashes = counted["hash"].combine_chunks().to_numpy(zero_copy_only=False).view(np.uint64) if counted.num_rows \
        else np.zeros(0, np.uint64)
    counts = counted["count"].combine_chunks().to_numpy(zero_copy_only=False) if counted.num_rows \
        else np.zeros(0, np.int64)
    order = np.argsort(hashes, kind="stable")
    hashes, counts = hashes[order], counts[order]
    del order
    starts = np.flatnonzero(np.concatenate([[True], hashes[1:] != hashes[:-1]])) if len(hashes) \
        else np.zeros(0, np.int64)
    return pa.table({"hash": pa.array(hashes[starts], pa.uint64()),
                     "count": pa.array(np.add.reduceat(counts, starts) if len(starts) else counts, pa.int64())})


class ArrowState(ArrowSteps):
    def index(self, reached: pa.Table) -> pa.Table:
        """The kept index (``core.kept_index``'s table: hash, count; sorted by hash) of the reached entries."""
        keys = reached["key"]  # sliced where it is: no second copy of every key
        step = -(-len(keys) // max(1, self.runner.threads)) or 1
        chunks = [keys.slice(i, step) for i in range(0, len(keys), step)]
        counted = table_of(self.runner.map_units(chunks, lambda _ctx, c: [units.key_counts(c)], lambda: None,
                                                 partitions=0), units.INDEX_SCHEMA)
        return summed(counted)

    def write_index(self, reached: pa.Table, run_id: str, bits: int) -> list[dict]:
        """The kept index written as the 2**bits parts of a base (``incremental.write_index_parts``) by the pool."""
        ctx = self.config.open()
        try:
            return incremental.write_index_parts(ctx.ns, run_id, self.index(reached), bits=bits, runner=self.runner)
        finally:
            ctx.close()
