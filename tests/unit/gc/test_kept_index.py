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


def stored(tmp_path, counts: dict[int, int], delta: dict[int, int] | None = None):
    """A base (and delta) written to a local namespace and read back as an incremental run reads them."""
    import hashlib  # noqa: PLC0415
    from dataclasses import replace  # noqa: PLC0415

    from spark_jobs.engine import incremental as inc  # noqa: PLC0415
    from spark_jobs.engine.stores import StorageConfig, open_namespace  # noqa: PLC0415

    ns = open_namespace(StorageConfig("local://ns", str(tmp_path)))
    base = ki.encode_base(ki.build(counts))
    ns.write(inc.index_key("a"), base)
    state = _state()
    state = replace(state, index_sha256=hashlib.sha256(base[:ki.head_size(base)]).hexdigest(), index_slot="a")
    if delta is not None:
        data = ki.encode_delta(delta)
        ns.write(inc.delta_key("b"), data)
        state = replace(state, delta_sha256=hashlib.sha256(data).hexdigest(), delta_slot="b")
    return ns, state


def _state():
    from datetime import UTC, datetime  # noqa: PLC0415

    when = datetime(2026, 11, 20, tzinfo=UTC)
    return State(repository_id="r", namespace="local://ns", run_id="x", horizon=when, listed_at=when,
                 full_listing_at=when)


@pytest.mark.parametrize("seed", range(12))
def test_a_base_read_in_blocks_and_its_delta_answer_as_a_recount(seed, tmp_path, monkeypatch):
    """Counts read through the base's blocks plus the delta equal a recount of the live ranges, whatever keys are
    asked (present, absent, beyond either end), and only the blocks that can hold them are read."""
    from spark_jobs.engine import incremental as inc  # noqa: PLC0415

    monkeypatch.setattr(ki, "BLOCK", 7)  # many blocks from few keys
    rng = random.Random(seed)
    keys = [f"data/s{rng.randrange(5)}/k{i}" for i in range(300)]
    ranges = {f"r{i}": sorted(set(rng.sample(keys, rng.randint(1, 60)))) for i in range(30)}
    live = set(rng.sample(sorted(ranges), 8))
    base_counts = recount(ranges, live)
    now = set(rng.sample(sorted(ranges), rng.randint(1, 12)))
    delta = delta_of([range_counts(ranges[r]) for r in sorted(live - now)],
                     [range_counts(ranges[r]) for r in sorted(now - live)])
    ns, state = stored(tmp_path, base_counts, delta)
    index, why = inc.read_index(ns, state)
    assert why is None and index is not None
    asked = rng.sample(sorted({ki.key_hash(k) for k in keys}), 40) + [0, 2**64 - 1, 12345]
    want = recount(ranges, now)
    assert index.counts(asked) == {h: want.get(h, 0) for h in asked}
    assert 0 < index.blocks_read <= len(index.head.firsts)


def test_a_damaged_or_mismatched_base_is_refused(tmp_path):
    from dataclasses import replace  # noqa: PLC0415

    from spark_jobs.engine import incremental as inc  # noqa: PLC0415

    counts = range_counts([f"k{i}" for i in range(10000)])
    ns, state = stored(tmp_path, counts)
    path = tmp_path / "ns" / inc.index_key("a")
    whole = path.read_bytes()
    path.write_bytes(whole[:-7])  # truncated
    assert "truncated" in inc.read_index(ns, state)[1]
    raw = bytearray(whole)
    raw[-100] ^= 1  # a flipped bit in the last block: found when that block is read
    path.write_bytes(bytes(raw))
    index, why = inc.read_index(ns, state)
    assert why is None
    with pytest.raises(ki.IndexError_, match="checksum"):
        index.counts(list(counts))
    assert "not the one it names" in inc.read_index(ns, replace(state, index_sha256="0" * 64))[1]
    path.write_bytes(b"not an index at all")
    assert "kept index" in inc.read_index(ns, state)[1]
    ns, state = stored(tmp_path / "2", counts, {1: 1})
    (tmp_path / "2" / "ns" / inc.delta_key("b")).write_bytes(ki.encode_delta({1: 2}))
    assert "delta is not the one it names" in inc.read_index(ns, state)[1]


def test_a_delta_that_takes_a_key_below_zero_is_an_error_not_a_guess(tmp_path):
    from spark_jobs.engine import incremental as inc  # noqa: PLC0415

    ns, state = stored(tmp_path, range_counts(["a", "b"]), {ki.key_hash("a"): -2})
    index, why = inc.read_index(ns, state)
    with pytest.raises(ki.IndexError_):
        index.counts([ki.key_hash("a")])
    assert index.counts([ki.key_hash("b")]) == {ki.key_hash("b"): 1}


def test_deltas_and_heads_refuse_what_they_cannot_trust():
    assert ki.decode_delta(ki.encode_delta({5: -1, 3: 2, 9: 0})) == {3: 2, 5: -1}
    for bad in (b"", b"LJKD", ki.encode_delta({1: 1})[:-1], b"LJKB" + bytes(40)):
        with pytest.raises(ki.IndexError_):
            ki.decode_delta(bad)
    base = ki.encode_base(ki.build({1: 1, 2: 3}))
    head = base[:ki.head_size(base)]
    assert ki.decode_head(head).keys == 2
    for bad in (b"", head[:-1], b"LJKD" + head[4:]):
        with pytest.raises(ki.IndexError_):
            ki.decode_head(bad)
    empty = ki.encode_base(ki.build({}))
    assert ki.decode_head(empty[:ki.head_size(empty)]).blocks_of(__import__("numpy").array([1], "uint64")) == []


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
