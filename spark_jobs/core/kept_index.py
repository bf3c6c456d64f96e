"""The kept index: how many live ranges hold each key, by a 64-bit hash of the key (pure; Arrow in memory,
parquet as bytes).

An incremental run must know whether an object of a range that died is still in a range that lives. Ranges share
entries (each version of a range repeats most of the one before), so "in a dead range" says nothing; what decides
is whether any live range still holds the key. The index keeps that as a count per key: a run subtracts the
entries of the ranges that died and adds those of the ranges that appeared, reading only those, and a key whose
count drops to 0 is no longer reached by any retained commit. Twelve bytes per distinct key, read as two Arrow
columns: what a run holds in memory and reads follows the number of keys, with a constant far below the mark's.

Two keys with one hash count together: the only effect is a garbage key kept while its twin lives (a missed
deletion, which the next full run's rebuilt index may repair), never a deletion of a kept key.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterable, Mapping

FORMAT = 1


class IndexError_(ValueError):  # noqa: N801 - IndexError is a builtin
    """An index file that cannot be trusted (the message says why)."""


def key_hash(key: str) -> int:
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "little")


def _schema():
    import pyarrow as pa  # noqa: PLC0415

    return pa.schema([("hash", pa.uint64()), ("count", pa.int64())])


def build(counts: Mapping[int, int]):
    """An index from hash -> count (counts of 0 or less left out), sorted by hash."""
    import pyarrow as pa  # noqa: PLC0415

    items = sorted((h, c) for h, c in counts.items() if c > 0)
    return pa.table([pa.array([h for h, _ in items], pa.uint64()), pa.array([c for _, c in items], pa.int64())],
                    schema=_schema())


def empty():
    return build({})


def apply(index, delta: Mapping[int, int]):
    """``index`` with ``delta`` (hash -> change of count) added; keys whose count drops to 0 leave it. A count
    that would go below 0 means the index and the ranges disagree: an IndexError_, never a guess."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415

    if not delta:
        return index
    changes = pa.table([pa.array(list(delta), pa.uint64()), pa.array(list(delta.values()), pa.int64())],
                       schema=_schema())
    summed = pa.concat_tables([index, changes]).group_by("hash").aggregate([("count", "sum")])
    summed = summed.rename_columns(["hash", "count"])
    if len(summed) and pc.min(summed["count"]).as_py() < 0:
        raise IndexError_("a range's entries were subtracted from keys the index does not count")
    return summed.filter(pc.greater(summed["count"], 0)).sort_by("hash").select(["hash", "count"])


def holds(index, hashes: Iterable[int]) -> set[int]:
    """Which of ``hashes`` some live range holds."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415

    wanted = pa.array(sorted(set(hashes)), pa.uint64())
    if not len(wanted):
        return set()
    found = pc.is_in(wanted, value_set=index["hash"])
    return set(wanted.filter(found).to_pylist())


def encode(index) -> bytes:
    import pyarrow.parquet as pq  # noqa: PLC0415

    out = io.BytesIO()
    pq.write_table(index, out, compression="zstd")
    return out.getvalue()


def decode(data: bytes):
    import pyarrow.compute as pc  # noqa: PLC0415
    import pyarrow.parquet as pq  # noqa: PLC0415

    try:
        table = pq.read_table(io.BytesIO(data))
    except Exception as exc:  # noqa: BLE001 - pyarrow's errors vary: an unreadable index is no index
        raise IndexError_(f"it is unreadable ({type(exc).__name__}: {exc})") from None
    if not table.schema.equals(_schema()):
        raise IndexError_("it has another schema")
    if table["hash"].null_count or table["count"].null_count:
        raise IndexError_("it has empty values")
    if len(table) and pc.min(table["count"]).as_py() <= 0:
        raise IndexError_("it counts a key held by no range")
    return table
