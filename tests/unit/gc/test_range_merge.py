"""The compiled merge of a day's two sides (range_arrow.side_by_side over native/rangewalk.c's diff): what it leaves
on each side is what a merge by path of the careful decoder's entries leaves, on randomized versions of ranges
(the same path at the same or another address, paths only one side has, blocks stored raw or Snappy-compressed,
entries of every shape); it refuses (None) rather than guess: a side whose paths do not rise, a block whose
checksum fails, a block of a shape it is unsure of."""

from __future__ import annotations

import random
from dataclasses import dataclass

import cramjam
import pytest

from spark_jobs.core import range_arrow, range_changes, sstable
from tests.unit.gc.test_range_arrow import block, entry_value

pytestmark = pytest.mark.skipif(not range_arrow.compiled(), reason="needs the compiled walk (scripts/install.sh)")


@dataclass
class _File:
    """What side_by_side reads of a range file: its bytes, where its blocks end, whether checksums are checked."""

    data: bytes
    footer_start: int
    verify: bool = True


def stored(raw: bytes, rng: random.Random) -> bytes:
    """A block as a table stores it: contents (raw or Snappy), compression type, masked CRC32C of both."""
    kind = rng.choice([0, 1])
    body = bytes(cramjam.snappy.compress_raw(raw)) if kind else raw
    crc = range_arrow._native.crc32c(body + bytes([kind]))  # noqa: SLF001
    masked = (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF
    return body + bytes([kind]) + masked.to_bytes(4, "little")


def side(entries: list[tuple[bytes, bytes]], rng: random.Random) -> list[tuple[_File, list[tuple[int, int]]]]:
    """A side's entries (key with its trailer, value) cut into blocks, the blocks into one to three files."""
    blocks, at = [], 0
    while at < len(entries):
        n = rng.randint(1, 40)
        blocks.append(block(entries[at:at + n]))
        at += n
    files, at = [], 0
    while at < len(blocks):
        n = rng.randint(1, max(1, len(blocks)))
        data, handles = b"", []
        for raw in blocks[at:at + n]:
            one = stored(raw, rng)
            handles.append((len(data), len(one) - 5))
            data += one
        files.append((_File(data, len(data)), handles))
        at += n
    return files


def careful(files: list[tuple[_File, list[tuple[int, int]]]]) -> list[tuple[bytes, str, int, int]]:
    """The side's entries by the careful decoder (sstable.SSTableError where it refuses one)."""
    out: list[tuple[bytes, str, int, int]] = []
    for raw in careful_blocks(files):
        sstable._block_entries_fast(raw, out)  # noqa: SLF001
    return out


def careful_blocks(files: list[tuple[_File, list[tuple[int, int]]]]) -> list[bytes]:
    """The side's blocks, decompressed by the careful decoder."""
    out = []
    for f, handles in files:
        table = sstable._Table.__new__(sstable._Table)  # noqa: SLF001 - a table of blocks alone, no footer
        table.data, table.footer_start, table.verify = f.data, f.footer_start, f.verify
        out += [table.block(handle) for handle in handles]
    return out


def reference(dead: list[tuple], new: list[tuple]) -> tuple[list[tuple], list[tuple]]:
    """Each side's entries less those at a path the other side holds at the same address and type."""
    held = [{e[0]: (e[1], e[2]) for e in s} for s in (dead, new)]
    return ([e for e in dead if held[1].get(e[0]) != (e[1], e[2])],
            [e for e in new if held[0].get(e[0]) != (e[1], e[2])])


def versions(rng: random.Random, odd: float) -> tuple[list[tuple[bytes, bytes]], list[tuple[bytes, bytes]]]:
    """A range and its next version: paths kept (the same value, or a new one: another address), dropped, added."""
    trailer = (rng.randrange(1 << 40) << 8 | 1).to_bytes(8, "little")
    paths = sorted({b"tables/t%d/dt=2026-01-%02d/part-%05d.parquet" % (rng.randrange(3), rng.randrange(30),
                                                                        rng.randrange(10 ** 5))
                    for _ in range(rng.randint(0, 400))})
    dead, new = [], []
    for path in paths:
        value = entry_value(rng, odd)
        roll = rng.random()
        if roll < 0.6:
            dead.append((path + trailer, value))
            new.append((path + trailer, value if rng.random() < 0.8 else entry_value(rng, odd)))
        elif roll < 0.8:
            dead.append((path + trailer, value))
        else:
            new.append((path + trailer, value))
    return dead, new


def merged(dead_files, new_files):
    got = range_arrow.side_by_side((dead_files, new_files))
    if got is None:
        return None
    died, appeared, walked, walked_bytes = got
    rows = [list(zip(*(b.column(i).to_pylist() for i in range(4)), strict=True)) for b in (died, appeared)]
    return rows[0], rows[1], walked, walked_bytes


@pytest.mark.parametrize("odd", [0.0, 0.05])
@pytest.mark.parametrize("seed", range(4))
def test_what_the_merge_leaves_is_a_merge_of_the_careful_entries(seed, odd):
    rng = random.Random(seed * 100 + int(odd * 100))
    took = 0
    for _ in range(60):
        dead, new = versions(rng, odd)
        dead_files, new_files = side(dead, rng), side(new, rng)
        got = merged(dead_files, new_files)
        try:
            sides = careful(dead_files), careful(new_files)
        except sstable.SSTableError:
            assert got is None  # what the careful decoder refuses, the merge does not take
            continue
        if odd == 0:
            assert got is not None  # lakeFS's own shape is always taken
        if got is not None:
            took += 1
            assert (got[0], got[1]) == reference(*sides)
            assert got[2] == len(sides[0]) + len(sides[1])
            assert got[3] == sum(len(raw) for s in (dead_files, new_files) for raw in careful_blocks(s))
    assert took


@pytest.mark.parametrize("seed", range(3))
def test_a_side_whose_paths_do_not_rise_is_refused(seed):
    rng = random.Random(seed)
    dead, new = versions(rng, 0.0)
    while len(dead) < 50:
        dead, new = versions(rng, 0.0)
    dead_files = side(dead, rng)
    flat = [(f, [h]) for f, handles in dead_files for h in handles]
    if len(flat) < 2:
        pytest.skip("one block")  # pragma: no cover - 50 entries make at least two blocks of 40
    flat[0], flat[-1] = flat[-1], flat[0]
    assert merged(flat, side(new, rng)) is None
    assert merged(dead_files + dead_files, side(new, rng)) is None  # two versions of one span on one side


@pytest.mark.parametrize("seed", range(3))
def test_a_block_whose_checksum_fails_is_refused_unless_checksums_are_off(seed):
    rng = random.Random(seed)
    dead, new = versions(rng, 0.0)
    dead_files, new_files = side(dead, rng), side(new, rng)
    f, handles = new_files[0]
    offset, size = handles[rng.randrange(len(handles))]
    damaged = bytearray(f.data)
    damaged[offset + rng.randrange(size)] ^= 1 << rng.randrange(8)
    new_files[0] = (_File(bytes(damaged), f.footer_start), handles)
    assert merged(dead_files, new_files) is None
    new_files[0] = (_File(bytes(damaged), f.footer_start, verify=False), handles)
    got = merged(dead_files, new_files)
    try:
        expected = reference(careful(dead_files), careful(new_files))
    except sstable.SSTableError:
        return
    assert got is None or (got[0], got[1]) == expected


@pytest.mark.parametrize("seed", range(3))
def test_the_day_counted_by_the_merge_is_the_day_counted_from_columns(seed, monkeypatch):
    """range_changes.changes on lakeFS-written ranges, each with a copy: the merge and the columns' count agree."""
    rng = random.Random(seed)
    files = {p: data for p, data in zip("abcd", [rng.choice(list(_lakefs().values())) for _ in range(4)],
                                        strict=True)}
    dead = {"a", "c"}
    by_merge, tally = range_changes.changes(files, dead)
    monkeypatch.setattr(range_arrow, "side_by_side", lambda sides: None)
    by_columns, counted = range_changes.changes(files, dead)
    assert sorted(by_merge) == sorted(by_columns)
    assert tally.bytes_walked == counted.bytes_walked > 0 and tally.entries_decoded == counted.entries_decoded
    assert tally.entries_changed == len(by_merge)


def _lakefs() -> dict[str, bytes]:
    from tests.unit.gc.test_range_arrow import lakefs_ranges  # noqa: PLC0415

    return lakefs_ranges()
