"""core.range_changes: a day's change between dead and new ranges, against the careful decoder's count of every
entry of both sides, on range files a real lakeFS wrote (tests/fixtures/sstables/)."""

from __future__ import annotations

import mmap
import random
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from spark_jobs.core import range_changes, sstable
from spark_jobs.core.addresses import relative_key
from spark_jobs.engine.runtime.parallel import ThreadRunner

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sstables"


def ranges() -> list[bytes]:
    files = [p.read_bytes() for p in sorted(FIXTURES.glob("*.sst"))]
    return [d for d in files if sstable.read_properties(d).get("type") == b"ranges"]


def reference(files: dict[str, bytes], dead: set[str]) -> dict[tuple[str, int], int]:
    count: Counter = Counter()
    for range_id, data in files.items():
        for _, address, kind, _ in sstable.range_entries(data):
            count[(address, kind)] += -1 if range_id in dead else 1
    return {k: n for k, n in count.items() if n}


def mapped(data: bytes, folder: Path) -> mmap.mmap:
    """``data`` as a read-only mapped file, as Namespace.read_mapped gives a range file on a disk store."""
    path = folder / f"{len(list(folder.iterdir()))}.sst"
    path.write_bytes(data)
    with open(path, "rb") as file:
        return mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)


@pytest.mark.parametrize("as_mapped", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_the_change_is_the_careful_count_of_both_sides(seed, as_mapped, tmp_path):
    rng = random.Random(seed)
    pool = ranges()
    files, dead = {}, set()
    for i in range(rng.randint(1, 6)):
        files[f"r{i}"] = rng.choice(pool)  # the same file on both sides cancels out by block, unread
        if rng.random() < 0.5:
            dead.add(f"r{i}")
    given = {r: mapped(d, tmp_path) for r, d in files.items()} if as_mapped else files
    with ThreadPoolExecutor(2) as pool_:
        found, tally = range_changes.changes(given, dead, map_=pool_.map)
    assert {(a, k): n for a, k, n in found} == reference(files, dead)
    assert len(found) == len({(a, k) for a, k, _ in found})
    assert tally.blocks == sum(sstable.table_info(d)["data_blocks"] for d in files.values())
    assert tally.entries_changed == len(found)


def test_a_range_replaced_by_itself_changes_nothing_and_reads_no_block():
    data = max(ranges(), key=len)
    found, tally = range_changes.changes({"old": data, "new": data}, {"old"})
    assert found == [] and tally.blocks_decoded == 0 and tally.blocks > 1


@pytest.mark.parametrize("collide", ["all", "by_place"])
@pytest.mark.parametrize("seed", range(3))
def test_blocks_whose_keys_collide_are_told_apart_by_their_bytes(seed, collide, monkeypatch):
    """Blocks given keys that agree (as if their CRC32C and size did) where their bytes do not: every block one key,
    or each block the key of its place in its file, so that a dead and a new file pair up block by block in runs
    that follow each other in both files (compared as one span, then block by block when the span differs). The
    byte comparison alone must keep the change exact."""
    keys_of = range_changes.range_arrow.block_key_arrays

    def colliding(data):
        table, handles, keys = keys_of(data)
        return table, handles, (np.zeros(len(keys), np.uint64) if collide == "all"
                                else np.arange(len(keys), dtype=np.uint64))

    monkeypatch.setattr(range_changes.range_arrow, "block_key_arrays", colliding)
    rng = random.Random(seed)
    pool = ranges()
    files = {f"r{i}": rng.choice(pool) for i in range(4)}
    dead = {"r0", "r1"}
    found, tally = range_changes.changes(files, dead)
    assert {(a, k): n for a, k, n in found} == reference(files, dead)
    if collide == "by_place" and files["r0"] != files["r2"]:
        assert tally.blocks_decoded > 0  # the pairs' spans differed: their blocks were told apart and walked


def test_a_changed_block_inside_a_run_of_equal_ones_is_walked():
    """A dead and a new version of a file equal but for one byte inside one block, its trailer (so its key) as it
    was: the run of pairs that holds it differs as a span, its blocks are compared one by one, and that block is
    walked (where its checksum gives it away), not cancelled unread."""
    data = max(ranges(), key=len)
    _, handles, _ = range_changes.range_arrow.block_key_arrays(data)
    assert len(handles) > 3
    offset, size = handles[len(handles) // 2].tolist()
    changed = bytearray(data)
    changed[offset + size // 2] ^= 0xFF
    with pytest.raises(sstable.SSTableError, match="checksum"):
        range_changes.changes({"old": data, "new": bytes(changed)}, {"old"})


def test_groups_put_overlapping_spans_together_in_key_order():
    spans = {"a": (b"a", b"f"), "b": (b"c", b"h"), "c": (b"i", b"k"), "d": (b"j", b"z"), "e": (b"", b""),
             "f": (b"zz", b"zz")}
    assert range_changes.groups(spans) == [["a", "b"], ["c", "d"], ["f"], ["e"]]
    many = {f"r{i:02d}": (b"a", b"b") for i in range(5)}
    assert range_changes.groups(many, most=2) == [["r00", "r01"], ["r02", "r03"], ["r04"]]


class _Files:
    """A context that reads range files from a dict (what the engine's OpenContext reads from the store)."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files
        self.from_cache: set[str] = set()  # none: no range cache

    def read_range(self, range_id: str) -> bytes:
        return self.files[range_id]

    map_range = read_range


class _Config:
    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files

    def open(self) -> _Files:
        return _Files(self.files)


class _Executors(ThreadRunner):
    """A runner of its own (as Spark's executors are): what it reads, the driver does not hold."""

    in_process = False


@pytest.mark.parametrize("runner", [ThreadRunner(3), _Executors(3)], ids=["driver", "executors"])
@pytest.mark.parametrize("seed", range(3))
def test_the_engine_finds_the_same_change_on_the_driver_and_on_executors(runner, seed):
    """A day's ranges are compared in groups of overlapping spans, on the driver's threads or by the runner's
    executors (``driver_ranges`` 0): the kept index's change is the careful count of both sides either way."""
    from spark_jobs.core import kept_index  # noqa: PLC0415
    from spark_jobs.engine.reach import lean_mark  # noqa: PLC0415

    rng = random.Random(seed)
    pool = ranges()
    files = {f"r{i}": rng.choice(pool) for i in range(8)}
    dead, new = ["r0", "r1", "r2"], ["r3", "r4", "r5", "r6", "r7"]
    spans = {r: range_changes.span(d) for r, d in files.items()}
    tally: dict[str, int] = {}
    delta, gone = lean_mark.changed_blocks(runner, _Config(files), dead=dead, new=new, spans=spans, prefixes=(),
                                           partitions=3, driver_ranges=0, tally=tally)
    want: Counter = Counter()
    gone_want = set()
    for (address, kind), n in reference(files, set(dead)).items():
        if (key := relative_key(address, kind, ())) is not None:  # full addresses: outside the namespace here
            want[kept_index.key_hash(key)] += n
            if n < 0:
                gone_want.add(key)
    assert delta == {h: n for h, n in want.items() if n}
    assert gone == gone_want
    assert tally["blocks"] == sum(sstable.table_info(d)["data_blocks"] for d in files.values())


def _fixture_files() -> dict[str, bytes]:
    return {p.stem: p.read_bytes() for p in FIXTURES.glob("*.sst")}


def test_a_metarange_gives_its_ranges_spans_as_the_ranges_hold_them():
    """The spans the engine groups a day's ranges by come from the metaranges, not the ranges: on lakeFS-written
    files, each metarange record's keys are its range's min_key and max_key."""
    files = _fixture_files()
    metaranges = [d for d in files.values() if sstable.read_properties(d).get("type") == b"metaranges"]
    compared = 0
    for data in metaranges:
        for range_id, first, last in sstable.metarange_bounds(data):
            assert (first, last) == range_changes.span(files[range_id])
            compared += 1
    assert compared >= 3


class _MetarangeFiles(_Files):
    def __init__(self, files: dict[str, bytes], read: list[str]) -> None:
        super().__init__(files)
        self.read = read

    def read_range(self, range_id: str) -> bytes:
        self.read.append(range_id)
        return super().read_range(range_id)

    def read_metarange(self, metarange_id: str) -> bytes:
        if metarange_id not in self.files:
            from spark_jobs.engine.stores import StorageError  # noqa: PLC0415

            raise StorageError(f"{metarange_id}: no such file")
        return self.files[metarange_id]


def test_dead_ranges_spans_come_from_a_previous_metarange_or_else_from_the_range():
    """A dead range's span is read from a metarange that listed it (as few as cover the dead ones); one that no
    readable metarange lists is read from the range itself, never left without a span."""
    from spark_jobs.engine.reach import lean_mark  # noqa: PLC0415

    files = _fixture_files()
    by_metarange = {m: [r for r, _, _ in sstable.metarange_bounds(d)] for m, d in files.items()
                    if sstable.read_properties(d).get("type") == b"metaranges"}
    listed = sorted({r for rs in by_metarange.values() for r in rs})
    read: list[str] = []

    class Config:
        def open(self):
            return _MetarangeFiles(files, read)

    known = {**by_metarange, "gone": listed[:1]}  # a metarange of the previous run that cannot be read any more
    spans = lean_mark.spans_of(ThreadRunner(2), Config(), dead=listed, new=[], known=known, bounds={},
                               partitions=2)
    assert spans == {r: range_changes.span(files[r]) for r in listed}
    assert read == []  # every span from the metaranges
    spans = lean_mark.spans_of(ThreadRunner(2), Config(), dead=listed[:1], new=[], known={"gone": listed[:1]},
                               bounds={}, partitions=2)
    assert spans == {listed[0]: range_changes.span(files[listed[0]])} and read == listed[:1]


@pytest.mark.parametrize("seed", range(3))
def test_the_compiled_count_is_arrows_group_by(seed, monkeypatch):
    rng = random.Random(seed)
    pool = ranges()
    files = {f"r{i}": rng.choice(pool) for i in range(5)}
    dead = {"r0", "r3"}
    compiled, _ = range_changes.changes(files, dead)
    monkeypatch.setattr(range_changes.range_arrow, "_native", None)
    arrow, _ = range_changes.changes(files, dead)
    assert sorted(compiled) == sorted(arrow)
