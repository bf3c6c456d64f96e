"""The mark cache's pure parts: its encoding, what it trusts, what it keeps, and the summary line."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_jobs.core import sstable
from spark_jobs.core.mark_cache import (
    CacheError,
    Memory,
    _schemas,
    check_file,
    check_pointer,
    decode,
    encode,
    pointer,
    trusted,
)
from spark_jobs.core.report import describe_cache
from tests.unit.gc.test_sstable import FIXTURES


def memory() -> Memory:
    return Memory(metaranges={"m1": (100, ((b"a", "r1"), (b"k", "r2")))},
                  ranges={"r1": (10, (b"d1", b"d2")), "r2": (20, (b"d2",)), "r3": (30, (b"d3",))},
                  blocks={b"d1": [(b"a/x", "data/1", 1)], b"d2": [(b"k/y", "s3://b/ns/data/2", 2), (b"k/z", "d/3", 1)],
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
    raw = pointer(files, slot="a", repository_id="r", namespace="s3://b/ns", run_id="x")
    doc = check_pointer(raw, repository_id="r", namespace="s3://b/ns")
    for name, data in files.items():
        check_file(name, data, doc["files"][name])
    with pytest.raises(CacheError, match="torn or altered"):
        check_file("ranges.parquet", files["ranges.parquet"][:-1], doc["files"]["ranges.parquet"])
    for bad in (b"{", b"[]", json.dumps({**doc, "format": 0}).encode(), json.dumps({**doc, "slot": "c"}).encode()):
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


def test_trusted_never_takes_an_empty_size_for_a_file_that_is_gone():
    gone = Memory(metaranges={"m9": (None, ())}, ranges={"r9": (None, ())}, blocks={})
    kept, dropped = trusted(gone, {})
    assert kept.metaranges == {} and kept.ranges == {} and dropped == 2


def test_decode_refuses_empty_values():
    files = encode(memory())
    for name, row in (("ranges.parquet", {"range_id": ["r9"], "size": [None], "blocks": [[b"d1"]]}),
                      ("metaranges.parquet", {"metarange_id": ["m9"], "size": [1], "first_keys": [[None]],
                                              "range_ids": [["r1"]]})):
        out = pa.BufferOutputStream()
        pq.write_table(pa.Table.from_pydict(row, schema=_schemas()[name]), out)
        with pytest.raises(CacheError, match="empty values"):
            decode({**files, name: out.getvalue().to_pybytes()})
