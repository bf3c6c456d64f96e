"""A Parquet file held in memory, read on the calling thread (pure).

``pyarrow.parquet.read_table`` goes through Arrow's dataset scanner, which reads ahead on Arrow's own thread pools;
a process that exits while such a thread is still alive aborts in Arrow's C++ ("terminate called without an active
exception", apache/arrow#34314). An in-process GC run of 1M objects ended that way now and then. The GC already
reads its files on threads of its own (or executors), so each file here is read where it is asked for:
``ParquetFile.read`` with neither Arrow's threads nor its pre-buffering.
"""

from __future__ import annotations

import pyarrow as pa


def read(data: bytes, columns: list[str] | None = None) -> pa.Table:
    """The whole table (or ``columns`` of it); pyarrow's own errors for a file that is not Parquet."""
    import pyarrow.parquet as pq  # noqa: PLC0415

    return pq.ParquetFile(pa.BufferReader(data), pre_buffer=False).read(columns=columns, use_threads=False)


def rows(data: bytes) -> int:
    """How many rows its footer says the file holds."""
    import pyarrow.parquet as pq  # noqa: PLC0415

    return pq.ParquetFile(pa.BufferReader(data), pre_buffer=False).metadata.num_rows
