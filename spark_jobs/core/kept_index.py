"""The kept index: how many live ranges hold each key, by a 64-bit hash of the key (pure; Arrow and numpy in
memory, a base file read in blocks and a delta as bytes).

An incremental run must know whether an object of a range that died is still in a range that lives. Ranges share
entries (each version of a range repeats most of the one before), so "in a dead range" says nothing; what decides
is whether any live range still holds the key. The index keeps that as a count per key: a run subtracts the
entries of the ranges that died and adds those of the ranges that appeared, reading only those, and a key whose
count drops to 0 is no longer reached by any retained commit. Sixteen bytes per distinct key, written by a full
run as the parts of a base; a daily run reads only the blocks of it that hold the keys it changes or judges (below).

Two keys with one hash count together: the only effect is a garbage key kept while its twin lives (a missed
deletion, which the next full run's rebuilt index may repair), never a deletion of a kept key.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping
from dataclasses import dataclass


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


def _columns(index):
    """The index's two columns as numpy arrays (hash sorted ascending, as build leaves it)."""
    import numpy as np  # noqa: PLC0415

    if not len(index):
        return np.zeros(0, np.uint64), np.zeros(0, np.int64)
    return (index["hash"].combine_chunks().to_numpy(zero_copy_only=False),
            index["count"].combine_chunks().to_numpy(zero_copy_only=False))


# --- the index in blocks: what an incremental run reads of it follows what it looks up ------------------------------
#
# A full run writes the index as a *base* file: a head (magic, version, keys, keys per block, blocks; then each
# block's first hash and CRC32C) and the records (hash u64, count i64, little-endian, sorted by hash), in blocks of
# BLOCK keys. An incremental run reads the head, then only the blocks holding the hashes it looks up, each checked
# against its CRC; it leaves the base as it is and writes a *delta*: the changes of count since the base (one small
# file, read whole). The next full run writes a new base. So a daily run's reads and memory follow the keys it
# judges, not the number of keys the lake holds.

BLOCK = 1024  # 16 KiB: at 10^9 keys a head of 12 MB, and 16 KiB read per key looked up
_BASE_MAGIC, _DELTA_MAGIC, _VERSION = b"LJKB", b"LJKD", 1
_HEAD = 24  # magic, version u32, keys u64, keys per block u32, blocks u32
_RECORD = 16


def _records(hashes, counts) -> bytes:
    import numpy as np  # noqa: PLC0415

    out = np.empty(len(hashes), dtype=[("hash", "<u8"), ("count", "<i8")])
    out["hash"], out["count"] = hashes, counts
    return out.tobytes()


def _from_records(raw: bytes):
    import numpy as np  # noqa: PLC0415

    if len(raw) % _RECORD:
        raise IndexError_(f"a block of {len(raw)} bytes is not whole records")
    records = np.frombuffer(raw, dtype=[("hash", "<u8"), ("count", "<i8")])
    return records["hash"], records["count"]


def encode_base(index) -> bytes:
    """The base file of an index (``build``'s table)."""
    import google_crc32c  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415

    hashes, counts = _columns(index)
    keys = len(hashes)
    blocks = -(-keys // BLOCK)
    body = _records(hashes, counts)
    step = BLOCK * _RECORD
    firsts = hashes[::BLOCK].astype("<u8")
    crcs = np.array([google_crc32c.value(body[i * step:(i + 1) * step]) for i in range(blocks)], "<u4")
    head = _BASE_MAGIC + struct.pack("<IQII", _VERSION, keys, BLOCK, blocks) + firsts.tobytes() + crcs.tobytes()
    return head + body


@dataclass(frozen=True)
class BaseHead:
    keys: int
    block: int
    firsts: object  # numpy uint64: each block's first hash
    crcs: object  # numpy uint32
    size: int  # bytes of the head

    @property
    def file_size(self) -> int:
        return self.size + self.keys * _RECORD

    def blocks_of(self, hashes) -> list[int]:
        """The blocks that can hold ``hashes`` (numpy uint64), sorted, each once."""
        import numpy as np  # noqa: PLC0415

        if not self.keys or not len(hashes):
            return []
        at = np.searchsorted(self.firsts, hashes, side="right") - 1
        return sorted({int(b) for b in at[at >= 0].tolist()})

    def span(self, first: int, last: int) -> tuple[int, int]:
        """Byte range [start, end) of blocks first..last (inclusive) in the base file."""
        return (self.size + first * self.block * _RECORD,
                self.size + min((last + 1) * self.block, self.keys) * _RECORD)

    def block_records(self, number: int, raw: bytes):
        """(hashes, counts) of one block read from the file, its CRC and order checked."""
        import google_crc32c  # noqa: PLC0415

        if google_crc32c.value(raw) != int(self.crcs[number]):
            raise IndexError_(f"block {number} of its base does not match its checksum")
        hashes, counts = _from_records(raw)
        if not len(hashes) or hashes[0] != self.firsts[number] or (hashes[1:] <= hashes[:-1]).any() \
                or (counts <= 0).any():
            raise IndexError_(f"block {number} of its base is out of order or counts a key held by no range")
        return hashes, counts


def head_size(prefix: bytes) -> int:
    """How many bytes the head takes, from its first 24."""
    if len(prefix) < _HEAD or prefix[:4] != _BASE_MAGIC:
        raise IndexError_("its base is not a kept index (wrong magic or truncated)")
    version, _, _, blocks = struct.unpack_from("<IQII", prefix, 4)
    if version != _VERSION:
        raise IndexError_(f"its base has version {version}, this version reads {_VERSION}")
    return _HEAD + blocks * 12


# --- the base in parts: no file of it grows past PART_KEYS keys on average, whatever the lake ---------------------
#
# A full run writes the base as 2**bits parts, part i holding the hashes whose top ``bits`` bits are i (each part a
# base file as above, in hash order), so that executors write it, each its own parts, and no file of it nears the
# 1 GiB every file the GC writes stays under (16 bytes a key: 8M keys a part ≈ 128 MB on average; with 64-bit hashes
# spread evenly, a part differs from the average by well under 1 %). A daily run reads the heads of the parts that
# hold the keys it looks up, then their blocks.

PART_KEYS = 8_000_000
MAX_PART_BITS = 16


def part_bits(keys: int, per_part: int | None = None) -> int:
    """How many top bits of a hash name its part, for an index of about ``keys`` keys (an upper bound will do)."""
    per_part = per_part or PART_KEYS
    bits = 0
    while (per_part << bits) < keys and bits < MAX_PART_BITS:
        bits += 1
    return bits


def part_numbers(hashes, bits: int):
    """The part of every hash (numpy uint64 -> int64)."""
    import numpy as np  # noqa: PLC0415

    hashes = np.asarray(hashes, np.uint64)
    return (hashes >> np.uint64(64 - bits)).astype(np.int64) if bits else np.zeros(len(hashes), np.int64)


def bits_of(parts: int) -> int:
    """``bits`` from the number of parts (a power of two), ``IndexError_`` for any other number."""
    if parts < 1 or parts & (parts - 1) or parts > 1 << MAX_PART_BITS:
        raise IndexError_(f"it names {parts} parts, not a power of two up to {1 << MAX_PART_BITS}")
    return parts.bit_length() - 1


def split_parts(index, bits: int) -> list:
    """``build``'s table (sorted by hash) cut into its 2**bits parts, in part order (empty parts included)."""
    import numpy as np  # noqa: PLC0415

    hashes, _ = _columns(index)
    bounds = [0, *np.searchsorted(hashes, np.array([i << (64 - bits) for i in range(1, 1 << bits)], np.uint64)),
              len(hashes)] if bits else [0, len(hashes)]
    return [index.slice(int(a), int(b) - int(a)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def check_part(head: BaseHead, part: int, bits: int) -> None:
    """A part whose hashes lie outside its share of the hash space is not that part."""
    if head.keys and (part_numbers(head.firsts, bits) != part).any():
        raise IndexError_(f"part {part} of its base holds hashes outside its share")


def decode_head(head: bytes) -> BaseHead:
    import numpy as np  # noqa: PLC0415

    size = head_size(head)
    if len(head) != size:
        raise IndexError_("its base's head is truncated")
    _, keys, block, blocks = struct.unpack_from("<IQII", head, 4)
    if block <= 0 or blocks != -(-keys // block):
        raise IndexError_("its base's head does not add up (keys, block size, blocks)")
    firsts = np.frombuffer(head, "<u8", blocks, _HEAD)
    crcs = np.frombuffer(head, "<u4", blocks, _HEAD + 8 * blocks)
    if (firsts[1:] <= firsts[:-1]).any():
        raise IndexError_("its base's blocks are out of order")
    return BaseHead(keys, block, firsts, crcs, size)


def encode_delta(changes: Mapping[int, int]) -> bytes:
    """The changes of count since the base (zeros left out), sorted by hash."""
    import numpy as np  # noqa: PLC0415

    items = sorted((h, c) for h, c in changes.items() if c)
    hashes = np.array([h for h, _ in items], np.uint64)
    counts = np.array([c for _, c in items], np.int64)
    return _DELTA_MAGIC + struct.pack("<IQ", _VERSION, len(items)) + _records(hashes, counts)


def decode_delta(data: bytes) -> dict[int, int]:
    if len(data) < 16 or data[:4] != _DELTA_MAGIC:
        raise IndexError_("its delta is not a kept index delta (wrong magic or truncated)")
    version, entries = struct.unpack_from("<IQ", data, 4)
    if version != _VERSION or len(data) != 16 + entries * _RECORD:
        raise IndexError_("its delta has another version or is truncated")
    hashes, counts = _from_records(data[16:])
    if (hashes[1:] <= hashes[:-1]).any() or (counts == 0).any():
        raise IndexError_("its delta is out of order or holds a change of 0")
    return dict(zip(hashes.tolist(), counts.tolist(), strict=True))
