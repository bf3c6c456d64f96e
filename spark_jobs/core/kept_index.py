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
    that would go below 0 means the index and the ranges disagree: an IndexError_, never a guess. The work is
    binary searches for the changed keys and copies of the two columns, not a regrouping of the whole index."""
    import numpy as np  # noqa: PLC0415
    import pyarrow as pa  # noqa: PLC0415

    if not delta:
        return index
    hashes, counts = _columns(index)
    keys = np.array(sorted(delta), np.uint64)
    changes = np.array([delta[int(k)] for k in keys.tolist()], np.int64)
    at = np.searchsorted(hashes, keys)
    known = at < len(hashes)
    known[known] = hashes[at[known]] == keys[known]
    counts = counts.copy()
    counts[at[known]] += changes[known]
    if (counts < 0).any() or (changes[~known] < 0).any():
        raise IndexError_("a range's entries were subtracted from keys the index does not count")
    hashes = np.insert(hashes, at[~known], keys[~known])
    counts = np.insert(counts, at[~known], changes[~known])
    live = counts > 0
    return pa.table([pa.array(hashes[live], pa.uint64()), pa.array(counts[live], pa.int64())], schema=_schema())


def holds(index, hashes: Iterable[int]) -> set[int]:
    """Which of ``hashes`` some live range holds."""
    import numpy as np  # noqa: PLC0415

    wanted = np.array(sorted(set(hashes)), np.uint64)
    if not len(wanted):
        return set()
    column, _ = _columns(index)
    at = np.minimum(np.searchsorted(column, wanted), max(len(column) - 1, 0))
    found = column[at] == wanted if len(column) else np.zeros(len(wanted), bool)
    return set(wanted[found].tolist())


def _columns(index):
    """The index's two columns as numpy arrays (hash sorted ascending, as build and apply leave it)."""
    import numpy as np  # noqa: PLC0415

    if not len(index):
        return np.zeros(0, np.uint64), np.zeros(0, np.int64)
    return (index["hash"].combine_chunks().to_numpy(zero_copy_only=False),
            index["count"].combine_chunks().to_numpy(zero_copy_only=False))


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
    hashes, _ = _columns(table)
    if (hashes[1:] <= hashes[:-1]).any():  # lookups search it: out of order, a held key could look unheld
        raise IndexError_("its keys are not in order, or one is there twice")
    return table
