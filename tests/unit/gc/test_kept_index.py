"""The kept index: counts per key of the live ranges' entries, brought up to date by what died and what appeared,
against a brute-force recount of random histories."""

from __future__ import annotations

import random

import pytest

from spark_jobs.core import kept_index as ki
from spark_jobs.core.incremental import State, decode, encode, metarange_indices, units_of


def range_counts(keys: list[str]) -> dict[int, int]:
    """hash -> how many entries of one range point at the key."""
    out: dict[int, int] = {}
    for key in keys:
        out[ki.key_hash(key)] = out.get(ki.key_hash(key), 0) + 1
    return out


def delta_of(dead: list[dict[int, int]], new: list[dict[int, int]]) -> dict[int, int]:
    """The change of count from the ranges that died and those that appeared (what the lean mark computes)."""
    out: dict[int, int] = {}
    for counts, sign in [(c, -1) for c in dead] + [(c, 1) for c in new]:
        for h, n in counts.items():
            out[h] = out.get(h, 0) + sign * n
    return {h: n for h, n in out.items() if n}


def recount(ranges: dict[str, list[str]], live: set[str]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for r in live:
        for h, n in range_counts(ranges[r]).items():
            counts[h] = counts.get(h, 0) + n
    return counts


def as_dict(index) -> dict[int, int]:
    return dict(zip(index["hash"].to_pylist(), index["count"].to_pylist(), strict=True))


@pytest.mark.parametrize("seed", range(20))
def test_updating_the_index_equals_recounting(seed):
    rng = random.Random(seed)
    keys = [f"data/s{rng.randrange(5)}/k{i}" for i in range(60)]
    # range versions share most of their entries, as lakeFS's do
    ranges = {f"r{i}": sorted(set(rng.sample(keys, rng.randint(1, 15)))) for i in range(30)}
    live = set(rng.sample(sorted(ranges), 8))
    index = ki.decode(ki.encode(ki.build(recount(ranges, live))))
    for _ in range(15):
        now = set(rng.sample(sorted(ranges), rng.randint(0, 12)))
        dead, new = live - now, now - live
        index = ki.apply(index, delta_of([range_counts(ranges[r]) for r in sorted(dead)],
                                            [range_counts(ranges[r]) for r in sorted(new)]))
        live = now
        assert as_dict(index) == recount(ranges, live)
        reached = {k for r in live for k in ranges[r]}
        held = ki.holds(index, [ki.key_hash(k) for k in keys])
        assert {k for k in keys if ki.key_hash(k) in held} == reached
        assert index["hash"].to_pylist() == sorted(index["hash"].to_pylist())


def test_subtracting_what_was_never_counted_is_an_error_not_a_guess():
    index = ki.build(range_counts(["a", "b"]))
    with pytest.raises(ki.IndexError_):
        ki.apply(index, delta_of([range_counts(["a", "c"])], []))


def test_an_index_out_of_order_is_refused():
    """Lookups binary-search the hashes: an index out of order (or with a hash twice) could hide a held key."""
    import pyarrow as pa  # noqa: PLC0415

    schema = ki.build({}).schema
    for hashes in ([5, 3], [3, 3]):
        table = pa.table([pa.array(hashes, pa.uint64()), pa.array([1, 1], pa.int64())], schema=schema)
        with pytest.raises(ki.IndexError_, match="not in order"):
            ki.decode(ki.encode(table))


def test_a_count_below_zero_is_an_error_on_a_known_key_too():
    index = ki.build(range_counts(["a", "b"]))
    with pytest.raises(ki.IndexError_):
        ki.apply(index, {ki.key_hash("a"): -2})
    assert as_dict(ki.apply(index, {ki.key_hash("a"): -1})) == {ki.key_hash("b"): 1}
    assert ki.holds(ki.empty(), [1, 2]) == set()


def test_a_damaged_index_is_refused():
    data = ki.encode(ki.build(range_counts(["a", "b", "b"])))
    assert as_dict(ki.decode(data)) == {ki.key_hash("a"): 1, ki.key_hash("b"): 2}
    for bad in (data[:-9], b"not parquet", ki.encode(ki.build({}))[:20]):
        with pytest.raises(ki.IndexError_):
            ki.decode(bad)


def test_the_state_keeps_the_retained_metaranges_ranges():
    from datetime import UTC, datetime  # noqa: PLC0415

    now = datetime(2026, 11, 26, tzinfo=UTC)
    units = units_of([("r1", ()), ("r2", ()), ("r3", ())])
    mapping = {"m1": ["r1", "r2"], "m2": ["r2", "r3"]}
    state = State(repository_id="x", namespace="local://x", run_id="1", horizon=now, listed_at=now,
                  full_listing_at=now, units=units, metaranges=metarange_indices(mapping, ["r1", "r2", "r3"]),
                  index_sha256="ab", index_slot="a", index_keys=3, key_prefixes=("local:///tmp/x",))
    back = decode(encode(state))
    assert back == state and back.metarange_ranges() == mapping
