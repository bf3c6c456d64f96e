"""The mark cache's pure parts: its encoding, what it trusts, what it keeps, and the summary line."""

from __future__ import annotations

import json
import random
import threading

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_jobs.core import sstable
from spark_jobs.core.addresses import FULL, RELATIVE, key_mapper, relative_key
from spark_jobs.core.cache_segments import check_file, check_pointer, described, packed, pointer, unpacked
from spark_jobs.core.mark_cache import CacheError, Memory, _schemas, decode, encode, merged, plan_save, trusted
from spark_jobs.core.report import describe_cache
from spark_jobs.engine.runtime.parallel import in_background
from tests.unit.gc.test_sstable import FIXTURES


def memory() -> Memory:
    return Memory.of(metaranges={"m1": (100, ((b"a", "r1"), (b"k", "r2")))},
                     ranges={"r1": (10, (b"d1", b"d2")), "r2": (20, (b"d2",)), "r3": (30, (b"d3",))},
                     blocks={b"d1": [(b"a/x", "data/1", 1)],
                             b"d2": [(b"k/y", "s3://b/ns/data/2", 2), (b"k/z", "d/3", 1)],
                             b"d3": [(b"q", "data/9", 1)]})


def test_encode_decode_round_trip():
    assert decode(encode(memory())) == memory()
    assert decode(encode(Memory())) == Memory()


def test_subset_keeps_only_what_the_run_used():
    kept = memory().subset(["m1"], ["r1", "r2", "gone"])
    assert set(kept.ranges) == {"r1", "r2"} and set(kept.blocks) == {b"d1", b"d2"} and set(kept.metaranges) == {"m1"}


def test_trusted_drops_entries_whose_file_changed_or_is_gone():
    sizes = {"m1": 100, "r1": 10, "r2": 21}  # r2 changed size, r3 is gone
    kept, dropped = trusted(memory(), sizes)
    assert set(kept.ranges) == {"r1"} and set(kept.metaranges) == {"m1"} and dropped == 2
    partial = memory()
    del partial.blocks[b"d2"]
    assert set(trusted(partial, {"r1": 10, "r2": 20})[0].ranges) == set()


def test_pointer_checks():
    files = encode(memory())
    raw = pointer([described(files)], slot="a", repository_id="r", namespace="s3://b/ns", run_id="x")
    doc = check_pointer(raw, repository_id="r", namespace="s3://b/ns")
    for name, data in files.items():
        check_file(name, data, doc["segments"][0][name])
    with pytest.raises(CacheError, match="torn or altered"):
        check_file("ranges.parquet", files["ranges.parquet"][:-1], doc["segments"][0]["ranges.parquet"])
    for bad in (b"{", b"[]", json.dumps({**doc, "format": 0}).encode(), json.dumps({**doc, "slot": "c"}).encode(),
                json.dumps({**doc, "segments": []}).encode(), json.dumps({**doc, "segments": doc["segments"] * 9}).encode(),
                json.dumps({**doc, "segments": [{"spans.parquet": doc["segments"][0]["spans.parquet"]}]}).encode(),
                json.dumps({**doc, "segments": doc["segments"][0]}).encode()):
        with pytest.raises(CacheError):
            check_pointer(bad, repository_id="r", namespace="s3://b/ns")
    with pytest.raises(CacheError, match="not this repository"):
        check_pointer(raw, repository_id="other", namespace="s3://b/ns")


def test_decode_refuses_another_schema_or_garbage():
    files = encode(memory())
    with pytest.raises(CacheError, match="schema"):
        decode({**files, "blocks.parquet": files["ranges.parquet"]})
    with pytest.raises(CacheError, match="unreadable"):
        decode({**files, "ranges.parquet": b"PAR1 garbage"})


def test_range_blocks_hold_exactly_the_range_entries():
    checked = 0
    for path in sorted(FIXTURES.glob("*.sst")):
        data = path.read_bytes()
        if sstable.read_properties(data).get("type") != b"ranges":
            continue
        seen: set[bytes] = set()
        digests, new = sstable.range_blocks(data, seen_blocks=seen)
        assert [d for d, _ in new] == list(dict.fromkeys(digests)) and seen == set(digests)
        assert [e for _, es in new for e in es] == sstable.range_entries(data)
        again, none = sstable.range_blocks(data, seen_blocks=seen)
        assert again == digests and none == []
        checked += 1
    assert checked


def test_describe_cache():
    assert describe_cache({}) == ""
    assert "off" in describe_cache({"state": "off"})
    line = describe_cache({"state": "used", "ranges_cached": 3, "ranges_read": 1, "metaranges_cached": 1,
                           "metaranges_read": 0, "stale_entries": 1, "written": True})
    assert line.startswith("mark cache: 3 ranges and 1 metaranges from the cache") and "1 stale" in line
    assert "ignored: torn" in describe_cache({"state": "ignored", "reason": "torn", "written": False})
    assert describe_cache({"state": "used", "written": True, "write": "appended"}).endswith(
        "; what was read is appended to the cache")
    assert describe_cache({"state": "used", "written": True, "write": "unchanged"}).endswith("the cache is unchanged")
    assert "was not written" in describe_cache({"state": "used", "written": False})


def test_trusted_never_takes_an_empty_size_for_a_file_that_is_gone():
    gone = Memory.of(metaranges={"m9": (None, ())}, ranges={"r9": (None, ())}, blocks={})
    kept, dropped = trusted(gone, {})
    assert kept.metaranges == {} and kept.ranges == {} and dropped == 2


def test_decode_refuses_empty_values():
    files = encode(memory())
    for name, row in (("ranges.parquet", {"range_id": ["r9"], "size": [None], "blocks": [[b"d1"]]}),
                      ("metaranges.parquet", {"metarange_id": ["m9"], "size": [1], "spans": [[None]]}),
                      ("spans.parquet", {"first_key": [b"a"], "range_id": [None]}),
                      ("blocks.parquet", {"block": [b"d1"], "paths": [[b"a/x"]], "addresses": [[None]],
                                          "address_types": [[1]]})):
        out = pa.BufferOutputStream()
        pq.write_table(pa.Table.from_pydict(row, schema=_schemas()[name]), out)
        with pytest.raises(CacheError, match="empty values"):
            decode({**files, name: out.getvalue().to_pybytes()})


def test_metarange_spans_are_metarange_ranges_first_keys_and_ids():
    checked = 0
    for path in sorted(FIXTURES.glob("*.sst")):
        data = path.read_bytes()
        if sstable.read_properties(data).get("type") != b"metaranges":
            continue
        assert sstable.metarange_spans(data) == [(r.min_key, r.range_id) for r in sstable.metarange_ranges(data)]
        checked += 1
    assert checked


def test_metaranges_decoded_with_shared_blocks_are_decoded_as_alone():
    """metarange_spans with seen_blocks (each distinct block decoded once across metaranges) gives what it gives
    without, whatever the order the metaranges come in; a block is reused only for the same bytes."""
    metaranges = [p.read_bytes() for p in sorted(FIXTURES.glob("*.sst"))
                  if sstable.read_properties(p.read_bytes()).get("type") == b"metaranges"]
    assert len(metaranges) >= 2
    alone = [sstable.metarange_spans(data) for data in metaranges]
    rng = random.Random(11)
    for _ in range(20):
        seen: dict = {}
        order = [rng.randrange(len(metaranges)) for _ in range(rng.randrange(1, 3 * len(metaranges)))]
        for i in order:
            assert sstable.metarange_spans(metaranges[i], seen_blocks=seen) == alone[i]
        assert seen
    # a block reused by digest is the same bytes: a metarange whose block differs is decoded, not taken from seen
    seen = {}
    sstable.metarange_spans(metaranges[0], seen_blocks=seen)
    poisoned = {digest: [(b"not", "this")] * len(spans) for digest, spans in seen.items()}
    other = {**poisoned}
    assert sstable.metarange_spans(metaranges[0], seen_blocks=other) != alone[0]  # seen is what is used...
    fresh = {b"\x00" * 16: [(b"not", "this")]}
    assert sstable.metarange_spans(metaranges[0], seen_blocks=fresh) == alone[0]  # ...only for its own digest


def test_range_min_key_reads_the_usual_record_or_leaves_it_to_the_full_decode():
    rng = random.Random(5)

    def field(num: int, wire: int, body: bytes) -> bytes:
        return bytes([num << 3 | wire]) + body

    for _ in range(3000):
        parts = []
        for _ in range(rng.randrange(6)):
            num = rng.choice((1, 2, 3, 4, 5))
            if rng.random() < 0.8 and num in (1, 2):
                value = rng.randbytes(rng.choice((0, 3, 127, 128, 300)))
                parts.append(field(num, 2, _uvarint(len(value))) + value)
            else:
                parts.append(field(num, 0, _uvarint(rng.choice((0, 1, 300, 2**63, 2**64 - 1, 2**70)))))
        payload = b"".join(parts)
        if rng.random() < 0.1 and payload:
            payload = payload[:rng.randrange(len(payload))]
        try:
            expected = sstable.decode_range_data("r", payload).min_key
        except sstable.SSTableError:
            expected = None
        fast = sstable._range_min_key(payload)
        if fast is not None:
            assert fast == expected, payload


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        if n < 0x80:
            return bytes(out + bytes([n]))
        out.append(n & 0x7F | 0x80)
        n >>= 7


def _replaced(files: dict, name: str, row: dict) -> dict:
    out = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pydict(row, schema=_schemas()[name]), out)
    return {**files, name: out.getvalue().to_pybytes()}


def test_decode_refuses_spans_it_does_not_hold_and_uneven_blocks():
    files = encode(memory())
    for index in (2, -1):  # memory() has two distinct spans
        with pytest.raises(CacheError, match="beyond"):
            decode(_replaced(files, "metaranges.parquet", {"metarange_id": ["m1"], "size": [100], "spans": [[0, index]]}))
    with pytest.raises(CacheError, match="address types"):
        decode(_replaced(files, "blocks.parquet", {"block": [b"d1"], "paths": [[b"a/x", b"a/y"]],
                                                  "addresses": [["data/1"]], "address_types": [[1]]}))


def test_metaranges_share_their_spans_in_the_file():
    spans = tuple((f"k{i:04d}".encode(), f"r{i}") for i in range(300))
    many = Memory.of(metaranges={f"m{i}": (i, spans[:i]) for i in range(300)})
    files = encode(many)
    assert pq.read_table(pa.BufferReader(files["spans.parquet"])).num_rows == 299
    assert decode(files) == many


def test_a_format_1_pointer_is_refused():
    raw = pointer([described(encode(memory()))], slot="a", repository_id="r", namespace="s3://b/ns", run_id="x")
    doc = json.loads(raw)
    for old in (1, 2):
        with pytest.raises(CacheError, match=f"format {old}"):
            check_pointer(json.dumps({**doc, "format": old}).encode(), repository_id="r", namespace="s3://b/ns")
    # format 2's pointer: one segment's files at the top level
    two = {k: v for k, v in doc.items() if k != "segments"} | {"files": doc["segments"][0], "format": 3}
    with pytest.raises(CacheError, match="does not name its files"):
        check_pointer(json.dumps(two).encode(), repository_id="r", namespace="s3://b/ns")


def test_key_mapper_is_relative_key():
    for prefixes in (("s3://bucket/repo",), ("s3a://bucket/repo/",), ("local://ns", "local:///srv/block/ns"), ()):
        key = key_mapper(prefixes)
        for address in ("data/g/x", "/data/g/x", "s3://bucket/repo/data/g/x", "s3a://bucket/repo/data/x",
                        "s3://bucket/repo-other/data/x", "s3://bucket/repo", "s3://bucket/repo/", "local://ns/data/y",
                        "local:///srv/block/ns/data/z", "local:///srv/block/ns2/z", "s3://imports/x", ""):
            for kind in (0, RELATIVE, FULL):
                assert key(address, kind) == relative_key(address, kind, prefixes), (prefixes, address, kind)


def test_blocks_read_from_the_cache_are_written_back_with_the_new_ones():
    read = decode(encode(memory()))
    assert read.stored_blocks is not None
    read.ranges["r4"] = (40, (b"d0", b"d9"))
    read.blocks[b"d0"] = [(b"n/0", "data/n0", 1)]
    read.blocks[b"d9"] = [(b"n/9", "s3://b/ns/data/n9", 2), (b"n/9b", "data/n9b", 1)]
    kept = read.subset(["m1"], ["r2", "r4"])  # d1 and d3 go
    expected = Memory.of({m: (v[0], kept.spans_of(m)) for m, v in kept.metaranges.items()}, kept.ranges,
                         {d: kept.blocks[d] for d in kept.blocks})
    assert expected.stored_blocks is None and set(kept.blocks) == {b"d0", b"d2", b"d9"}
    files = encode(kept)
    assert decode(files) == expected
    table = pq.read_table(pa.BufferReader(files["blocks.parquet"]))
    assert table.equals(pq.read_table(pa.BufferReader(encode(expected)["blocks.parquet"])))
    assert decode(encode(decode(files))) == expected


def test_random_memories_survive_subset_encode_and_decode():
    rng = random.Random(15)
    for _ in range(200):
        pool = [(rng.randbytes(rng.randrange(4)), f"r{rng.randrange(40)}") for _ in range(rng.randrange(1, 60))]
        listed = {f"m{i}": (rng.randrange(1000), sorted(rng.sample(pool, rng.randrange(len(pool) + 1))))
                  for i in range(rng.randrange(12))}
        whole = Memory.of(listed)
        assert all(whole.spans_of(m) == tuple(spans) for m, (_, spans) in listed.items())
        kept = whole.subset(rng.sample(sorted(listed), rng.randrange(len(listed) + 1)), [])
        back = decode(encode(kept))
        assert back == kept and back == Memory.of({m: listed[m] for m in kept.metaranges})
        stored = pq.read_table(pa.BufferReader(encode(kept)["spans.parquet"])).num_rows
        assert stored == len({s for m in kept.metaranges for s in listed[m][1]})  # spans no one lists are gone
        some = rng.sample(sorted(kept.metaranges), min(3, len(kept.metaranges)))
        assert sorted(back.distinct_spans(some)) == sorted({s for m in some for s in listed[m][1]})


def _decoded_segments(*memories: Memory) -> Memory:
    parts, spans = [], 0
    for m in memories:
        parts.append(decode(encode(m), span_offset=spans))
        spans += len(parts[-1].spans)
    return merged(parts)


def test_segments_decode_to_what_was_stored():
    """A cache of segments reads back as one Memory; a later segment's entry wins (a file read again)."""
    spans = tuple((f"k{i:03d}".encode(), f"r{i}") for i in range(40))
    first = Memory.of(metaranges={f"m{i}": (i, spans[:i]) for i in range(1, 20)},
                      ranges={"r1": (10, (b"d1",)), "r2": (20, (b"d2",))},
                      blocks={b"d1": [(b"a", "data/1", 1)], b"d2": [(b"b", "data/2", 1)]})
    second = Memory.of(metaranges={f"m{i}": (i, spans[i - 5:i]) for i in range(20, 40)},
                       ranges={"r3": (30, (b"d2", b"d3")), "r1": (11, (b"d1",))},
                       blocks={b"d3": [(b"c", "data/3", 2)]})
    # m1 read again (its entry had gone stale): other spans and size, numbered anew in the third segment, one of
    # them new and not its segment's first
    third = Memory.of(metaranges={"m1": (101, (spans[7], (b"new", "r-new"), spans[3]))})
    got = _decoded_segments(first, second, third)
    expected = Memory.of(metaranges={**{m: (v[0], first.spans_of(m)) for m, v in first.metaranges.items()},
                                     **{m: (v[0], second.spans_of(m)) for m, v in second.metaranges.items()},
                                     "m1": (101, (spans[7], (b"new", "r-new"), spans[3]))},
                         ranges={"r1": (11, (b"d1",)), "r2": (20, (b"d2",)), "r3": (30, (b"d2", b"d3"))},
                         blocks={**first.blocks, **second.blocks})
    assert got == expected
    assert sorted(got.distinct_spans(["m3", "m25"])) == sorted(set(spans[:3]) | set(spans[20:25]))
    # written whole again, it is the same
    assert decode(encode(got)) == expected


def test_a_run_appends_what_it_added_and_compacts_what_it_no_longer_uses():
    held = memory()
    stored = held.held()
    # nothing new, everything still used: nothing to write
    assert plan_save(held.subset(["m1"], ["r1", "r2", "r3"]), stored, stored_files=4, segments=1) == (
        "unchanged", None)
    # a new range and its new block: a segment of just those
    grown = memory()
    grown.ranges["r4"] = (40, (b"d1", b"d4"))
    grown.blocks[b"d4"] = [(b"z", "data/4", 1)]
    grown.add_metarange("m2", 200, [(b"a", "r1"), (b"z", "r4")])
    how, segment = plan_save(grown.subset(["m1", "m2"], ["r1", "r2", "r3", "r4"]), stored, stored_files=4,
                             segments=3)
    assert how == "appended" and set(segment.ranges) == {"r4"} and set(segment.blocks) == {b"d4"}
    assert segment.view()[0] == {"m2": (200, ((b"a", "r1"), (b"z", "r4")))}
    # ... unless the cache holds as many segments as it may: then all of it, in one
    assert plan_save(grown, stored, stored_files=4, segments=8)[0] == "compacted"
    # one file of four not used any more: it stays until more than a quarter of the cache is unused
    assert plan_save(held.subset(["m1"], ["r1", "r2"]), stored, stored_files=4, segments=2)[0] == "unchanged"
    how, whole = plan_save(held.subset(["m1"], ["r1"]), stored, stored_files=4, segments=2)
    assert how == "compacted" and set(whole.ranges) == {"r1"} and set(whole.blocks) == {b"d1", b"d2"}
    # entries the run did not trust (stale) count as unused, and their file read again is appended
    assert plan_save(held.subset(["m1"], ["r1", "r2", "r3"]), stored, stored_files=6, segments=1)[0] == "compacted"
    # no cache to append to: written whole
    assert plan_save(held, stored, stored_files=0, segments=0)[0] == "compacted"


def test_a_segment_is_one_object_checked_file_by_file():
    files = encode(memory())
    names = described(files)
    assert unpacked(packed(files), names, what="seg") == files
    data = packed(files)
    with pytest.raises(CacheError, match="torn or altered"):
        unpacked(data[:-1], names, what="seg")
    with pytest.raises(CacheError, match="torn or altered"):
        unpacked(data + b"x", names, what="seg")
    flipped = bytearray(data)
    flipped[len(files["spans.parquet"]) + 3] ^= 0xFF  # inside metaranges.parquet
    with pytest.raises(CacheError, match="metaranges.parquet is not the file its pointer names"):
        unpacked(bytes(flipped), names, what="seg")
    swapped = {**names, "spans.parquet": names["ranges.parquet"], "ranges.parquet": names["spans.parquet"]}
    with pytest.raises(CacheError):
        unpacked(data, swapped, what="seg")


def test_the_preload_runs_on_daemon_threads_and_hands_over_errors():
    """A run that fails before using its preload (lakeFS unreachable) must not keep its process alive until the
    history-sized listing ends: the preload's threads are daemons; results and errors reach whoever waits."""
    release = threading.Event()
    seen = {}

    def slow():
        seen["daemon"] = threading.current_thread().daemon
        release.wait(10)
        return 42

    future = in_background("t", slow)
    assert not future.done()
    release.set()
    assert future.result(10) == 42 and seen["daemon"] is True

    def boom():
        raise KeyError("x")

    with pytest.raises(KeyError):
        in_background("t", boom).result(10)


def test_block_digests_and_chosen_blocks_agree_with_the_whole_range():
    """What the lean mark reads of a changed range: every block's digest without decoding, then the chosen blocks'
    addresses only."""
    checked = 0
    for path in sorted(FIXTURES.glob("*.sst")):
        data = path.read_bytes()
        if sstable.read_properties(data).get("type") != b"ranges":
            continue
        digests, new = sstable.range_blocks(data, seen_blocks=set())
        assert sstable.range_block_digests(data) == digests
        chosen = set(digests[::2])
        got = sstable.range_wanted_blocks(data, chosen)
        assert [d for d, _ in got] == [d for d, _ in new if d in chosen]
        assert [a for _, block in got for a in sstable.block_addresses(block)] == [
            (address, kind) for d, entries in new if d in chosen for _, address, kind, _ in entries]
        assert sstable.range_wanted_blocks(data, set()) == []
        checked += 1
    assert checked
