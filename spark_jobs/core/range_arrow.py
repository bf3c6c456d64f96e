"""A range file as Arrow columns: what the dataset steps of a GC run (reach, the kept index, impact views) take
from lakeFS's range SSTables without a Python object per entry (pure).

``range_batch`` is the one entry point; its schema is ``RANGE_SCHEMA``. The careful decoder of ``sstable`` stays the
reference: whatever decodes faster must give the same rows, in the same order.
"""

from __future__ import annotations

import pyarrow as pa

from spark_jobs.core import sstable

RANGE_SCHEMA = pa.schema([
    pa.field("path", pa.binary(), nullable=False),  # the entry's path in the repository (user key)
    pa.field("address", pa.string(), nullable=False),  # its physical address, as the entry carries it
    pa.field("address_type", pa.int8(), nullable=False),  # addresses.BY_PREFIX_DEPRECATED, RELATIVE or FULL
    pa.field("size", pa.int64(), nullable=False),
])


def range_batch(data: bytes) -> pa.RecordBatch:
    """Every entry of one range file, in key order, checksums verified (``sstable.SSTableError`` otherwise)."""
    entries = sstable.range_entries(data)
    return pa.RecordBatch.from_arrays(
        [pa.array([e[0] for e in entries], pa.binary()), pa.array([e[1] for e in entries], pa.string()),
         pa.array([e[2] for e in entries], pa.int8()), pa.array([e[3] for e in entries], pa.int64())],
        schema=RANGE_SCHEMA)
