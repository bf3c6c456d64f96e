"""What a day changed in the ranges a run keeps: the entries of the ranges that died against those of the ranges
that appeared, counted by (address, address type) (pure).

lakeFS's own diff walks two versions of a range side by side by key; here the versions are put side by side in
two steps. First by block: a new version of a range repeats most data blocks of the one before byte for byte
(pebble cuts blocks at the same entries until the first change), so blocks are keyed by the CRC32C their trailer
stores and their size, and two blocks with one key cancel out once their bytes compare equal: neither is read.
Then by entry: the blocks left make two sides, the dead ranges' and the new ones', each in path order, walked by
compiled code a block at a time and merged by path (``range_arrow.side_by_side``): an entry at the same path with
the same address and type on both sides cancels out there, and only the others become columns; where the blocks do
not make two ordered sides, they are walked into columns (``range_arrow.blocks_batch``) and cancel out by
(address, type) in one count. What remains is the day's change: an address whose count went up is kept by one more
live range, one whose count went down by one fewer.

``spans`` and ``groups`` put the ranges that can share entries (those whose key spans overlap) in one group, so
that a group's change is computed where its files are (a thread, an executor) and only the change travels.
"""

from __future__ import annotations

import array
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from spark_jobs.core import range_arrow, sstable

Change = tuple[str, int, int]  # address, address type, how many more live range entries hold it (+) or fewer (-)


@dataclass
class Tally:
    """What a change cost, for the run's record."""

    blocks: int = 0  # data blocks of the ranges compared
    blocks_decoded: int = 0  # of those, the ones that did not cancel out and were walked
    entries_decoded: int = 0
    bytes_walked: int = 0  # the decompressed bytes of the blocks walked
    entries_changed: int = 0
    arrow_bytes: int = 0  # the Arrow columns the walked blocks made

    def add(self, other: Tally) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def span(data: bytes) -> tuple[bytes, bytes]:
    """(first key, last key) of a range file, from the properties lakeFS writes (b"" when absent: no grouping)."""
    props = sstable.read_properties(data)
    return props.get("min_key", b""), props.get("max_key", b"")


def groups(spans: Mapping[str, tuple[bytes, bytes]], *, most: int = 16) -> list[list[str]]:
    """The ranges in groups whose key spans overlap (each version of a range with the versions it replaced), in key
    order; a group reaching ``most`` ranges is closed (its change is still exact, only less of it cancels where it
    is computed). A range without a span is a group of its own."""
    out: list[list[str]] = []
    reach = b""
    for start, end, range_id in sorted((s, e, r) for r, (s, e) in spans.items() if s or e):
        if out and start <= reach and len(out[-1]) < most:
            out[-1].append(range_id)
            reach = max(reach, end)
        else:
            out.append([range_id])
            reach = end
    return out + [[r] for r, (s, e) in sorted(spans.items()) if not (s or e)]


@dataclass
class _Range:
    table: object
    handles: list[tuple[int, int]]
    keys: list[int]
    decode: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # weight -> handles to walk


def changes(files: Mapping[str, bytes], dead: set[str], *,
            map_: Callable[[Callable, Iterable], Iterable] = map) -> tuple[list[Change], Tally]:
    """The change from the ranges in ``dead`` to the others of ``files`` (range id -> its bytes): every (address,
    type) whose count differs, with the difference. ``map_`` may walk the ranges on threads (the walk releases the
    GIL)."""
    tally = Tally()
    ranges = {r: _Range(*range_arrow.block_keys(data)) for r, data in files.items()}
    sides = [{k for r, g in ranges.items() if (r in dead) == died for k in g.keys} for died in (True, False)]
    both = sides[0] & sides[1]  # keys held on both sides: maybe the same block, to compare
    held: dict[int, list[tuple[int, str, tuple[int, int]]]] = {}
    for range_id, rng in ranges.items():
        sign = -1 if range_id in dead else 1
        tally.blocks += len(rng.handles)
        alone = []
        for handle, key in zip(rng.handles, rng.keys, strict=True):
            if key in both:
                held.setdefault(key, []).append((sign, range_id, handle))
            else:
                alone.append(handle)
        if alone:
            rng.decode[sign] = alone
    for blocks in held.values():
        # blocks of one key: the same bytes almost always, compared to be sure; each distinct content's net count
        distinct: list[list] = []  # [stored bytes and compression type, net count, range, handle]
        for sign, range_id, (offset, size) in blocks:
            content = files[range_id][offset:offset + size + 1]
            for same in distinct:
                if same[0] == content:
                    same[1] += sign
                    break
            else:
                distinct.append([content, sign, range_id, (offset, size)])
        for _, net, range_id, handle in distinct:
            if net:
                ranges[range_id].decode.setdefault(net, []).append(handle)

    def walk(item: tuple[str, _Range]) -> list[tuple[pa.RecordBatch, int, int]]:
        _, rng = item
        out = []
        for weight, handles in sorted(rng.decode.items()):
            buf, ends = range_arrow.joined(rng.table, sorted(handles))
            out.append((range_arrow.joined_batch(buf, ends), weight, len(buf)))
        return out

    for rng in ranges.values():
        tally.blocks_decoded += sum(len(h) for h in rng.decode.values())
    merged = _merged(ranges, dead)
    if merged is not None:
        batches, tally.entries_decoded, tally.bytes_walked = merged
    else:
        walked = [b for part in map_(walk, [(r, g) for r, g in ranges.items() if g.decode]) for b in part]
        batches = [(batch, weight) for batch, weight, _ in walked]
        tally.entries_decoded = sum(b.num_rows for b, _ in batches)
        tally.bytes_walked = sum(n for _, _, n in walked)
    tally.arrow_bytes = sum(b.nbytes for b, _ in batches)
    out = _net(batches)
    tally.entries_changed = len(out)
    return out, tally


def _merged(ranges: dict[str, _Range], dead: set[str]) -> tuple[list[tuple[pa.RecordBatch, int]], int, int] | None:
    """The blocks left to walk as two sides merged by path (``range_arrow.side_by_side``): only the entries that do
    not cancel become columns. None where the blocks do not make two sides (a block whose bytes net to another count
    than its range's side) or the compiled merge is unsure."""
    sides: tuple[list, list] = ([], [])
    for range_id, rng in ranges.items():
        sign = -1 if range_id in dead else 1
        if set(rng.decode) - {sign}:
            return None
        if rng.decode:
            sides[sign > 0].append(rng)
    # each side's ranges in path order (lakeFS's min_key): ranges of one side that overlap make the merge unsure
    ordered = tuple([(r.table, sorted(next(iter(r.decode.values())))) for r in sorted(side, key=_first_key)]
                    for side in sides)
    got = range_arrow.side_by_side(ordered)
    if got is None:
        return None
    died, appeared, walked, walked_bytes = got
    return [(died, -1), (appeared, 1)], walked, walked_bytes


def _first_key(rng: _Range) -> bytes:
    """The range's first key as lakeFS records it (b"" when it cannot be read: the merge then checks the order)."""
    try:
        return rng.table.properties().get("min_key", b"")
    except (AttributeError, sstable.SSTableError):
        return b""


def _whole(column: pa.Array) -> pa.Array:
    """The column with its buffers starting at its first row (what the compiled count reads)."""
    return pa.concat_arrays([column]) if column.offset else column


def _net(batches: list[tuple[pa.RecordBatch, int]]) -> list[Change]:
    """(address, type, summed weight) of every (address, type) whose weights do not sum to 0: counted in one hash
    table by the compiled module (exact: equal hashes are compared byte for byte), else by Arrow's group-by."""
    batches = [(b, w) for b, w in batches if b.num_rows]
    if not batches:
        return []
    native = range_arrow._native  # noqa: SLF001
    if native is not None:
        parts = [[_whole(b.column(i)) for i in (0, 1, 2)] + [w] for b, w in batches]
        # each side's batches in path order (their first paths): the compiled count merges the two sides by path
        # as lakeFS's diff does, and checks the order holds
        sides = [array.array("i", sorted((i for i, p in enumerate(parts) if p[3] == w), key=lambda i: parts[i][0][0]
                                         .as_py())) for w in (-1, 1)]
        cols, rows, sums = native.net([(a.buffers()[1], a.buffers()[2], t.buffers()[1], w, len(a), p.buffers()[1],
                                        p.buffers()[2]) for p, a, t, w in parts], *sides)
        return [(parts[c][1][r].as_py(), parts[c][2][r].as_py(), n) for c, r, n in
                zip(array.array("q", cols), array.array("q", rows), array.array("q", sums), strict=True)]
    table = pa.Table.from_batches([
        pa.RecordBatch.from_arrays([b.column(1), b.column(2), pa.repeat(pa.scalar(w, pa.int64()), b.num_rows)],
                                   names=["address", "address_type", "weight"]) for b, w in batches])
    summed = table.group_by(["address", "address_type"]).aggregate([("weight", "sum")])
    summed = summed.filter(pc.not_equal(summed["weight_sum"], 0))
    return list(zip(summed["address"].to_pylist(), summed["address_type"].to_pylist(),
                    summed["weight_sum"].to_pylist(), strict=True))
