"""The in-process dataset backend judges the namespace slice by slice (engine/backends/arrow.py): its plan equals the
per-key plan (core.plan.plan_deletions) over the whole listing, on random keys, slices and kept sets, and a store
that lists a key outside its slice has it judged against every kept key (never deleted while kept)."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pyarrow as pa
import pytest

from spark_jobs.core import columns
from spark_jobs.core.plan import StoredObject, plan_deletions
from spark_jobs.engine.backends.arrow import ArrowBackend
from spark_jobs.engine.listing.arrow import Listing, by_unit
from spark_jobs.engine.listing.incremental import unit_of
from spark_jobs.engine.runtime.parallel import ThreadRunner


class Slices:
    """A namespace that lists fixed objects per slice, in pages of ``page`` (the backend's only use of the store
    here)."""

    def __init__(self, by_slice: dict[str, list[StoredObject]], page: int) -> None:
        self.by_slice, self.page = by_slice, page

    def list_unit_batches(self, unit: str):
        objects = self.by_slice.get(unit, [])
        for at in range(0, len(objects), self.page):
            page = objects[at:at + self.page]
            yield pa.RecordBatch.from_arrays([pa.array([o.key for o in page], pa.string()),
                                              pa.array([o.size for o in page], pa.int64()),
                                              pa.array([o.mtime for o in page], pa.float64())],
                                             schema=columns.LISTING_SCHEMA)


def backend(by_slice: dict[str, list[StoredObject]], threads: int, *, page: int = 1000,
            judge_rows: int = 65_536) -> ArrowBackend:
    ns = Slices(by_slice, page)
    config = SimpleNamespace(open=lambda: SimpleNamespace(ns=ns))
    out = ArrowBackend(ThreadRunner(threads), config)
    out.judge_rows = judge_rows
    return out


def random_key(rnd: random.Random) -> str:
    kind = rnd.random()
    if kind < 0.7:
        return f"data/s{rnd.randint(0, 9)}/{rnd.choice(['a', 'b', 'é', 'x y'])}{rnd.randint(0, 300)}"
    if kind < 0.85:
        return f"legacy{rnd.randint(0, 50)}"
    return rnd.choice(["_lakefs/range", "dummy", "data/", "data/s1/", f"data/odd{rnd.randint(0, 3)}"])


@pytest.mark.parametrize("seed", range(25))
def test_slice_by_slice_equals_the_whole_plan(seed: int) -> None:
    rnd = random.Random(seed)
    objects = {k: StoredObject(k, rnd.randint(0, 10**6), rnd.uniform(0, 100))
               for k in (random_key(rnd) for _ in range(rnd.randint(0, 600)))}
    by_slice: dict[str, list[StoredObject]] = {}
    for o in objects.values():
        by_slice.setdefault(unit_of(o.key), []).append(o)
    kept = [k for k in objects if rnd.random() < 0.5] + [random_key(rnd) for _ in range(40)]
    kept += rnd.sample(kept, min(len(kept), 30))  # repeats, as many ranges hold one key
    cutoff, depth = rnd.uniform(0, 100), rnd.randint(1, 3)
    want, want_summary = plan_deletions(list(objects.values()), set(kept), cutoff, prefix_depth=depth)

    # a slice's pages judged in tables of a few pages (or one), each against the slice's kept keys
    b = backend(by_slice, threads=rnd.choice([1, 3, 8]), page=rnd.choice([1, 7, 1000]),
                judge_rows=rnd.choice([1, 10, 65_536]))
    listed = b.listing(sorted(by_slice))
    half = len(kept) // 2
    deleted, summary = b.judge(listed, [pa.table({"key": pa.array(kept[:half], pa.string())}),
                                        pa.table({"key": pa.array(kept[half:], pa.string())})],
                               cutoff=cutoff, prefix_depth=depth)
    assert deleted.column("address").to_pylist() == sorted(o.key for o in want)
    assert deleted.column("size").to_pylist() == [o.size for o in sorted(want, key=lambda o: o.key)]
    assert (summary.candidates, summary.kept, summary.too_new, summary.deleted, summary.deleted_bytes) == (
        want_summary.candidates, want_summary.kept, want_summary.too_new, want_summary.deleted,
        want_summary.deleted_bytes)
    assert summary.by_prefix == want_summary.by_prefix
    assert b.count(listed) == len(objects)


def test_a_key_listed_outside_its_slice_is_judged_against_every_kept_key() -> None:
    kept_elsewhere = StoredObject("data/s2/kept", 10, 1.0)
    garbage = StoredObject("data/s1/garbage", 5, 1.0)
    # the store put s2's key in s1's listing (in the second page: the first is judged against s1's keys only)
    b = backend({"data/s1/": [StoredObject("data/s1/first", 1, 1.0), garbage, kept_elsewhere]}, threads=2, page=1,
                judge_rows=1)
    deleted, summary = b.judge(Listing(["data/s1/"]), [pa.table({"key": pa.array(["data/s2/kept"], pa.string())})],
                               cutoff=50.0, prefix_depth=2)
    assert deleted.column("address").to_pylist() == ["data/s1/first", "data/s1/garbage"]
    assert summary.kept == 1


def test_by_unit_groups_every_key_once() -> None:
    keys = ["data/b/1", "legacy", "data/a/2", "data/b/3", "data/a/2", "_lakefs/x"]
    got = {u: sorted(a.to_pylist()) for u, a in by_unit(pa.chunked_array([keys[:3], keys[3:]])).items()}
    assert got == {"": ["_lakefs/x", "legacy"], "data/a/": ["data/a/2", "data/a/2"], "data/b/": ["data/b/1", "data/b/3"]}
    assert by_unit(pa.array([], pa.string())) == {}
    assert columns.units_of(pa.array(["data/a/2"])).to_pylist() == ["data/a/"]


def test_all_in_unit_agrees_with_units_of() -> None:
    rnd = random.Random(7)
    keys = [random_key(rnd) for _ in range(300)] + ["data/", "data/s1", "data/s1/", "data//x", "datax/y/z"]
    for unit in ["", "data/s1/", "data/s2/", "data/odd1/", "data//"]:  # what list_units names
        for _ in range(30):
            sample = pa.array(rnd.sample(keys, rnd.randint(0, 4)), pa.string())
            want = all(u == unit for u in columns.units_of(sample).to_pylist())
            assert columns.all_in_unit(sample, unit) == want, (unit, sample)


@pytest.mark.parametrize("seed", range(12))
def test_missed_streams_the_dead_ranges_and_counts_as_the_per_key_rule(seed: int, monkeypatch) -> None:
    """A full run's proof of the incremental rule (``missed``): the deleted objects outside the recent slices and
    neither in a dead range nor carried by the state, the dead ranges read one by one (never one table of keys),
    with many chunks of keys, empty ranges and keys repeated across ranges."""
    from spark_jobs.engine.plan import units  # noqa: PLC0415

    rnd = random.Random(seed)
    deleted_keys = sorted({random_key(rnd) for _ in range(rnd.randint(0, 200))})
    deleted = pa.table({"address": pa.array(deleted_keys, pa.string()),
                        "size": pa.array([rnd.randint(0, 99) for _ in deleted_keys], pa.int64())},
                       schema=columns.PLAN_SCHEMA)
    ranges = {f"r{i}": [k for k in deleted_keys if rnd.random() < 0.1] + [random_key(rnd) for _ in range(20)]
              for i in range(rnd.randint(0, 6))} | {"empty": []}
    dead = sorted(rnd.sample(sorted(ranges), rnd.randint(0, len(ranges))))
    carried = [k for k in deleted_keys if rnd.random() < 0.1] + ["data/never/deleted"]
    carried = carried if rnd.random() < 0.7 else []
    read: list[str] = []

    def range_keys(_ctx, range_id: str) -> pa.RecordBatch:
        read.append(range_id)
        return pa.RecordBatch.from_arrays([pa.array(ranges[range_id], pa.string())], schema=columns.KEYS_SCHEMA)

    monkeypatch.setattr(units, "range_keys", range_keys)
    b = backend({}, threads=rnd.choice([1, 3, 8]))
    recent = {"", *rnd.sample(b.slices_of(deleted), min(2, len(b.slices_of(deleted))))}
    checked = {k for r in dead for k in ranges[r]} | set(carried)
    want = sum(1 for k in deleted_keys if unit_of(k) not in recent and k not in checked)
    assert b.missed(deleted, recent=recent, dead=dead, carried=carried) == want
    outside = any(unit_of(k) not in recent for k in deleted_keys)
    assert sorted(read) == (dead if outside and (dead or carried) else [])  # each dead range once, if needed


@pytest.mark.parametrize("seed", range(8))
def test_the_set_steps_and_the_kept_index_equal_their_per_key_definitions(seed: int) -> None:
    """keys_not_in, count_distinct and the kept index (state/arrow.py) over reached keys in many chunks, with
    repeats, against Python sets and ``kept_index.build`` of the counted hashes."""
    from collections import Counter  # noqa: PLC0415

    from spark_jobs.core import kept_index  # noqa: PLC0415

    rnd = random.Random(seed)
    reached_keys = [random_key(rnd) for _ in range(rnd.randint(0, 400))]
    reached_keys += rnd.sample(reached_keys, min(len(reached_keys), 50))
    cuts = sorted(rnd.sample(range(len(reached_keys) + 1), min(len(reached_keys) + 1, rnd.randint(1, 6))))
    reached = pa.Table.from_batches(
        [pa.RecordBatch.from_arrays([pa.array(reached_keys[a:b], pa.string())], schema=columns.KEYS_SCHEMA)
         for a, b in zip([0, *cuts], [*cuts, len(reached_keys)], strict=True)], schema=columns.KEYS_SCHEMA)
    staged_keys = rnd.sample(reached_keys, min(len(reached_keys), 5)) + [random_key(rnd) for _ in range(8)] * 2
    staged = pa.table({"key": pa.array(staged_keys, pa.string())}, schema=columns.KEYS_SCHEMA)
    b = backend({}, threads=rnd.choice([1, 3, 8]))
    only = set(staged_keys) - set(reached_keys)
    assert b.keys_not_in(staged, reached, most=len(only)) == only
    assert b.keys_not_in(staged, reached, most=len(only) - 1) is None  # more than asked: not made into strings
    assert b.keys_not_in(staged.slice(0, 0), reached, most=0) == set()
    assert b.count_distinct(staged) == len(set(staged_keys))
    want = kept_index.build(Counter(kept_index.key_hash(k) for k in reached_keys))
    assert b.index(reached).equals(want)
