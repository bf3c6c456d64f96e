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

    from spark_jobs.engine.state import incremental as inc  # noqa: PLC0415
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


@pytest.mark.parametrize("gap", [0, 256 * 1024], ids=["request-a-run", "read-through-gaps"])
@pytest.mark.parametrize("seed", range(12))
def test_a_base_read_in_blocks_and_its_delta_answer_as_a_recount(seed, gap, tmp_path, monkeypatch):
    """Counts read through the base's blocks plus the delta equal a recount of the live ranges, whatever keys are
    asked (present, absent, beyond either end), and only the blocks that can hold them are read (each run of
    neighbours in a request, or the gaps between them read through)."""
    from spark_jobs.engine.state import incremental as inc  # noqa: PLC0415

    monkeypatch.setattr(ki, "BLOCK", 7)  # many blocks from few keys
    monkeypatch.setattr(inc, "GAP_BYTES", gap)
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
    assert 0 < index.blocks_read <= len(index.single.head.firsts)


def test_blocks_are_read_in_runs_through_small_gaps_and_never_past_a_runs_limit(monkeypatch):
    from spark_jobs.engine.state import incremental as inc  # noqa: PLC0415

    monkeypatch.setattr(ki, "BLOCK", 4)
    base = ki.encode_base(ki.build({h: 1 for h in range(1, 4 * 40, 1)}))
    head = ki.decode_head(base[:ki.head_size(base)])
    block_bytes = head.span(0, 0)[1] - head.span(0, 0)[0]
    monkeypatch.setattr(inc, "GAP_BYTES", 2 * block_bytes)
    monkeypatch.setattr(inc, "READ_RUN", 10 * block_bytes)
    # 0-1 neighbours; 4 after a gap of 2 blocks (read through); 8 after a gap of 3 (a request of its own); 9-20: the
    # run reaches READ_RUN at 17, 18 starts another
    wanted = [0, 1, 4, 8, 9, 12, 15, 17, 18, 20]
    assert inc.read_runs(head, wanted) == [(0, 4, [0, 1, 4]), (8, 17, [8, 9, 12, 15, 17]), (18, 20, [18, 20])]
    monkeypatch.setattr(inc, "GAP_BYTES", 0)
    assert [(f, la) for f, la, _ in inc.read_runs(head, wanted)] == [(0, 1), (4, 4), (8, 9), (12, 12), (15, 15),
                                                                     (17, 18), (20, 20)]


def test_a_damaged_or_mismatched_base_is_refused(tmp_path):
    from dataclasses import replace  # noqa: PLC0415

    from spark_jobs.engine.state import incremental as inc  # noqa: PLC0415

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
    from spark_jobs.engine.state import incremental as inc  # noqa: PLC0415

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


def parted(tmp_path, counts: dict[int, int], bits: int, delta: dict[int, int] | None = None):
    """A base written in 2**bits parts (as a full run writes it) and the state that names them."""
    from spark_jobs.engine.state import incremental as inc  # noqa: PLC0415
    from spark_jobs.engine.stores import StorageConfig, open_namespace  # noqa: PLC0415

    ns = open_namespace(StorageConfig("local://ns", str(tmp_path)))
    parts = inc.write_index_parts(ns, "run-1", ki.build(counts), bits=bits)
    assert [p["part"] for p in parts] == list(range(1 << bits))
    assert sum(p["keys"] for p in parts) == len({h for h, n in counts.items() if n > 0})
    inc.write_pending(ns, "run-1", _state(), index_parts=parts)
    from spark_jobs.core import report  # noqa: PLC0415

    state = decode(ns.read(report.pending_state_key("run-1")))
    if delta is not None:
        import hashlib  # noqa: PLC0415
        from dataclasses import replace  # noqa: PLC0415

        data = ki.encode_delta(delta)
        ns.write(inc.delta_key("b"), data)
        state = replace(state, delta_sha256=hashlib.sha256(data).hexdigest(), delta_slot="b")
    return ns, state


@pytest.mark.parametrize("seed", range(12))
def test_a_base_in_parts_answers_as_a_recount(seed, tmp_path, monkeypatch):
    """A base cut into parts by the top bits of the hash (as executors write it) answers every lookup as the
    recount does, reading only the parts (and blocks) that hold the keys asked for."""
    from spark_jobs.engine.state import incremental as inc  # noqa: PLC0415

    monkeypatch.setattr(ki, "BLOCK", 5)
    rng = random.Random(seed)
    keys = [f"data/s{rng.randrange(5)}/k{i}" for i in range(400)]
    ranges = {f"r{i}": sorted(set(rng.sample(keys, rng.randint(1, 60)))) for i in range(30)}
    live = set(rng.sample(sorted(ranges), 8))
    now = set(rng.sample(sorted(ranges), rng.randint(1, 12)))
    delta = delta_of([range_counts(ranges[r]) for r in sorted(live - now)],
                     [range_counts(ranges[r]) for r in sorted(now - live)])
    bits = rng.choice([0, 1, 2, 3, 6])
    ns, state = parted(tmp_path, recount(ranges, live), bits, delta)
    assert len(state.index_parts) == 1 << bits and state.index_run == "run-1"
    index, why = inc.read_index(ns, state)
    assert why is None and index is not None and not index.parts  # no part read before a lookup
    asked = rng.sample(sorted({ki.key_hash(k) for k in keys}), 30) + [0, 2**64 - 1, 2**63, 2**63 - 1]
    want = recount(ranges, now)
    assert index.counts(asked) == {h: want.get(h, 0) for h in asked}
    assert set(index.parts) == set(ki.part_numbers(__import__("numpy").array(asked, "uint64"), bits).tolist())
    # looked up by a runner of its own (Spark's executors), a few keys a unit: the same counts, the blocks counted
    assert _on_a_runner(ns, state, asked, monkeypatch) == {h: want.get(h, 0) for h in asked}


def _on_a_runner(ns, state, asked, monkeypatch):
    from types import SimpleNamespace  # noqa: PLC0415

    from spark_jobs.engine.runtime.parallel import ThreadRunner  # noqa: PLC0415
    from spark_jobs.engine.state import incremental as inc  # noqa: PLC0415
    from spark_jobs.engine.state import index_lookup  # noqa: PLC0415

    class Elsewhere(ThreadRunner):
        in_process = False

    class Config:
        def open(self):
            return SimpleNamespace(ns=ns)

    monkeypatch.setattr(index_lookup, "DRIVER_KEYS", 0)
    monkeypatch.setattr(index_lookup, "UNIT_KEYS", 3)
    index = inc.read_index(ns, state)[0]
    out = index_lookup.counts(index, asked, runner=Elsewhere(3), config=Config(), partitions=3)
    assert not index.parts and index.blocks_read > 0  # no part opened on the driver
    return out


def test_parts_split_by_the_top_bits_and_size_follows_the_keys():
    assert [ki.part_bits(n, per_part=100) for n in (0, 100, 101, 400, 401)] == [0, 0, 1, 2, 3]
    assert ki.part_bits(10**12, per_part=1) == ki.MAX_PART_BITS
    assert ki.part_numbers(__import__("numpy").array([0, 2**62, 2**63, 2**64 - 1], "uint64"), 2).tolist() == [0, 1, 2, 3]
    table = ki.build({1: 1, 2**62: 2, 2**63 + 5: 1, 2**64 - 1: 4})
    assert [len(t) for t in ki.split_parts(table, 2)] == [1, 1, 1, 1]
    assert [len(t) for t in ki.split_parts(table, 3)] == [1, 0, 1, 0, 1, 0, 0, 1]
    for bad in (0, 3, 6, (1 << ki.MAX_PART_BITS) + 1):
        with pytest.raises(ki.IndexError_):
            ki.bits_of(bad)


def test_a_missing_damaged_or_misplaced_part_is_refused_at_lookup(tmp_path):
    from spark_jobs.core import report  # noqa: PLC0415
    from spark_jobs.engine.state import incremental as inc  # noqa: PLC0415

    counts = range_counts([f"k{i}" for i in range(3000)])
    ns, state = parted(tmp_path, counts, 2)
    asked = list(counts)
    part2 = tmp_path / "ns" / report.index_part_key("run-1", 2)
    whole = part2.read_bytes()
    part2.unlink()
    index, why = inc.read_index(ns, state)
    assert why is None
    with pytest.raises(ki.IndexError_, match="unreadable"):
        index.counts(asked)
    part2.write_bytes(whole[:-16])
    with pytest.raises(ki.IndexError_, match="truncated"):
        inc.read_index(ns, state)[0].counts(asked)
    raw = bytearray(whole)
    raw[-3] ^= 1
    part2.write_bytes(bytes(raw))
    with pytest.raises(ki.IndexError_, match="checksum"):
        inc.read_index(ns, state)[0].counts(asked)
    # part 1's file where part 2's should be, its digest named for it too: its hashes are not part 2's share
    from dataclasses import replace  # noqa: PLC0415

    part2.write_bytes((tmp_path / "ns" / report.index_part_key("run-1", 1)).read_bytes())
    moved = replace(state, index_parts=(*state.index_parts[:2], state.index_parts[1], state.index_parts[3]))
    with pytest.raises(ki.IndexError_, match="outside its share"):
        inc.read_index(ns, moved)[0].counts(asked)
    assert "parts" in inc.read_index(ns, replace(state, index_parts=state.index_parts[:3]))[1]


def test_a_state_with_parts_survives_encoding_and_an_older_state_reads_without_them():
    import json  # noqa: PLC0415
    from dataclasses import replace  # noqa: PLC0415

    state = replace(_state(), index_sha256="ab", index_parts=("a" * 64, "b" * 64), index_run="run-9")
    assert decode(encode(state)) == state
    import gzip  # noqa: PLC0415
    import hashlib  # noqa: PLC0415

    outer = json.loads(gzip.decompress(encode(_state())))
    body = json.loads(outer["state"])
    del body["index_parts"], body["index_run"]
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    old = gzip.compress(json.dumps({"sha256": hashlib.sha256(text.encode()).hexdigest(), "state": text}).encode())
    assert decode(old).index_parts == () and decode(old).index_run == ""
