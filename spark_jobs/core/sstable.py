"""Reader for lakeFS's committed metadata: range and metarange files (SSTables as pebble writes them).

Byte format (lakefs-facts.md §3): RocksDB block-based table, footer magic 0x88e241b785f4cff7 (format version 2,
CRC32C block checksums); a metaindex block pointing at the properties block; a one- or two-level index
(property ``rocksdb.block.based.table.index.type`` 0 or 2) over Snappy-compressed or raw data blocks, each
followed by a 5-byte trailer (compression type + masked CRC32C). Blocks hold prefix-compressed entries with
restart points; data-block keys are internal keys (user key + 8-byte trailer, kind SET). A value is
``zigzag-varint len, identity, zigzag-varint len, data``; the data is a protobuf ``RangeData`` (metarange) or
``catalog.Entry`` (range), decoded here by hand for the few fields GC needs.

Everything malformed raises SSTableError naming what is wrong and where: a wrong address read from a corrupt
range would make GC delete a live object, so block checksums are verified by default (google-crc32c, hardware
CRC: a few % of the read time) and every length is bounds-checked.

``range_entries`` and ``range_addresses`` walk each decompressed block in one tight loop (``_walk_block``) that
builds no identities or entry objects (``range_addresses`` not even keys); see bench/gc/sstable_bench.py for the
numbers. GC's mark reads most ranges through the compiled walk (``range_arrow``), which falls back to this loop.
"""

from __future__ import annotations

import array
import hashlib
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

import cramjam
import google_crc32c  # hardware CRC32C; a hard dependency: GC must not read unverified blocks by accident

_snappy_decompress = cramjam.snappy.decompress_raw
_snappy_decompress_into = cramjam.snappy.decompress_raw_into
_crc32c_value = google_crc32c.value
_unpack_u32 = struct.Struct("<I").unpack_from
_blake2b = hashlib.blake2b

__all__ = [
    "Entry",
    "content_id",
    "iter_entries",
    "RangeData",
    "SSTableError",
    "decode_entry",
    "decode_range_data",
    "iter_records",
    "metarange_ranges",
    "metarange_range_ids",
    "block_addresses",
    "range_addresses",
    "range_wanted_blocks",
    "range_entries",
    "read_properties",
    "table_info",
]

ROCKSDB_MAGIC = 0x88E241B785F4CFF7
LEVELDB_MAGIC = 0xDB4775248B80FB57  # legacy footer (no checksum type, no format version)
_ROCKSDB_FOOTER_LEN = 53  # checksum type (1) + 2 block handles padded to 40 + format version (4) + magic (8)
_LEVELDB_FOOTER_LEN = 48  # 2 block handles padded to 40 + magic (8)
_TRAILER_LEN = 5  # compression type (1) + masked CRC32C (4)
_NO_COMPRESSION, _SNAPPY = 0, 1
_CHECKSUM_NONE, _CHECKSUM_CRC32C = 0, 1
_KIND_SET = 1
_INDEX_TYPE_TWO_LEVEL = 2
_PROPERTIES_BLOCK = b"rocksdb.properties"
_INDEX_TYPE_PROPERTY = "rocksdb.block.based.table.index.type"
_CRC_MASK_DELTA = 0xA282EAD8
_PROPERTIES_SET_AT_CLOSE = frozenset({"min_key", "max_key", "count", "estimated_size_bytes"})

# catalog.Entry.address_type
ADDRESS_TYPE_BY_PREFIX_DEPRECATED = 0
ADDRESS_TYPE_RELATIVE = 1
ADDRESS_TYPE_FULL = 2


class SSTableError(ValueError):
    """The bytes are not a readable lakeFS SSTable (corrupt, truncated, or another format)."""


@dataclass(frozen=True)
class RangeData:
    """One metarange record: a range file and the keys it covers (committed.RangeData)."""

    range_id: str
    min_key: bytes
    max_key: bytes
    estimated_size: int
    count: int


@dataclass(frozen=True)
class Entry:
    """One range record: an object path and its catalog.Entry."""

    path: bytes
    address: str
    address_type: int
    size: int
    last_modified: int = 0  # unix seconds
    e_tag: str = ""
    content_type: str = ""
    metadata: dict[str, str] = field(default_factory=dict)


# --- varints ------------------------------------------------------------------------------------------------


def _uvarint(buf: bytes, pos: int, end: int, what: str) -> tuple[int, int]:
    """Unsigned LEB128 varint at buf[pos:end] -> (value, next position)."""
    result = shift = 0
    while True:
        if pos >= end:
            raise SSTableError(f"truncated varint in {what}")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise SSTableError(f"varint too long in {what}")


def _zigzag_len(buf: bytes, pos: int, end: int, what: str) -> tuple[int, int]:
    """A length written with Go's binary.PutVarint (signed zigzag); must be >= 0 and fit before end."""
    ux, pos = _uvarint(buf, pos, end, what)
    if ux & 1:
        raise SSTableError(f"negative length in {what}")
    n = ux >> 1
    if pos + n > end:
        raise SSTableError(f"length {n} in {what} runs past its end")
    return n, pos


# --- table structure ----------------------------------------------------------------------------------------


def _block_handle(buf: bytes, pos: int, end: int, what: str) -> tuple[int, int, int]:
    offset, pos = _uvarint(buf, pos, end, what)
    size, pos = _uvarint(buf, pos, end, what)
    return offset, size, pos


class _Table:
    """Footer, block access and index walking for one SSTable held in memory."""

    def __init__(self, data: bytes, *, verify_checksums: bool = True) -> None:
        # a buffer that can change under the reader (or slices into views) is copied; bytes, and a file mapped
        # read-only (Namespace.read_mapped: it slices into bytes), are read in place
        if isinstance(data, (bytearray, memoryview)):
            data = bytes(data)
        self.data = data
        n = len(data)
        if n < _LEVELDB_FOOTER_LEN:
            raise SSTableError(f"not an SSTable: {n} bytes is shorter than any footer")
        (magic,) = struct.unpack_from("<Q", data, n - 8)
        if magic == ROCKSDB_MAGIC:
            if n < _ROCKSDB_FOOTER_LEN:
                raise SSTableError(f"truncated SSTable: {n} bytes is shorter than a RocksDB footer")
            start = n - _ROCKSDB_FOOTER_LEN
            self.checksum_type = data[start]
            (self.format_version,) = struct.unpack_from("<I", data, n - 12)
            handles = start + 1
            if self.checksum_type not in (_CHECKSUM_NONE, _CHECKSUM_CRC32C):
                raise SSTableError(f"unsupported block checksum type {self.checksum_type} (only CRC32C)")
            if self.format_version > 5:
                raise SSTableError(f"unsupported table format version {self.format_version}")
        elif magic == LEVELDB_MAGIC:
            start = handles = n - _LEVELDB_FOOTER_LEN
            self.checksum_type = _CHECKSUM_CRC32C
            self.format_version = 0
        else:
            raise SSTableError(f"not an SSTable: footer magic {magic:#018x} is neither RocksDB's nor LevelDB's")
        self.footer_start = start
        offset, size, pos = _block_handle(data, handles, handles + 40, "footer")
        self.metaindex = (offset, size)
        offset, size, _ = _block_handle(data, pos, handles + 40, "footer")
        self.index = (offset, size)
        self.verify = verify_checksums and self.checksum_type == _CHECKSUM_CRC32C
        self._properties: dict[str, bytes] | None = None

    def block(self, handle: tuple[int, int], what: str = "data") -> bytes:
        """The contents of one block (decompressed, checksum verified). Called once per 4 KiB block: the happy
        path formats no strings and calls nothing it need not."""
        offset, size = handle
        data = self.data
        end = offset + size
        if end + _TRAILER_LEN > self.footer_start:
            raise SSTableError(f"{what} block [{offset}, +{size}) runs past the end of the file (truncated?)")
        if self.verify:
            crc = _crc32c_value(data[offset:end + 1])
            if (((crc >> 15) | (crc << 17)) + _CRC_MASK_DELTA) & 0xFFFFFFFF != _unpack_u32(data, end + 1)[0]:
                raise SSTableError(f"checksum mismatch in {what} block at offset {offset} (corrupt file)")
        ctype = data[end]
        if ctype == _SNAPPY:
            # Snappy expands at most ~21x (a 3-byte copy makes 64 bytes): a larger claimed length is corruption,
            # refused before cramjam allocates it
            claimed = data[offset]
            if claimed >= 0x80:
                claimed, _ = _uvarint(data, offset, end, f"{what} block Snappy header")
            if claimed > 24 * size + 64:
                raise SSTableError(f"corrupt Snappy header in {what} block at offset {offset}: "
                                   f"claims {claimed} bytes from {size}")
            try:
                return bytes(_snappy_decompress(data[offset:end]))
            except Exception as exc:  # cramjam raises its own DecompressionError
                raise SSTableError(f"corrupt Snappy data in {what} block at offset {offset}: {exc}") from None
        if ctype == _NO_COMPRESSION:
            return data[offset:end]
        raise SSTableError(f"unsupported compression type {ctype} in {what} block at offset {offset}")

    def properties(self) -> dict[str, bytes]:
        if self._properties is None:
            props: dict[str, bytes] = {}
            for name, value in _block_entries(self.block(self.metaindex, "metaindex"), "metaindex"):
                if name == _PROPERTIES_BLOCK:
                    offset, size, _ = _block_handle(value, 0, len(value), "metaindex entry")
                    for key, val in _block_entries(self.block((offset, size), "properties"), "properties"):
                        try:
                            props[key.decode()] = val
                        except UnicodeDecodeError:
                            raise SSTableError("property name is not UTF-8 (corrupt properties block)") from None
            self._properties = props
        return self._properties

    def two_level(self) -> bool:
        raw = self.properties().get(_INDEX_TYPE_PROPERTY)
        if raw is None:
            return False
        if len(raw) != 4:
            raise SSTableError(f"property {_INDEX_TYPE_PROPERTY} has {len(raw)} bytes, expected 4")
        (index_type,) = struct.unpack("<I", raw)
        if index_type not in (0, _INDEX_TYPE_TWO_LEVEL):
            raise SSTableError(f"unsupported index type {index_type} (only binary search and two-level)")
        return index_type == _INDEX_TYPE_TWO_LEVEL

    def data_handles(self) -> list[tuple[int, int]]:
        """Handles of every data block, in key order (walking a two-level index through its partitions)."""
        index_blocks = [self.index]
        if self.two_level():
            index_blocks = _index_handles(self.block(self.index, "top-level index"), "top-level index")
        handles: list[tuple[int, int]] = []
        for ih in index_blocks:
            handles.extend(_index_handles(self.block(ih, "index"), "index"))
        return handles

    def data_blocks(self) -> Iterator[bytes]:
        block = self.block
        for handle in self.data_handles():
            yield block(handle)


def _index_handles(block: bytes, what: str) -> list[tuple[int, int]]:
    """The block handles an index block holds, in order; keys (separators) are skipped, not rebuilt.
    pebble may append encoded block properties after a handle; lakeFS configures none, and they are ignored."""
    end = _restarts_end(block, what)
    out = []
    append = out.append
    pos = 0
    while pos < end:
        if end - pos >= 3 and block[pos] < 0x80 and block[pos + 1] < 0x80 and block[pos + 2] < 0x80:
            vstart = pos + 3 + block[pos + 1]  # the usual short key and value: no calls
            vend = vstart + block[pos + 2]
        else:
            _, pos = _uvarint(block, pos, end, what)
            unshared, pos = _uvarint(block, pos, end, what)
            vlen, pos = _uvarint(block, pos, end, what)
            vstart = pos + unshared
            vend = vstart + vlen
        if vend > end:
            raise SSTableError(f"{what} block: entry at {pos} runs past the block's entries")
        offset, pos = _uvarint(block, vstart, vend, what)
        size, _ = _uvarint(block, pos, vend, what)
        append((offset, size))
        pos = vend
    return out


def _restarts_end(block: bytes, what: str) -> int:
    """Offset where the entries of a block end (the restart array follows them)."""
    n = len(block)
    if n < 4:
        raise SSTableError(f"{what} block of {n} bytes has no restart count")
    (num_restarts,) = struct.unpack_from("<I", block, n - 4)
    end = n - 4 - 4 * num_restarts
    if end < 0 or (num_restarts == 0 and n > 4):
        raise SSTableError(f"{what} block: restart count {num_restarts} does not fit its {n} bytes")
    return end


def _block_entries(block: bytes, what: str) -> Iterator[tuple[bytes, bytes]]:
    """(key, value) of every entry in a block, undoing the prefix compression of keys."""
    end = _restarts_end(block, what)
    pos = 0
    key = b""
    while pos < end:
        shared, pos = _uvarint(block, pos, end, what)
        unshared, pos = _uvarint(block, pos, end, what)
        vlen, pos = _uvarint(block, pos, end, what)
        if shared > len(key):
            raise SSTableError(f"{what} block: entry shares {shared} bytes of a {len(key)}-byte previous key")
        vstart = pos + unshared
        vend = vstart + vlen
        if vend > end:
            raise SSTableError(f"{what} block: entry at {pos} runs past the block's entries")
        key = key[:shared] + block[pos:vstart]
        yield key, block[vstart:vend]
        pos = vend


def _user_key(internal_key: bytes) -> bytes:
    if len(internal_key) < 8:
        raise SSTableError(f"data key of {len(internal_key)} bytes has no 8-byte internal-key trailer")
    if internal_key[-8] != _KIND_SET:
        raise SSTableError(f"data key has kind {internal_key[-8]}, lakeFS writes only SET (1)")
    return internal_key[:-8]


def _split_value(value: bytes) -> tuple[bytes, bytes]:
    """A graveler value -> (identity, data)."""
    end = len(value)
    n, pos = _zigzag_len(value, 0, end, "value identity")
    identity = value[pos:pos + n]
    pos += n
    n, pos = _zigzag_len(value, pos, end, "value data")
    if pos + n != end:
        raise SSTableError(f"value has {end - pos - n} bytes after its data")
    return identity, value[pos:end]


# --- protobuf (only the wire format GC needs) ---------------------------------------------------------------


def _pb_fields(buf: bytes, what: str) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) for a protobuf message: varints as int, length-delimited as bytes."""
    pos, end = 0, len(buf)
    while pos < end:
        tag, pos = _uvarint(buf, pos, end, what)
        num, wire = tag >> 3, tag & 7
        if wire == 0:
            val, pos = _uvarint(buf, pos, end, what)
            yield num, wire, val
        elif wire == 2:
            n, pos = _uvarint(buf, pos, end, what)
            if pos + n > end:
                raise SSTableError(f"field {num} of {what} runs past the message")
            yield num, wire, buf[pos:pos + n]
            pos += n
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            if pos + width > end:
                raise SSTableError(f"field {num} of {what} runs past the message")
            yield num, wire, int.from_bytes(buf[pos:pos + width], "little")
            pos += width
        else:
            raise SSTableError(f"unsupported protobuf wire type {wire} in {what}")


def _text(raw: int | bytes, what: str) -> str:
    if not isinstance(raw, bytes):
        raise SSTableError(f"{what} is not length-delimited")
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise SSTableError(f"{what} is not UTF-8") from None


def _number(raw: int | bytes, what: str) -> int:
    if isinstance(raw, bytes):
        raise SSTableError(f"{what} is not a varint")
    return raw


def _signed64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def decode_range_data(range_id: str, data: bytes) -> RangeData:
    """committed.RangeData{min_key=1, max_key=2, estimated_size=3, count=4}."""
    min_key = max_key = b""
    size = count = 0
    for num, _, val in _pb_fields(data, "RangeData"):
        if num == 1:
            min_key = val if isinstance(val, bytes) else _text(val, "RangeData.min_key").encode()
        elif num == 2:
            max_key = val if isinstance(val, bytes) else _text(val, "RangeData.max_key").encode()
        elif num == 3:
            size = _number(val, "RangeData.estimated_size")
        elif num == 4:
            count = _signed64(_number(val, "RangeData.count"))
    return RangeData(range_id, min_key, max_key, size, count)


def decode_entry(path: bytes, data: bytes) -> Entry:
    """catalog.Entry{address=1, last_modified=2 Timestamp, size=3, e_tag=4, metadata=5, address_type=6,
    content_type=7}."""
    address = e_tag = content_type = ""
    size = address_type = last_modified = 0
    metadata: dict[str, str] = {}
    for num, _, val in _pb_fields(data, "Entry"):
        if num == 1:
            address = _text(val, "Entry.address")
        elif num == 2:
            if not isinstance(val, bytes):
                raise SSTableError("Entry.last_modified is not a message")
            for n2, _, v2 in _pb_fields(val, "Timestamp"):
                if n2 == 1:
                    last_modified = _signed64(_number(v2, "Timestamp.seconds"))
        elif num == 3:
            size = _signed64(_number(val, "Entry.size"))
        elif num == 4:
            e_tag = _text(val, "Entry.e_tag")
        elif num == 5:
            if not isinstance(val, bytes):
                raise SSTableError("Entry.metadata is not a message")
            k = v = ""
            for n2, _, v2 in _pb_fields(val, "Entry.metadata"):
                if n2 == 1:
                    k = _text(v2, "Entry.metadata key")
                elif n2 == 2:
                    v = _text(v2, "Entry.metadata value")
            metadata[k] = v
        elif num == 6:
            address_type = _number(val, "Entry.address_type")
        elif num == 7:
            content_type = _text(val, "Entry.content_type")
    if not address:
        raise SSTableError(f"entry {path!r} has no address")
    return Entry(path, address, address_type, size, last_modified, e_tag, content_type, metadata)


# --- public API ---------------------------------------------------------------------------------------------


def read_properties(data: bytes) -> dict[str, bytes]:
    """All table properties: lakeFS's own (type, min_key, max_key, count, estimated_size_bytes…) and rocksdb.*
    (raw bytes; rocksdb numbers are varints or fixed little-endian as pebble writes them)."""
    return dict(_Table(data).properties())


def table_info(data: bytes) -> dict[str, int | bool]:
    """Structural facts, for tests and diagnostics: format version, checksum type, two-level index, block count."""
    table = _Table(data)
    return {"format_version": table.format_version, "checksum_type": table.checksum_type,
            "two_level_index": table.two_level(), "data_blocks": len(table.data_handles())}


def iter_records(data: bytes, *, verify_checksums: bool = True) -> Iterator[tuple[bytes, bytes]]:
    """(user key, value) of every record in key order; the internal-key trailer is stripped."""
    table = _Table(data, verify_checksums=verify_checksums)
    for block in table.data_blocks():
        for key, value in _block_entries(block, "data"):
            yield _user_key(key), value


def content_id(data: bytes) -> str:
    """The id lakeFS gave this file: hex SHA-256 over every record (length as decimal, bytes, "|", for key and
    value) and then the user properties set before the table was closed (all but min_key, max_key, count and
    estimated_size_bytes), as pkg/graveler/sstable/writer.go and pkg/ident write them. Equal to the file's name
    for an intact range or metarange."""
    h = hashlib.sha256()
    for key, value in iter_records(data):
        for part in (key, value):
            h.update(b"%d" % len(part))
            h.update(part)
            h.update(b"|")
    props = {k: v for k, v in read_properties(data).items()
             if not k.startswith("rocksdb.") and k not in _PROPERTIES_SET_AT_CLOSE}

    def int64(v: int) -> bytes:  # ident.MarshalInt64: type 2, width 8, big-endian
        return b"\x02\x08" + v.to_bytes(8, "big")

    h.update(b"\x04" + int64(len(props)))  # ident.MarshalStringMap: type 4, count, sorted (key, value) strings
    for k in sorted(props):
        for part in (k.encode(), props[k]):
            h.update(b"\x01" + int64(len(part)) + part)
    return h.hexdigest()


def _expect_type(table: _Table, expected: bytes) -> None:
    kind = table.properties().get("type")
    if kind is not None and kind != expected:
        raise SSTableError(f"expected a lakeFS {expected.decode()} file, this one has type {kind!r}")


def _metarange_records(data: bytes) -> Iterator[tuple[str, bytes]]:
    """(range id, RangeData payload) of every record of a metarange file, in key order."""
    table = _Table(data)
    _expect_type(table, b"metaranges")
    for block in table.data_blocks():
        yield from _metarange_block_records(block)


def _metarange_block_records(block: bytes) -> Iterator[tuple[str, bytes]]:
    for key, value in _block_entries(block, "data"):
        _user_key(key)
        identity, payload = _split_value(value)
        try:
            range_id = identity.decode("ascii")
        except UnicodeDecodeError:
            raise SSTableError("metarange record's range id is not ASCII hex") from None
        yield range_id, payload


def metarange_ranges(data: bytes) -> list[RangeData]:
    """The ranges a metarange file lists, in key order."""
    return [decode_range_data(range_id, payload) for range_id, payload in _metarange_records(data)]


def metarange_spans(data: bytes, *, seen_blocks: dict[bytes, list[tuple[bytes, str]]] | None = None) \
        -> list[tuple[bytes, str]]:
    """(first key, range id) of every range a metarange file lists, in key order: metarange_ranges without the
    RangeData objects. The usual record (one-byte tags and lengths, fields 1-4 of their wire types) is read here;
    any other goes through decode_range_data, so the result and the errors are metarange_ranges's.

    ``seen_blocks`` (digest of a data block -> its spans) is filled and used across calls: a history's metaranges
    share nearly all their blocks (a commit that adds ranges at the end changes the last one or two of ≈ 40), so
    each distinct block is decoded once, as range_blocks does for the ranges' blocks. A block is named by the
    digest of its bytes: one whose digest is known is the same bytes, already checked and decoded."""
    table = _Table(data)
    _expect_type(table, b"metaranges")
    out: list[tuple[bytes, str]] = []
    for offset, size in table.data_handles():
        digest = None
        if seen_blocks is not None:
            digest = _blake2b(table.data[offset:offset + size + 1], digest_size=16).digest()
            known = seen_blocks.get(digest)
            if known is not None:
                out += known
                continue
        spans = []
        for range_id, payload in _metarange_block_records(table.block((offset, size))):
            min_key = _range_min_key(payload)
            spans.append((decode_range_data(range_id, payload).min_key if min_key is None else min_key, range_id))
        if digest is not None:
            seen_blocks[digest] = spans
        out += spans
    return out


def _range_min_key(buf: bytes) -> bytes | None:
    """RangeData.min_key when the record has the usual shape (else None: decode it in full)."""
    min_key = b""
    pos, end = 0, len(buf)
    while pos < end:
        tag = buf[pos]
        if tag in (0x0A, 0x12):  # fields 1 and 2, length-delimited
            if pos + 1 >= end or buf[pos + 1] >= 0x80:
                return None
            start = pos + 2
            pos = start + buf[pos + 1]
            if pos > end:
                return None
            if tag == 0x0A:
                min_key = buf[start:pos]
        elif tag in (0x18, 0x20):  # fields 3 and 4, varints
            start = pos + 1
            pos = start
            while pos < end and buf[pos] >= 0x80:
                pos += 1
            if pos >= end or pos - start > 8:  # truncated, or long enough for _uvarint's own checks
                return None
            pos += 1
        else:
            return None
    return min_key


def metarange_bounds(data: bytes) -> list[tuple[str, bytes, bytes]]:
    """(range id, first key, last key) of every range a metarange file lists, in key order: the span a range
    covers without reading the range (lakeFS writes the same keys as the range's min_key and max_key)."""
    return [(r.range_id, r.min_key, r.max_key) for r in metarange_ranges(data)]


def metarange_range_ids(data: bytes) -> list[str]:
    """Range ids (hex) listed by a metarange file."""
    return [r for _, r in metarange_spans(data)]


def iter_entries(data: bytes) -> Iterator[Entry]:
    """Every object entry of a range file, fully decoded."""
    table = _Table(data)
    _expect_type(table, b"ranges")
    for block in table.data_blocks():
        for key, value in _block_entries(block, "data"):
            yield decode_entry(_user_key(key), _split_value(value)[1])


def range_entries(data: bytes, *, verify_checksums: bool = True,
                  seen_blocks: set[bytes] | None = None) -> list[tuple[bytes, str, int, int]]:
    """(path, address, address_type, size) of every entry of a range file; with ``seen_blocks``, of the data
    blocks not decoded before only (as in range_addresses)."""
    out: list[tuple[bytes, str, int, int]] = []
    for block in _range_blocks(data, verify_checksums, seen_blocks):
        _block_entries_fast(block, out)
    return out


def _range_blocks(data: bytes, verify_checksums: bool, seen_blocks: set[bytes] | None) -> Iterator[bytes]:
    """The decompressed data blocks of a range file; with ``seen_blocks``, only those whose stored bytes (keyed by
    a 128-bit BLAKE2b digest, with the compression type byte) are not in it, each added once it was yielded."""
    table = _Table(data, verify_checksums=verify_checksums)
    _expect_type(table, b"ranges")
    if seen_blocks is None:
        yield from table.data_blocks()
        return
    raw = table.data
    for offset, size in table.data_handles():
        digest = _blake2b(raw[offset:offset + size + 1], digest_size=16).digest()
        if digest not in seen_blocks:
            yield table.block((offset, size))
            seen_blocks.add(digest)  # only once decoded and walked: a corrupt block is never taken as seen


def block_keys(data: bytes) -> tuple[_Table, list[tuple[int, int]], list[int]]:
    """A range file's data blocks, none read: the table, each block's handle (offset, size), and its key, the
    masked CRC32C its trailer stores with its size (``crc | size << 32``). Two blocks with one key are probably the
    same bytes; whoever takes them as the same must compare the bytes (and compression type) first."""
    table = _Table(data)
    _expect_type(table, b"ranges")
    handles = table.data_handles()
    raw, limit = table.data, table.footer_start - _TRAILER_LEN
    keys = []
    for offset, size in handles:
        if offset + size > limit:
            table.block((offset, size))  # raises: the block runs past the file
        keys.append(_unpack_u32(raw, offset + size + 1)[0] | size << 32)
    return table, handles, keys


def joined_blocks(table: _Table, handles: list[tuple[int, int]]) -> tuple[bytearray, array.array]:
    """The data blocks of ``handles``, each checked against the CRC32C it carries and decompressed, end to end in one
    buffer, with the offset where each ends (``array('q')``). A block the quick path does not take (bad checksum,
    another compression, a Snappy stream cramjam refuses) goes through ``_Table.block``, which names the fault."""
    raw = table.data
    view = memoryview(raw)
    limit = table.footer_start - _TRAILER_LEN
    verify = table.verify
    lengths = []
    for offset, size in handles:
        end = offset + size
        ok = end <= limit and size > 0
        if ok and verify:
            crc = _crc32c_value(raw[offset:end + 1])
            ok = (((crc >> 15) | (crc << 17)) + _CRC_MASK_DELTA) & 0xFFFFFFFF == _unpack_u32(raw, end + 1)[0]
        if ok and raw[end] == _SNAPPY:
            claimed = raw[offset]
            if claimed >= 0x80:
                try:
                    claimed, _ = _uvarint(raw, offset, end, "data block Snappy header")
                except SSTableError:
                    claimed = -1
            ok = 0 <= claimed <= 24 * size + 64
        elif ok:
            ok = raw[end] == _NO_COMPRESSION
            claimed = size
        lengths.append(claimed if ok else -1)
    out = bytearray(sum(n for n in lengths if n > 0))
    target = memoryview(out)
    ends = array.array("q", bytes(8 * len(handles)))
    pos = 0
    for i, ((offset, size), n) in enumerate(zip(handles, lengths, strict=True)):
        if n >= 0 and raw[offset + size] == _SNAPPY:
            try:
                done = _snappy_decompress_into(view[offset:offset + size], target[pos:pos + n])
            except Exception:  # noqa: BLE001 - cramjam's own error: the careful path below names it
                done = -1
            if done == n:
                pos += n
                ends[i] = pos
                continue
        elif n >= 0:
            target[pos:pos + n] = view[offset:offset + n]
            pos += n
            ends[i] = pos
            continue
        block = table.block((offset, size))  # raises SSTableError, unless the block is fine after all
        target.release()
        out[pos:pos + max(n, 0)] = block  # in place of the room it was given
        target = memoryview(out)
        pos += len(block)
        ends[i] = pos
    target.release()
    del out[pos:]
    return out, ends


def unseen_blocks(data: bytes, seen_blocks: set[bytes]) -> tuple[_Table, dict[bytes, tuple[int, int]]]:
    """A range file's data blocks whose digest (BLAKE2b, as ``range_blocks`` names them) is not in ``seen_blocks``,
    each once, in order: the table and digest -> handle. The caller adds the digests once it has decoded them."""
    table = _Table(data)
    _expect_type(table, b"ranges")
    wanted: dict[bytes, tuple[int, int]] = {}
    for offset, size in table.data_handles():
        digest = _blake2b(table.data[offset:offset + size + 1], digest_size=16).digest()
        if digest not in seen_blocks and digest not in wanted:
            wanted[digest] = (offset, size)
    return table, wanted


def range_blocks(data: bytes, *, seen_blocks: set[bytes], verify_checksums: bool = True) \
        -> tuple[list[bytes], list[tuple[bytes, list[tuple[bytes, str, int, int]]]]]:
    """A range file as its data blocks (what the mark cache keeps): the digest of every block, in order (the key of
    range_addresses's ``seen_blocks``), and the entries of each block not in ``seen_blocks``, added to it. The
    blocks are walked by the compiled walk (``range_arrow.block_entries``), which gives this decoder's entries."""
    from spark_jobs.core import range_arrow  # noqa: PLC0415 - range_arrow builds on this module

    table = _Table(data, verify_checksums=verify_checksums)
    _expect_type(table, b"ranges")
    digests: list[bytes] = []
    wanted: dict[bytes, tuple[int, int]] = {}
    for offset, size in table.data_handles():
        digest = _blake2b(table.data[offset:offset + size + 1], digest_size=16).digest()
        digests.append(digest)
        if digest not in seen_blocks and digest not in wanted:
            wanted[digest] = (offset, size)
    new = list(zip(wanted, range_arrow.block_entries(table, list(wanted.values())), strict=True))
    seen_blocks.update(wanted)  # only once decoded and walked: a corrupt block is never taken as seen
    return digests, new


def range_block_digests(data: bytes, *, verify_checksums: bool = True) -> list[bytes]:
    """The digest of every data block of a range file, in order (``range_blocks``'s), none of them decoded."""
    table = _Table(data, verify_checksums=verify_checksums)
    _expect_type(table, b"ranges")
    return [_blake2b(table.data[offset:offset + size + 1], digest_size=16).digest()
            for offset, size in table.data_handles()]


def range_wanted_blocks(data: bytes, wanted: set[bytes], *,
                        verify_checksums: bool = True) -> list[tuple[bytes, bytes]]:
    """(digest, decompressed bytes) of the data blocks of a range file whose digest is in ``wanted``, in order."""
    table = _Table(data, verify_checksums=verify_checksums)
    _expect_type(table, b"ranges")
    out: list[tuple[bytes, bytes]] = []
    for offset, size in table.data_handles():
        digest = _blake2b(table.data[offset:offset + size + 1], digest_size=16).digest()
        if digest in wanted:
            out.append((digest, table.block((offset, size))))
    return out


def block_addresses(block: bytes) -> list[tuple[str, int]]:
    """(address, address_type) of every entry of one decompressed data block, in order."""
    out: list[tuple[str, int]] = []
    _block_addresses(block, out)
    return out


def _block_entries_fast(b: bytes, out: list[tuple[bytes, str, int, int]]) -> None:
    """range_entries for one block: _block_addresses's walk plus the key (prefix-decompressed, trailer stripped)
    and the size; an entry of another shape goes through _entry_full, the careful decoder of one entry."""
    _walk_block(b, out, True)


def _entry_full(b: bytes, p: int, end: int, key: bytes, append) -> tuple[int, bytes]:
    """The careful path of _block_entries_fast for the entry at p (``key``: the previous entry's): append its
    (path, address, address_type, size), return where the next entry starts and its key."""
    shared, p = _uvarint(b, p, end, "data block")
    unshared, p = _uvarint(b, p, end, "data block")
    vlen, p = _uvarint(b, p, end, "data block")
    if shared > len(key) or p + unshared + vlen > end:
        raise SSTableError("data block entry does not fit the block or its previous key")
    key = key[:shared] + b[p:p + unshared]
    p += unshared
    e = decode_entry(_user_key(key), _split_value(b[p:p + vlen])[1])
    append((e.path, e.address, e.address_type, e.size))
    return p + vlen, key


def range_addresses(data: bytes, *, verify_checksums: bool = True,
                    seen_blocks: set[bytes] | None = None) -> list[tuple[str, int]]:
    """(address, address_type) of every entry of a range file.

    With ``seen_blocks``, data blocks whose stored bytes were decoded before (from any range file) are skipped,
    and the ones decoded here are added. A commit that changes a few objects makes a new version of each range
    it touches, but pebble cuts blocks at the same entries, so all the version's blocks but the changed ones are
    byte for byte those of the version before: identical bytes hold identical entries, so the caller that wants
    only the set of addresses decodes each distinct block once. The key is a 128-bit BLAKE2b digest of the
    block as stored (compressed bytes and compression type)."""
    out: list[tuple[str, int]] = []
    for block in _range_blocks(data, verify_checksums, seen_blocks):
        _block_addresses(block, out)
    return out


def _block_addresses(b: bytes, out: list[tuple[str, int]]) -> None:
    """Append (address, address_type) for every entry of one decompressed data block (keys are skipped, not
    rebuilt: the address does not depend on them); an entry of another shape goes through _entry_address."""
    _walk_block(b, out, False)


def _walk_block(b: bytes, out: list, entries: bool) -> None:
    """The walk of _block_addresses (``entries`` False: append (address, address_type)) and _block_entries_fast
    (True: append (path, address, address_type, size)) over one decompressed data block.

    The inner loop handles the shape lakeFS always writes, inline: one-byte key lengths, a one- or two-byte
    value length, a 32-byte identity, and Entry fields in Go's marshalling order (1 address, 2 last_modified,
    3 size, 4 e_tag, 5 metadata*, 6 address_type, 7 content_type) with one-byte lengths. Keys are rebuilt only for
    ``entries``. An entry is accepted only if that walk ends exactly where the value ends; any other entry (long
    metadata, unknown fields, other order) leaves the inner loop at its first byte and goes through the careful
    decoder of one entry (_entry_address, _entry_full), which accepts any valid encoding and raises a precise
    SSTableError otherwise; then the fast loop resumes. One function for both, with the mode tested inline: a call
    per entry would cost more than the walk's own steps.
    """
    end = _restarts_end(b, "data")
    append = out.append
    key = k = b""
    p = 0
    try:
        while p < end:
            while p < end:
                # header: shared key bytes, unshared key bytes, value length
                shared = b[p]
                u = b[p + 1]
                x = b[p + 2]
                if (shared | u) >= 0x80 or (shared > len(key) if entries else u < 8):
                    break
                if x < 0x80:
                    q = p + 3 + u
                    nxt = q + x
                else:
                    y = b[p + 3]
                    if y >= 0x80:
                        break
                    q = p + 4 + u
                    nxt = q + ((x & 0x7F) | (y << 7))
                # value: zigzag 32 + identity (skipped), zigzag data length (1-2 bytes), data = Entry
                if b[q] != 0x40:
                    break
                if entries:
                    k = key[:shared] + b[q - u:q]
                    if len(k) < 8 or k[-8] != _KIND_SET:
                        break
                x = b[q + 33]
                if x < 0x80:
                    q += 34
                else:
                    y = b[q + 34]
                    if y >= 0x80:
                        break
                    x = (x & 0x7F) | (y << 7)
                    q += 35
                if q + (x >> 1) != nxt or x & 1 or b[q] != 0x0A:
                    break
                n = b[q + 1]  # 1: address
                if not 0 < n < 0x80:
                    break
                a = q + 2
                q = ae = a + n
                # a field of another shape (a longer length, say) is left where it is: the walk then does not end
                # where the value ends, and the careful decoder takes the entry
                if q < nxt and b[q] == 0x12 and (n := b[q + 1]) < 0x80:  # 2: last_modified (Timestamp message)
                    q += 2 + n
                size = 0
                if q < nxt and b[q] == 0x18:  # 3: size (varint; read only for entries)
                    if entries:
                        x = b[q + 1]
                        q += 2
                        size = x & 0x7F
                        shift = 7
                        while x >= 0x80:
                            x = b[q]
                            q += 1
                            size |= (x & 0x7F) << shift
                            shift += 7
                        if size >> 63:
                            break
                    else:
                        q += 1
                        while b[q] >= 0x80:
                            q += 1
                        q += 1
                if q < nxt and b[q] == 0x22 and (n := b[q + 1]) < 0x80:  # 4: e_tag
                    q += 2 + n
                while q < nxt and b[q] == 0x2A and b[q + 1] < 0x80:  # 5: metadata entries
                    q += 2 + b[q + 1]
                atype = 0
                if q < nxt and b[q] == 0x30 and (atype := b[q + 1]) < 0x80:  # 6: address_type
                    q += 2
                if q < nxt and b[q] == 0x3A and (n := b[q + 1]) < 0x80:  # 7: content_type
                    q += 2 + n
                if q != nxt:  # anything unexpected: the careful decoder takes this entry
                    break
                if entries:
                    append((k[:-8], b[a:ae].decode(), atype, size))
                    key = k
                else:
                    append((b[a:ae].decode(), atype))
                p = nxt
            else:
                break
            if entries:
                p, key = _entry_full(b, p, end, key, append)
            else:
                p = _entry_address(b, p, end, append)
        if p != end:  # checked once here rather than per entry: the whole block is refused
            raise SSTableError("data block: last entry runs past the block's entries")
    except (IndexError, UnicodeDecodeError):
        raise SSTableError("malformed data block (entry overruns the block or address is not UTF-8)") from None


def _entry_address(b: bytes, p: int, end: int, append) -> int:
    """The careful path of _block_addresses for the entry at p: append its (address, address_type), return
    where the next entry starts."""
    _, p = _uvarint(b, p, end, "data block")
    unshared, p = _uvarint(b, p, end, "data block")
    vlen, p = _uvarint(b, p, end, "data block")
    q = p + unshared
    p = q + vlen
    if p > end or unshared < 8:
        raise SSTableError("data block entry runs past the block, or its key has no internal-key trailer")
    n, q = _zigzag_len(b, q, p, "value identity")
    n, q = _zigzag_len(b, q + n, p, "value data")
    if q + n != p:
        raise SSTableError(f"value has {p - q - n} bytes after its data")
    address = None
    atype = 0
    while q < p:
        tag, q = _uvarint(b, q, p, "Entry")
        wire = tag & 7
        if wire == 0:
            v, q = _uvarint(b, q, p, "Entry")
            if tag == 0x30:
                atype = v
        elif wire == 2:
            n, q = _uvarint(b, q, p, "Entry")
            if q + n > p:
                raise SSTableError(f"field {tag >> 3} of Entry runs past the value")
            if tag == 0x0A:
                address = b[q:q + n]
            q += n
        elif wire in (1, 5):
            q += 8 if wire == 1 else 4
        else:
            raise SSTableError(f"unsupported protobuf wire type {wire} in Entry")
    if q != p:
        raise SSTableError("Entry overruns its value")
    if not address:
        raise SSTableError("Entry has no address")
    append((address.decode(), atype))
    return p
