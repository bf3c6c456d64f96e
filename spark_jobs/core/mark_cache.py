"""The mark cache's contents and their encoding (pure: bytes in, bytes out; the engine does the I/O).

What a metadata file held never changes (lakeFS names range files and metaranges by their content), so it can be
remembered: per metarange, its ranges with their first keys; per range file, its data blocks (by the digest
``sstable.range_blocks`` gives them); per distinct block, its entries as stored: path, raw address and address
type. Raw addresses, not namespace-relative keys, because what is relative depends on the namespace's prefixes
(a local blockstore's folder); paths always, because path policies and keep_versions need them and a policy
change must not make the cache useless. Blocks are kept once however many range versions share them, so the cache
grows with what changed, as the files do.

Segments of four parquet files each (spans, metaranges, ranges, blocks) and a pointer (JSON) naming them with
their sizes and SHA-256: a reader trusts the files only when all match, so a torn, truncated or rewritten cache is
seen as such. A daily run appends a segment of what it read that the cache did not hold (``added``), so what it
writes grows with what changed, not with the history; the cache is written whole again (``compacted``) when it
holds too many segments or too much that no run uses any more (``plan_save``).
A metarange is kept as indices into the table of distinct (first key, range id) spans: a long history's
metaranges list the same ranges again and again (a thousand commits of ~500 ranges each are half a million
spans, about a thousand distinct), so the spans are decoded once each and the indices as one integer array.
Formats 1 (each metarange's spans in full) and 2 (one segment) are not read: such a cache is ignored and rebuilt.
"""

from __future__ import annotations

import array
import io
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from spark_jobs.core import parquet_bytes

FORMAT = 3
FILES = ("spans.parquet", "metaranges.parquet", "ranges.parquet", "blocks.parquet")
# Arrow and the files hold little-endian int32s; array.array holds the machine's C ints
_NATIVE_LITTLE = array.array("i", [1]).tobytes() == (1).to_bytes(4, "little")
SLOTS = ("a", "b")  # written alternately: a run killed while writing one leaves the other, still named, intact
# A cache is written whole again, into the other slot, when appending would make it hold more segments than this
# (each costs a request per file to read) or entries no run used that are more than DEAD_SHARE of what it holds
MAX_SEGMENTS = 8
DEAD_SHARE = 0.25

Entry = tuple[bytes, str, int]  # path, raw address, address type
Span = tuple[bytes, str]  # a metarange's range: (first key, range id)


class CacheError(ValueError):
    """A cache that cannot be trusted as a whole; the message says why (it is ignored and rebuilt)."""


@dataclass(frozen=True)
class Held:
    """Which files and blocks a Memory held (at load: what a run's new segment must not repeat)."""

    metaranges: frozenset[str] = frozenset()
    ranges: frozenset[str] = frozenset()
    blocks: frozenset[bytes] = frozenset()


@dataclass(eq=False)
class Memory:
    """What the mark knows of metadata files, by id (with each file's size, to check it against the store).

    A metarange is kept as indices into ``spans``, the distinct (first key, range id) pairs seen: consecutive
    metaranges list nearly the same ranges, so a long history's half a million listed spans are a thousand
    distinct ones, and what the mark asks of all of them (which spans the retained metaranges reach) is a union
    of small integers. Build with ``add_metarange`` (or ``Memory.of``); ``spans_of`` gives a metarange's spans."""

    metaranges: dict[str, tuple[int, array.array]] = field(default_factory=dict)  # id -> (size, span indices)
    ranges: dict[str, tuple[int, tuple[bytes, ...]]] = field(default_factory=dict)  # id -> (size, block digests)
    blocks: dict[bytes, list[Entry]] = field(default_factory=dict)
    spans: list[Span] = field(default_factory=list)
    # blocks.parquet as read (Arrow), when the blocks were decoded from it: encode then converts only the blocks
    # added since (a block is named by its content's digest, so what a stored one holds never changes)
    stored_blocks: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._span_ids = {span: i for i, span in enumerate(self.spans)}

    @classmethod
    def of(cls, metaranges: Mapping[str, tuple[int, Iterable[Span]]] | None = None,
           ranges: Mapping[str, tuple[int, tuple[bytes, ...]]] | None = None,
           blocks: Mapping[bytes, list[Entry]] | None = None) -> Memory:
        """A Memory from each metarange's spans written out."""
        memory = cls(ranges=dict(ranges or {}), blocks=dict(blocks or {}))
        for metarange_id, (size, spans) in (metaranges or {}).items():
            memory.add_metarange(metarange_id, size, spans)
        return memory

    def add_metarange(self, metarange_id: str, size: int, spans: Iterable[Span]) -> None:
        ids, known = self._span_ids, self.spans
        indices = []
        for span in spans:
            if (i := ids.get(span)) is None:
                i = ids[span] = len(known)
                known.append(span)
            indices.append(i)
        self.metaranges[metarange_id] = (size, array.array("i", indices))

    def spans_of(self, metarange_id: str) -> tuple[Span, ...]:
        return tuple(map(self.spans.__getitem__, self.metaranges[metarange_id][1]))

    def distinct_spans(self, metarange_ids: Iterable[str]) -> list[Span]:
        """The spans the given metaranges list, each once (in no particular order)."""
        import pyarrow.compute as pc  # noqa: PLC0415

        listed = [self.metaranges[m][1] for m in metarange_ids]
        if not listed:
            return []
        # in Arrow: a Python set of the bench history's million indices took 4x as long
        return [self.spans[i] for i in pc.unique(_int32s(_joined(listed))).to_pylist()]

    def files(self) -> int:
        """How many metadata files it describes."""
        return len(self.metaranges) + len(self.ranges)

    def held(self) -> Held:
        return Held(frozenset(self.metaranges), frozenset(self.ranges), frozenset(self.blocks))

    def added(self, since: Held) -> Memory:
        """What it holds that ``since`` did not (files by id, blocks by digest): a segment to append."""
        memory = Memory()
        for metarange_id in sorted(self.metaranges.keys() - since.metaranges):
            memory.add_metarange(metarange_id, self.metaranges[metarange_id][0], self.spans_of(metarange_id))
        memory.ranges = {r: self.ranges[r] for r in sorted(self.ranges.keys() - since.ranges)}
        memory.blocks = {d: self.blocks[d] for d in sorted(self.blocks.keys() - since.blocks)}
        return memory

    def view(self) -> tuple[dict, dict, dict]:
        """What it holds, spans written out: two Memories are equal when their views are."""
        return ({m: (v[0], self.spans_of(m)) for m, v in self.metaranges.items()}, self.ranges,
                {d: list(e) for d, e in self.blocks.items()})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Memory) and self.view() == other.view()

    def _with(self, metaranges: dict, ranges: dict, blocks: dict) -> Memory:
        # the spans list is shared, not copied: encode keeps only the spans still listed
        memory = Memory(metaranges, ranges, blocks, stored_blocks=self.stored_blocks)
        memory.spans, memory._span_ids = self.spans, self._span_ids
        return memory

    def subset(self, metaranges: Iterable[str], ranges: Iterable[str]) -> Memory:
        """Only the given files (those a run used) and the blocks they hold: what is not reached any more goes."""
        kept_ranges = {r: self.ranges[r] for r in sorted(set(ranges)) if r in self.ranges}
        digests = {d for _, blocks in kept_ranges.values() for d in blocks}
        return self._with({m: self.metaranges[m] for m in sorted(set(metaranges)) if m in self.metaranges},
                          kept_ranges, {d: self.blocks[d] for d in sorted(digests) if d in self.blocks})


def merged(parts: list[Memory]) -> Memory:
    """The segments as one Memory, a later one's entries over an earlier's (a file read again after its entry
    went stale is in a later segment). Each part's span indices must already point into the concatenation of the
    parts' spans, in order (``decode(..., span_offset=)``)."""
    if len(parts) == 1:
        return parts[0]
    memory = Memory(spans=[span for part in parts for span in part.spans])
    blocks = 0
    for part in parts:
        memory.metaranges.update(part.metaranges)
        memory.ranges.update(part.ranges)
        memory.blocks.update(part.blocks)  # a block is named by its content: the same digest holds the same
        blocks += len(part.blocks)
    stored = [part.stored_blocks for part in parts]
    if blocks == len(memory.blocks) and all(t is not None for t in stored):
        import pyarrow as pa  # noqa: PLC0415

        memory.stored_blocks = pa.concat_tables(stored)
    return memory


def plan_save(keep: Memory, stored: Held, *, stored_files: int, segments: int) -> tuple[str, Memory | None]:
    """How to store ``keep`` (what a run used) over a cache of ``segments`` segments that held ``stored_files``
    files, ``stored`` the trusted ones: ("unchanged", None) when it adds nothing and the cache may stay as it is,
    ("appended", the segment to add), or ("compacted", keep) to write it whole."""
    if not segments:
        return "compacted", keep
    reused = sum(1 for m in keep.metaranges if m in stored.metaranges) + sum(1 for r in keep.ranges
                                                                             if r in stored.ranges)
    new = keep.added(stored)
    dead = stored_files - reused  # held and not used: what compacting would drop
    adds = bool(new.files() or new.blocks)
    if dead > DEAD_SHARE * (stored_files + new.files()) or (adds and segments >= MAX_SEGMENTS):
        return "compacted", keep
    if not adds:
        return "unchanged", None
    return "appended", new


def trusted(memory: Memory, sizes: Mapping[str, int]) -> tuple[Memory, int]:
    """The entries whose file still exists with the size remembered (``sizes``: file id -> size, as listed), and
    ranges whose every block is known; and how many entries were dropped."""
    # ``in sizes`` first: an empty size in the cache must not match the None of a file that is gone
    metaranges = {m: v for m, v in memory.metaranges.items() if m in sizes and sizes[m] == v[0]}
    ranges = {r: v for r, v in memory.ranges.items()
              if r in sizes and sizes[r] == v[0] and all(d in memory.blocks for d in v[1])}
    dropped = len(memory.metaranges) - len(metaranges) + len(memory.ranges) - len(ranges)
    return memory._with(metaranges, ranges, memory.blocks), dropped


def _schemas():
    import pyarrow as pa  # noqa: PLC0415 - only where a cache is read or written

    return {
        "spans.parquet": pa.schema([("first_key", pa.binary()), ("range_id", pa.string())]),
        "metaranges.parquet": pa.schema([("metarange_id", pa.string()), ("size", pa.int64()),
                                         ("spans", pa.list_(pa.int32()))]),  # row numbers in spans.parquet
        "ranges.parquet": pa.schema([("range_id", pa.string()), ("size", pa.int64()),
                                     ("blocks", pa.list_(pa.binary()))]),
        "blocks.parquet": pa.schema([("block", pa.binary()), ("paths", pa.list_(pa.binary())),  # one row a block
                                     ("addresses", pa.list_(pa.string())), ("address_types", pa.list_(pa.int8()))]),
    }


def _parquet(table) -> bytes:
    import pyarrow.parquet as pq  # noqa: PLC0415

    out = io.BytesIO()
    # no dictionary pages: the ids and digests are all distinct, the span numbers nearly so; without them the
    # files are smaller and written faster (the bench history's blocks: 610 against 742 KB, 20 % less time)
    pq.write_table(table, out, compression="zstd", use_dictionary=False)
    return out.getvalue()


def encode(memory: Memory) -> dict[str, bytes]:
    """The four files' bytes."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415

    schemas = _schemas()
    m_ids = sorted(memory.metaranges)
    r_ids = sorted(memory.ranges)
    listed = [memory.metaranges[m][1] for m in m_ids]
    # the distinct indices of half a million, in Arrow (a Python set of them took 25 ms on the bench's history)
    used = pc.unique(_int32s(_joined(listed))) if listed else pa.array([], pa.int32())
    spans = memory.spans
    if len(used) < len(spans):  # spans only metaranges gone from the cache listed: renumber without them
        order = sorted(used.to_pylist())
        renumber = [0] * len(spans)
        for new, old in enumerate(order):
            renumber[old] = new
        spans = [spans[i] for i in order]
        listed = [array.array("i", map(renumber.__getitem__, indices)) for indices in listed]
    offsets = _offsets(listed)
    digests = sorted(memory.blocks)
    columns = {
        "spans.parquet": [pa.array([k for k, _ in spans], pa.binary()), pa.array([r for _, r in spans], pa.string())],
        "metaranges.parquet": [pa.array(m_ids, pa.string()), pa.array([memory.metaranges[m][0] for m in m_ids],
                                                                        pa.int64()),
                               pa.ListArray.from_arrays(_int32s(offsets), _int32s(_joined(listed)))],
        "ranges.parquet": [pa.array(r_ids, pa.string()), pa.array([memory.ranges[r][0] for r in r_ids], pa.int64()),
                           pa.array([list(memory.ranges[r][1]) for r in r_ids], pa.list_(pa.binary()))],
    }
    tables = {name: pa.Table.from_arrays(columns[name], schema=schemas[name]) for name in columns}
    stored = memory.stored_blocks
    if stored is None:
        tables["blocks.parquet"] = _blocks_table(digests, memory.blocks)
    else:  # the stored rows still used, and the new blocks
        known = set(stored.column("block").to_pylist())
        both = pa.concat_tables([stored.filter(pc.is_in(stored.column("block"), value_set=pa.array(digests,
                                                                                                   pa.binary()))),
                                 _blocks_table([d for d in digests if d not in known], memory.blocks)])
        tables["blocks.parquet"] = both.take(pc.sort_indices(both, sort_keys=[("block", "ascending")]))
    return {name: _parquet(tables[name]) for name in FILES}


def _blocks_table(digests: list[bytes], blocks: Mapping[bytes, list[Entry]]):
    import pyarrow as pa  # noqa: PLC0415

    offsets = _offsets(blocks[d] for d in digests)
    entries = [e for d in digests for e in blocks[d]]
    return pa.Table.from_arrays([pa.array(digests, pa.binary())] + [
        pa.ListArray.from_arrays(_int32s(offsets), pa.array([e[i] for e in entries], t))
        for i, t in enumerate((pa.binary(), pa.string(), pa.int8()))], schema=_schemas()["blocks.parquet"])


def _offsets(lists: Iterable) -> list[int]:
    """Arrow list offsets: where each list starts in the flattened values, and the end."""
    return [0, *itertools.accumulate(map(len, lists))]


def _joined(arrays: list[array.array]) -> array.array:
    out = array.array("i")
    for a in arrays:
        out += a
    return out


def _int32s(values: Iterable[int]):
    """An Arrow int32 array of ``values`` (copied once, as C ints: no Python int per value)."""
    import pyarrow as pa  # noqa: PLC0415

    data = values if isinstance(values, array.array) else array.array("i", values)
    if data.itemsize != 4:
        raise ValueError("this platform's C int is not 32 bits")
    if not _NATIVE_LITTLE:
        data = array.array("i", data)
        data.byteswap()
    return pa.Array.from_buffers(pa.int32(), len(data), [None, pa.py_buffer(data)])


def _has_nulls(column) -> bool:
    # The schema allows nulls; a null size would match a file that is gone, a null path or id breaks the mark
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415

    return column.null_count > 0 or (pa.types.is_list(column.type) and _has_nulls(pc.list_flatten(column)))


def decode(files: Mapping[str, bytes], *, span_offset: int = 0) -> Memory:
    """The files back as a Memory; a CacheError when one is not a parquet file of the expected schema.
    ``span_offset``: added to each span index, for a segment whose spans follow others' (``merged``)."""
    import pyarrow.compute as pc  # noqa: PLC0415

    tables = {}
    for name, schema in _schemas().items():
        try:
            tables[name] = parquet_bytes.read(files[name])
        except Exception as exc:  # noqa: BLE001 - pyarrow's errors vary: an unreadable cache is no cache
            raise CacheError(f"{name} is unreadable ({type(exc).__name__}: {exc})") from None
        if not tables[name].schema.equals(schema):
            raise CacheError(f"{name} has another schema than format {FORMAT}'s")
    for name, table in tables.items():
        if any(_has_nulls(column) for column in table.columns):
            raise CacheError(f"{name} has empty values")
    s = tables["spans.parquet"].to_pydict()
    spans = list(zip(s["first_key"], s["range_id"], strict=True))
    m = tables["metaranges.parquet"]
    lists = m.column("spans").combine_chunks()
    flat = lists.flatten()
    bounds = pc.min_max(flat).as_py()
    if len(flat) and (bounds["min"] < 0 or bounds["max"] >= len(spans)):
        raise CacheError(f"metaranges.parquet names spans beyond the {len(spans)} of spans.parquet")
    offsets = lists.offsets.to_pylist()
    ends = [o - offsets[0] for o in offsets]
    if span_offset and len(flat):
        import pyarrow as pa  # noqa: PLC0415

        flat = pc.add(flat, pa.scalar(span_offset, pa.int32()))
    indices = array.array("i")  # Arrow's int32s as they are, without a Python int per value
    if len(flat):
        indices.frombytes(memoryview(flat.buffers()[1])[4 * flat.offset:4 * (flat.offset + len(flat))])
    if not _NATIVE_LITTLE:
        indices.byteswap()
    memory = Memory(spans=spans)  # with a span_offset, whole only once merged with the segments before it
    for i, (mid, size) in enumerate(zip(m.column("metarange_id").to_pylist(), m.column("size").to_pylist(),
                                        strict=True)):
        memory.metaranges[mid] = (size, indices[ends[i]:ends[i + 1]])
    r = tables["ranges.parquet"].to_pydict()
    b = tables["blocks.parquet"].to_pydict()
    for rid, size, blocks in zip(r["range_id"], r["size"], r["blocks"], strict=True):
        memory.ranges[rid] = (size, tuple(blocks))
    for digest, paths, addresses, kinds in zip(b["block"], b["paths"], b["addresses"], b["address_types"],
                                               strict=True):
        if not len(paths) == len(addresses) == len(kinds):
            raise CacheError(f"block {digest.hex()}: {len(paths)} paths, {len(addresses)} addresses, {len(kinds)} "
                             f"address types")
        if digest in memory.blocks:
            raise CacheError(f"block {digest.hex()} is there twice")
        memory.blocks[digest] = list(zip(paths, addresses, kinds, strict=True))
    memory.stored_blocks = tables["blocks.parquet"]
    return memory
