"""core.range_changes: a day's change between dead and new ranges, against the careful decoder's count of every
entry of both sides, on range files a real lakeFS wrote (tests/fixtures/sstables/)."""

from __future__ import annotations

import random
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from spark_jobs.core import range_changes, sstable
from spark_jobs.core.addresses import relative_key

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


@pytest.mark.parametrize("seed", range(6))
def test_the_change_is_the_careful_count_of_both_sides(seed):
    rng = random.Random(seed)
    pool = ranges()
    files, dead = {}, set()
    for i in range(rng.randint(1, 6)):
        files[f"r{i}"] = rng.choice(pool)  # the same file on both sides cancels out by block, unread
        if rng.random() < 0.5:
            dead.add(f"r{i}")
    with ThreadPoolExecutor(2) as pool_:
        found, tally = range_changes.changes(files, dead, map_=pool_.map)
    assert {(a, k): n for a, k, n in found} == reference(files, dead)
    assert len(found) == len({(a, k) for a, k, _ in found})
    assert tally.blocks == sum(sstable.table_info(d)["data_blocks"] for d in files.values())
    assert tally.entries_changed == len(found)


def test_a_range_replaced_by_itself_changes_nothing_and_reads_no_block():
    data = max(ranges(), key=len)
    found, tally = range_changes.changes({"old": data, "new": data}, {"old"})
    assert found == [] and tally.blocks_decoded == 0 and tally.blocks > 1


@pytest.mark.parametrize("seed", range(3))
def test_blocks_whose_keys_collide_are_told_apart_by_their_bytes(seed, monkeypatch):
    """Every block given one key (as if every CRC32C and size agreed): the byte comparison alone must keep the
    change exact."""
    keys_of = range_changes.range_arrow.block_keys

    def colliding(data):
        table, handles, keys = keys_of(data)
        return table, handles, [0] * len(keys)

    monkeypatch.setattr(range_changes.range_arrow, "block_keys", colliding)
    rng = random.Random(seed)
    pool = ranges()
    files = {f"r{i}": rng.choice(pool) for i in range(4)}
    dead = {"r0", "r1"}
    found, _ = range_changes.changes(files, dead)
    assert {(a, k): n for a, k, n in found} == reference(files, dead)


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

    def read_range(self, range_id: str) -> bytes:
        return self.files[range_id]


class _Config:
    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files

    def open(self) -> _Files:
        return _Files(self.files)


@pytest.mark.parametrize("few", [64, 0])
def test_the_engine_finds_the_same_change_on_the_driver_and_in_groups(few, monkeypatch):
    """A day's few ranges are compared on the driver; many go to the runner in groups of overlapping spans: the
    kept index's change is the same either way."""
    from spark_jobs.core import kept_index  # noqa: PLC0415
    from spark_jobs.engine.reach import lean_mark  # noqa: PLC0415
    from spark_jobs.engine.runtime.parallel import ThreadRunner  # noqa: PLC0415

    monkeypatch.setattr(lean_mark, "FEW_UNITS", few)
    rng = random.Random(7)
    pool = ranges()
    files = {f"r{i}": rng.choice(pool) for i in range(8)}
    dead, new = ["r0", "r1", "r2"], ["r3", "r4", "r5", "r6", "r7"]
    tally: dict[str, int] = {}
    delta, gone = lean_mark.changed_blocks(ThreadRunner(3), _Config(files), dead=dead, new=new, prefixes=(),
                                           partitions=3, tally=tally)
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
