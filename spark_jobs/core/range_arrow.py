"""A range file as Arrow columns: what the dataset steps of a GC run (reach, the kept index, impact views) take
from lakeFS's range SSTables without a Python object per entry (pure).

``range_batch`` is the one entry point; its schema is ``RANGE_SCHEMA``. The careful decoder of ``sstable`` stays the
reference: whatever decodes faster must give the same rows, in the same order.

How: one call into compiled code, ``lakefs_rangewalk`` (native/rangewalk.c, built by the install), per file: each
data block checked against the CRC32C its trailer stores (in hardware where the CPU has it) and Snappy-decompressed
into one buffer (``joined``), then the entries walked into the Arrow arrays' buffers (``joined_batch``), all without
the GIL, so that two threads decode two ranges at once. A Python call per block (google-crc32c, cramjam) cost more
than the walk itself (5 µs a block, 60 % of the time); those bindings stay the careful path and the tests' oracles.
The walk takes every entry the careful decoder takes; any block it is unsure of (or every block, without the
compiled module) goes through the careful decoder, and that is logged once.
"""

from __future__ import annotations

import array
import logging
from collections.abc import Container, Iterable, Iterator

import numpy as np
import pyarrow as pa

from spark_jobs.core import addresses, sstable

try:  # built by the install (setup.py); without it every range goes through the careful decoder
    import lakefs_rangewalk as _native
except ImportError:  # pragma: no cover - depends on the install
    _native = None

log = logging.getLogger(__name__)

RANGE_SCHEMA = pa.schema([
    pa.field("path", pa.binary(), nullable=False),  # the entry's path in the repository (user key)
    pa.field("address", pa.string(), nullable=False),  # its physical address, as the entry carries it
    pa.field("address_type", pa.int8(), nullable=False),  # addresses.BY_PREFIX_DEPRECATED, RELATIVE or FULL
    pa.field("size", pa.int64(), nullable=False),
])

_told: set[str] = set()  # what was logged once per process (a lake of another shape would log every range)


def _tell_once(reason: str, message: str, *args: object) -> None:
    if reason not in _told:
        _told.add(reason)
        log.warning(message, *args)


def compiled() -> bool:
    """Whether the compiled walk is there (else every range is decoded by the careful decoder)."""
    return _native is not None


def same_bytes(one: bytes, other: bytes, *, at: tuple[int, int], length: int) -> bool:
    """``one[i:i + length] == other[j:j + length]`` for ``at`` = (i, j) (bytes-like objects, mapped files too),
    compared by the compiled code without copying the slices and without the GIL when it is there."""
    i, j = at
    if _native is not None:
        return _native.same(one, i, other, j, length)
    return one[i:i + length] == other[j:j + length]


def range_batch(data: bytes) -> pa.RecordBatch:
    """Every entry of one range file, in key order, checksums verified (``sstable.SSTableError`` otherwise)."""
    table, handles, _ = block_keys(data)
    return blocks_batch(table, handles)


def range_batch_groups(data: bytes, blocks: int = 512) -> Iterator[pa.RecordBatch]:
    """``range_batch``'s rows, ``blocks`` data blocks at a time (about 2 MB decompressed at lakeFS's 4 KB blocks):
    what a caller holds at once is the file and one group's entries, not every entry of the range."""
    return (batch for _, batch in numbered_batch_groups(data, blocks))


def numbered_batch_groups(data: bytes, blocks: int, *, only: Container[int] | None = None) \
        -> Iterator[tuple[int, pa.RecordBatch]]:
    """``range_batch_groups``' groups numbered from 0; with ``only``, those groups alone: the others' blocks are
    neither checked nor decompressed (a caller that read the whole range once knows which groups it needs again)."""
    table, handles, _ = block_keys(data)
    for group, at in enumerate(range(0, len(handles), blocks)):
        if only is None or group in only:
            yield group, blocks_batch(table, handles[at:at + blocks])


def block_keys(data: bytes) -> tuple[object, list[tuple[int, int]], list[int]]:
    """``sstable.block_keys`` (the table, its data blocks' handles and keys), the index walked by the compiled
    module; an index it is unsure of goes through ``sstable.block_keys``."""
    table, handles, keys = block_key_arrays(data)
    return table, list(map(tuple, handles.tolist())), keys.tolist()


def block_key_arrays(data: bytes) -> tuple[object, np.ndarray, np.ndarray]:
    """``block_keys`` as arrays, no Python object per block: the handles one (offset, size) row per data block
    (int64), the keys uint64 (the masked CRC32C a block's trailer stores | its size << 32)."""
    if _native is None:
        return _arrays(*sstable.block_keys(data))
    table = sstable._Table(data)  # noqa: SLF001
    sstable._expect_type(table, b"ranges")  # noqa: SLF001
    index_blocks = [table.index]
    if table.two_level():
        index_blocks = sstable._index_handles(table.block(table.index, "top-level index"), "top-level index")  # noqa: SLF001
    handles: list[np.ndarray] = []
    keys: list[np.ndarray] = []
    # the index blocks checked and decompressed in one compiled call (a range at 1M objects has ≈ 25 of them)
    buf, ends = joined(table, index_blocks, "index")
    view, start = memoryview(buf), 0
    for end in ends:
        got = _native.index(table.data, view[start:end], table.footer_start)
        if got is None:
            return _arrays(*sstable.block_keys(data))
        handles.append(np.frombuffer(got[0], np.int64))
        keys.append(np.frombuffer(got[1], np.uint64))
        start = end
    return (table, np.concatenate(handles).reshape(-1, 2) if handles else np.empty((0, 2), np.int64),
            np.concatenate(keys) if keys else np.empty(0, np.uint64))


def _arrays(table, handles: list[tuple[int, int]], keys: list[int]) -> tuple[object, np.ndarray, np.ndarray]:
    return table, np.array(handles, np.int64).reshape(-1, 2), np.array(keys, np.uint64)


def range_batches(files: Iterable[bytes]) -> list[pa.RecordBatch]:
    """``range_batch`` of each file, in order."""
    return [range_batch(data) for data in files]


def blocks_batch(table, handles: list[tuple[int, int]]) -> pa.RecordBatch:
    """Every entry of the data blocks ``handles`` of one range file (``sstable.block_keys`` gives them), in order."""
    if not handles:
        return _empty()
    buf, ends = joined(table, handles)
    return joined_batch(buf, ends)


def joined_batch(buf: bytes | bytearray, ends: array.array) -> pa.RecordBatch:
    """Every entry of decompressed data blocks held end to end in ``buf`` (block i ends at ends[i])."""
    if _native is None:
        _tell_once("native", "lakefs_rangewalk is not installed: ranges are decoded by the careful decoder "
                             "(about 10x slower); reinstall (scripts/install.sh) to build it")
        return _careful(buf, ends, range(len(ends)))
    parts: list[pa.RecordBatch] = []
    first, blocks = 0, len(ends)
    while first < blocks:
        count, po, pd, ao, ad, ty, sz, _, stop = _native.walk(buf, ends, first)
        if count:
            parts.append(_columns_batch(count, po, pd, ao, ad, ty, sz))
        if stop < blocks:  # a block of another shape (or damaged): the careful decoder takes it, or names the fault
            parts.append(_careful(buf, ends, (stop,)))
            _tell_once("shape", "a range data block of a shape the compiled walk does not take (first at block "
                                "%d): such blocks are decoded by the careful decoder", stop)
        first = stop + 1
    if len(parts) == 1:
        return parts[0]
    if not parts:
        return _empty()
    return pa.concat_batches(parts)


def _columns_batch(count: int, po: bytes, pd: bytes, ao: bytes, ad: bytes, ty: bytes, sz: bytes) -> pa.RecordBatch:
    """A batch of ``RANGE_SCHEMA`` over the buffers the compiled module fills (Arrow's layout: no copy)."""
    return pa.RecordBatch.from_arrays([
        pa.Array.from_buffers(pa.binary(), count, [None, pa.py_buffer(po), pa.py_buffer(pd)]),
        pa.Array.from_buffers(pa.string(), count, [None, pa.py_buffer(ao), pa.py_buffer(ad)]),
        pa.Array.from_buffers(pa.int8(), count, [None, pa.py_buffer(ty)]),
        pa.Array.from_buffers(pa.int64(), count, [None, pa.py_buffer(sz)])], schema=RANGE_SCHEMA)


def side_by_side(sides: tuple[list[tuple[object, list[tuple[int, int]]]], list[tuple[object, list[tuple[int, int]]]]]) \
        -> tuple[pa.RecordBatch, pa.RecordBatch, int, int] | None:
    """Two sides of a change (each its ranges in path order, a range given as its table and the data blocks to
    walk), walked by the compiled module one block at a time and merged by path as lakeFS's diff merges two versions
    of a range: an entry at the same path with the same address and type on both sides cancels out unseen. The
    entries left on each side (``RANGE_SCHEMA``), how many were walked and their blocks' decompressed bytes; None without the compiled module, or where
    it is unsure (a block the careful decoder must read, a side whose paths do not rise): the caller then walks the
    blocks into columns (``blocks_batch``) and counts them there. Neither side's entries are held whole: what this
    holds is a block of each side and what did not cancel."""
    if _native is None or not hasattr(_native, "diff"):
        return None
    files: dict[int, int] = {}
    tables: list[tuple[bytes, int, bool]] = []
    triples: list[np.ndarray] = []
    for ranges in sides:
        blocks = []
        for table, handles in ranges:
            if id(table) not in files:
                if not hasattr(table, "footer_start"):  # the careful decoder's reading of an odd index
                    return None
                files[id(table)] = len(tables)
                tables.append((table.data, table.footer_start, table.verify))
            rows = np.asarray(handles, np.int64).reshape(-1, 2)  # (file, offset, size) per block: one row
            blocks.append(np.column_stack((np.full(len(rows), files[id(table)], np.int64), rows)))
        triples.append(np.concatenate(blocks).ravel() if blocks else np.empty(0, np.int64))
    got = _native.diff(tables, *triples)
    if got is None:  # several versions of a span on one side (retained commits apart) are one such case
        log.debug("a change the compiled merge does not take: counted from columns")
        return None
    dead, new, walked, _, walked_bytes = got
    return _columns_batch(*dead), _columns_batch(*new), walked, walked_bytes


def joined(table, handles: list[tuple[int, int]], what: str = "data") -> tuple[bytes | bytearray, array.array]:
    """The data blocks of ``handles`` checked and decompressed, end to end, with where each ends: by the compiled
    module in one call per file (CRC32C in hardware, Snappy), any block it does not take (a bad checksum, another
    compression, a stream it refuses) through the careful ``_Table.block``, which names the fault or reads it."""
    if _native is None:
        return sstable.joined_blocks(table, handles)
    flat = array.array("q", [x for handle in handles for x in handle])
    parts: list[bytes] = []
    ends = array.array("q")
    first, base = 0, 0
    while first < len(handles):
        buf, got, stop = _native.unpack(table.data, flat, table.footer_start, table.verify, first)
        parts.append(buf)
        if base:
            ends.extend(base + e for e in array.array("q", got))
        else:
            ends.frombytes(got)
        base += len(buf)
        if stop < len(handles):
            block = table.block(handles[stop], what)  # raises SSTableError, unless the block is fine after all
            _tell_once("unpack", "a range %s block the compiled module does not unpack (block %d): read by the "
                                 "careful decoder", what, stop)
            parts.append(block)
            base += len(block)
            ends.append(base)
        first = stop + 1
    return parts[0] if len(parts) == 1 else b"".join(parts), ends


def block_entries(table, handles: list[tuple[int, int]]) -> list[list[tuple[bytes, str, int, int]]]:
    """The (path, address, address type, size) entries of each data block of ``handles``, block by block: what the
    mark cache keeps (``sstable.range_blocks``), from the compiled walk."""
    if not handles:
        return []
    buf, ends = joined(table, handles)
    if _native is None:
        _tell_once("native", "lakefs_rangewalk is not installed: ranges are decoded by the careful decoder "
                             "(about 10x slower); reinstall (scripts/install.sh) to build it")
        return [_careful_entries(buf, ends, i) for i in range(len(ends))]
    out: list[list[tuple[bytes, str, int, int]]] = []
    first, blocks = 0, len(ends)
    while first < blocks:
        count, po, pd, ao, ad, ty, sz, counts, stop = _native.walk(buf, ends, first)
        rows: list[tuple[bytes, str, int, int]] = []
        if count:
            rows = list(zip(
                pa.Array.from_buffers(pa.binary(), count, [None, pa.py_buffer(po), pa.py_buffer(pd)]).to_pylist(),
                pa.Array.from_buffers(pa.string(), count, [None, pa.py_buffer(ao), pa.py_buffer(ad)]).to_pylist(),
                array.array("b", ty).tolist(), array.array("q", sz).tolist(), strict=True))
        at = 0
        for n in array.array("q", counts):
            out.append(rows[at:n])
            at = n
        if stop < blocks:
            out.append(_careful_entries(buf, ends, stop))
            _tell_once("shape", "a range data block of a shape the compiled walk does not take (first at block "
                                "%d): such blocks are decoded by the careful decoder", stop)
        first = stop + 1
    return out


def _careful_entries(buf: bytes | bytearray, ends: array.array, i: int) -> list[tuple[bytes, str, int, int]]:
    out: list[tuple[bytes, str, int, int]] = []
    sstable._block_entries_fast(bytes(memoryview(buf)[ends[i - 1] if i else 0:ends[i]]), out)  # noqa: SLF001
    return out


def _careful(buf: bytes | bytearray, ends: array.array, blocks: Iterable[int]) -> pa.RecordBatch:
    out: list[tuple[bytes, str, int, int]] = []
    view = memoryview(buf)
    for i in blocks:
        sstable._block_entries_fast(bytes(view[ends[i - 1] if i else 0:ends[i]]), out)  # noqa: SLF001
    return _from_entries(out)


def _from_entries(entries: list[tuple[bytes, str, int, int]]) -> pa.RecordBatch:
    if any(e[2] > 127 for e in entries):  # lakeFS's types are 0-2; the column holds what a byte holds
        kind = next(e[2] for e in entries if e[2] > 127)
        raise sstable.SSTableError(f"entry has address type {kind}, not one lakeFS writes")
    return pa.RecordBatch.from_arrays(
        [pa.array([e[0] for e in entries], pa.binary()), pa.array([e[1] for e in entries], pa.string()),
         pa.array([e[2] for e in entries], pa.int8()), pa.array([e[3] for e in entries], pa.int64())],
        schema=RANGE_SCHEMA)


def _empty() -> pa.RecordBatch:
    return _from_entries([])


def careful_batch(data: bytes) -> pa.RecordBatch:
    """``range_batch`` by the careful decoder alone: the reference the compiled walk is tested against."""
    return _from_entries(sstable.range_entries(data))


def relative_keys(batch: pa.RecordBatch, namespace_uris: Iterable[str]) -> pa.Array:
    """The namespace-relative key of each entry (``addresses.relative_key``), null for an address outside the
    namespace: the usual relative address is trimmed as one column; a full one is mapped one by one."""
    import pyarrow.compute as pc  # noqa: PLC0415 - only the readers of keys pay its import

    address, kind = batch.column(1), batch.column(2)
    full = pc.or_(pc.equal(kind, addresses.FULL), pc.match_substring(address, "://"))
    keys = pc.utf8_ltrim(address, characters="/")
    if not pc.any(full).as_py():
        return keys
    mapper = addresses.key_mapper(namespace_uris)
    mapped = [mapper(a, k) for a, k in zip(pc.filter(address, full).to_pylist(), pc.filter(kind, full).to_pylist(),
                                           strict=True)]
    return pc.replace_with_mask(keys, full, pa.array(mapped, pa.string()))
