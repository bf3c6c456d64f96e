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
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np
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
    handles: np.ndarray  # one (offset, size) row per data block, int64
    keys: np.ndarray  # each block's key (CRC32C | size << 32), uint64
    decode: dict[int, np.ndarray] = field(default_factory=dict)  # weight -> handles to walk (rows, in file order)


_NO_KEYS = np.empty(0, np.uint64)


def _distinct(keys: np.ndarray) -> np.ndarray:
    keys = np.sort(keys)
    return keys[np.concatenate(([True], keys[1:] != keys[:-1]))] if len(keys) else keys


def _common(one: np.ndarray, other: np.ndarray) -> np.ndarray:
    """The keys in both arrays, sorted, each once. Sorted here rather than by ``np.intersect1d``/``np.isin``, whose
    ``np.unique`` imports numpy.ma on its first call (numpy 2.4): 15–40 ms of a daily run's process, GIL held."""
    return np.intersect1d(_distinct(one), _distinct(other), assume_unique=True)


def _within(keys: np.ndarray, common: np.ndarray) -> np.ndarray:
    """Whether each of ``keys`` is in ``common`` (sorted, distinct)."""
    if not len(common):
        return np.zeros(len(keys), bool)
    at = np.searchsorted(common, keys).clip(max=len(common) - 1)
    return common[at] == keys


def changes(files: Mapping[str, bytes], dead: set[str], *,
            map_: Callable[[Callable, Iterable], Iterable] = map) -> tuple[list[Change], Tally]:
    """The change from the ranges in ``dead`` to the others of ``files`` (range id -> its bytes): every (address,
    type) whose count differs, with the difference. ``map_`` may walk the ranges on threads (the walk releases the
    GIL)."""
    tally = Tally()
    ranges = {r: _Range(*range_arrow.block_key_arrays(data)) for r, data in files.items()}
    # the keys held on both sides (maybe the same block, to compare): arrays, not a Python object per block, since
    # this runs with the GIL held while other groups are walked
    sides = [[g.keys for r, g in ranges.items() if (r in dead) == died] for died in (True, False)]
    both = _common(*(np.concatenate(keys) if keys else _NO_KEYS for keys in sides))
    held = []  # (range id, sign, handles, keys) of the blocks whose key the other side holds too
    for range_id, rng in ranges.items():
        sign = -1 if range_id in dead else 1
        tally.blocks += len(rng.keys)
        shared = _within(rng.keys, both)
        if not shared.all():
            rng.decode[sign] = rng.handles[~shared]
        if shared.any():
            held.append((range_id, sign, rng.handles[shared], rng.keys[shared]))
    apart: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for range_id, net, handle in _held_apart(files, held):
        apart.setdefault((range_id, net), []).append(handle)
    for (range_id, net), rows in apart.items():
        rng = ranges[range_id]
        rng.decode[net] = _in_order(np.concatenate((rng.decode.get(net, rng.handles[:0]), np.array(rows, np.int64))))

    def walk(item: tuple[str, _Range]) -> list[tuple[pa.RecordBatch, int, int]]:
        _, rng = item
        out = []
        for weight, handles in sorted(rng.decode.items()):
            buf, ends = range_arrow.joined(rng.table, list(map(tuple, handles.tolist())))
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
    ordered = tuple([(r.table, next(iter(r.decode.values()))) for r in sorted(side, key=_first_key)]
                    for side in sides)
    got = range_arrow.side_by_side(ordered)
    if got is None:
        return None
    died, appeared, walked, walked_bytes = got
    return [(died, -1), (appeared, 1)], walked, walked_bytes


def _held_apart(files: Mapping[str, bytes], held: list[tuple[str, int, np.ndarray, np.ndarray]]) \
        -> Iterator[tuple[str, int, tuple[int, int]]]:
    """Of the blocks whose key both sides hold, those that do not cancel out: blocks of one key are the same bytes
    almost always, compared to be sure; each distinct content's net count, with the block it was read from (range
    id, net count, handle). A key held by one dead and one new block is the common case: such pairs that follow
    each other in both files (a range's unchanged stretch) are compared as one span of bytes, not block by block."""
    if not held:
        return
    keys = np.concatenate([k for *_, k in held])
    order = np.argsort(keys, kind="stable")
    keys = keys[order]
    rows = np.concatenate([h for _, _, h, _ in held])[order]
    origin = np.concatenate([np.full(len(k), i) for i, (*_, k) in enumerate(held)])[order]
    signs = np.array([sign for _, sign, _, _ in held])[origin]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    stops = np.r_[starts[1:], len(keys)]
    settled = _settled_pairs(files, held, rows, origin, signs, starts, stops)
    handles, origin_list = rows.tolist(), origin.tolist()
    for start, stop in zip(starts[~settled].tolist(), stops[~settled].tolist(), strict=True):
        distinct: list[list] = []  # [stored bytes and compression type, net count, range, handle]
        for i in range(start, stop):
            range_id, sign = held[origin_list[i]][:2]
            offset, size = handles[i]
            content = files[range_id][offset:offset + size + 1]
            for same in distinct:
                if same[0] == content:
                    same[1] += sign
                    break
            else:
                distinct.append([content, sign, range_id, (offset, size)])
        for _, net, range_id, handle in distinct:
            if net:
                yield range_id, net, tuple(handle)


# a data block's trailer (its compression type and CRC32C): pebble lays blocks end to end, each followed by its own
_TRAILER = sstable._TRAILER_LEN  # noqa: SLF001


def _settled_pairs(files: Mapping[str, bytes], held: list, rows: np.ndarray, origin: np.ndarray, signs: np.ndarray,
                   starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """Which key groups (``starts``/``stops`` over the rows sorted by key) are a dead and a new block whose bytes
    are equal, so cancel out: the pairs are put in the dead blocks' file order, and a run of pairs whose blocks
    follow one another in both files is compared in one slice of each file (an unequal run is left to the block by
    block comparison)."""
    settled = np.zeros(len(starts), bool)
    pairs = np.flatnonzero((stops - starts == 2) & (signs[starts] != signs[np.minimum(starts + 1, len(signs) - 1)]))
    if not len(pairs):
        return settled
    first, second = starts[pairs], starts[pairs] + 1
    dead_first = signs[first] < 0
    d, n = np.where(dead_first, first, second), np.where(dead_first, second, first)
    by_place = np.lexsort((rows[d, 0], origin[d]))
    pairs, d, n = pairs[by_place], d[by_place], n[by_place]
    ends_d, ends_n = rows[d, 0] + rows[d, 1] + _TRAILER, rows[n, 0] + rows[n, 1] + _TRAILER
    follows = ((origin[d][1:] == origin[d][:-1]) & (origin[n][1:] == origin[n][:-1])
               & (rows[d, 0][1:] == ends_d[:-1]) & (rows[n, 0][1:] == ends_n[:-1]))
    run_starts = np.flatnonzero(np.r_[True, ~follows])
    run_stops = np.r_[run_starts[1:], len(pairs)]
    for a, b in zip(run_starts.tolist(), run_stops.tolist(), strict=True):
        dead_file, new_file = files[held[origin[d[a]]][0]], files[held[origin[n[a]]][0]]
        # through the last block's compression type, as a block by block comparison reads it
        dead_start, new_start = int(rows[d[a], 0]), int(rows[n[a], 0])
        length = int(ends_d[b - 1]) - _TRAILER + 1 - dead_start
        if length == int(ends_n[b - 1]) - _TRAILER + 1 - new_start and \
                range_arrow.same_bytes(dead_file, new_file, at=(dead_start, new_start), length=length):
            settled[pairs[a:b]] = True
    return settled


def _in_order(handles: np.ndarray) -> np.ndarray:
    """Handle rows in file order (by offset)."""
    return handles[np.argsort(handles[:, 0], kind="stable")]


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
