"""The GC's rules over Arrow columns equal their per-key twins (core.addresses, core.plan, engine.listing.incremental's
unit_of), on random keys, addresses and times: what the dataset plan decides is what the object plan decides."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from spark_jobs.core import columns
from spark_jobs.core.addresses import FULL, RELATIVE, relative_key
from spark_jobs.core.plan import StoredObject, is_data_key, plan_deletions
from spark_jobs.engine.listing.incremental import unit_of

PREFIXES = ("s3://bucket/ns", "local:///srv/lakefs/ns", "s3a://bücket/é")
SEGMENTS = ["data", "_lakefs", "dummy", "a", "é", "", "x y", "s3:", "ns", "data/"]


def random_key(rnd: random.Random) -> str:
    return "/".join(rnd.choice(SEGMENTS) + rnd.choice(["", "1", "ü"]) for _ in range(rnd.randint(1, 4)))


def random_address(rnd: random.Random) -> tuple[str, int]:
    key = random_key(rnd)
    root = rnd.choice(["s3://bucket/ns", "s3a://bucket/ns", "s3://bucket/nsx", "s3://other", "local:///srv/lakefs/ns",
                       "gs://b/ns", "s3://bücket/é", "s3a://bücket/é", "s3://bücket/éé", "s3a://bucket/nsx"])
    if rnd.random() < 0.5:
        return rnd.choice(["", "/", "//"]) + key, rnd.choice([0, RELATIVE])
    return f"{root}{rnd.choice(['/', '//', ''])}{key}", rnd.choice([FULL, FULL, RELATIVE])


@pytest.mark.parametrize("seed", range(20))
def test_relative_keys_equal_the_per_key_mapping(seed: int) -> None:
    rnd = random.Random(seed)
    pairs = [random_address(rnd) for _ in range(300)]
    got = columns.relative_keys(pa.array([a for a, _ in pairs]), pa.array([t for _, t in pairs], pa.int8()),
                                PREFIXES).to_pylist()
    assert got == [relative_key(a, t, PREFIXES) for a, t in pairs]


@pytest.mark.parametrize("seed", range(20))
def test_key_rules_equal_the_per_key_rules(seed: int) -> None:
    rnd = random.Random(seed)
    keys = [random_key(rnd) for _ in range(300)] + ["_lakefs", "dummy", "data", "data/s/", "x"]
    array = pa.array(keys, pa.string())
    assert columns.data_key_mask(array).to_pylist() == [is_data_key(k) for k in keys]
    assert columns.units_of(array).to_pylist() == [unit_of(k) for k in keys]


@pytest.mark.parametrize("seed", range(30))
def test_judge_equals_plan_deletions(seed: int) -> None:
    rnd = random.Random(seed)
    keys = sorted({random_key(rnd) for _ in range(rnd.randint(0, 400))} | {f"data/s{i % 7}/o{i}" for i in range(50)})
    objects = [StoredObject(k, rnd.randint(0, 10**6), rnd.uniform(0, 100)) for k in keys]
    kept = {k for k in keys if rnd.random() < 0.4} | {random_key(rnd) for _ in range(20)}
    cutoff, depth = rnd.uniform(0, 100), rnd.randint(1, 3)
    deleted, summary = plan_deletions(objects, kept, cutoff, prefix_depth=depth)
    listed = pa.table({"key": [o.key for o in objects], "size": [o.size for o in objects],
                       "mtime": [o.mtime for o in objects]}, schema=columns.LISTING_SCHEMA)
    # kept keys repeat, as one row per range entry does
    kept_table = pa.table({"key": pa.array(sorted(kept) * rnd.randint(1, 3), pa.string())})
    table, got = columns.judge(listed, kept_table, cutoff, prefix_depth=depth)
    assert got == summary
    assert table["address"].to_pylist() == [o.key for o in deleted]
    assert table["size"].to_pylist() == [o.size for o in deleted]


def test_judge_of_nothing() -> None:
    table, summary = columns.judge(columns.LISTING_SCHEMA.empty_table(), columns.KEYS_SCHEMA.empty_table(), 1.0,
                                   prefix_depth=2)
    assert table.num_rows == 0 and summary.candidates == summary.deleted == 0 and summary.by_prefix == {}
