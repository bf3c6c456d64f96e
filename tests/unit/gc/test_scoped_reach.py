"""Path policies on the dataset plan: each entry's scope travels as a bit mask (``core.mark.scope_mask``) beside
its key and its range's ordinal (``units.range_scoped_keys``), and the kept keys are those of the (range, scope)
pairs the driver finds alive (``ArrowReach.scope_pairs``, ``kept_of``): each equal to its per-entry definition
(``core.mark.scope_of``, ``mark_source.by_scope``: the object path's)."""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pytest

from spark_jobs.core import sstable
from spark_jobs.core.addresses import key_mapper
from spark_jobs.core.cleaning import parse_cleaning_policies
from spark_jobs.core.mark import scope_mask, scope_of, scope_of_mask
from spark_jobs.engine.backends.arrow import ArrowBackend
from spark_jobs.engine.plan import units
from spark_jobs.engine.runtime.parallel import ThreadRunner

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sstables"
GLOBS = ["warehouse/**", "warehouse/analytics/*/ingestion_pipeline=clickstream_v2/year=2024/month=01/day=0?/**",
         "**/region=eu-west-0/**", "dir0/*", "external/**", "**/*.parquet", "nowhere/**", "**",
         "warehouse/analytics/events_by_customer_and_region/ingestion_pipeline=clickstream_v2/year=2024/month=01/"
         "day=1[0-9]/**"]


def random_policies(rnd: random.Random):
    chosen = []
    for i in range(rnd.randint(1, 5)):
        paths = rnd.sample(GLOBS, rnd.randint(1, 2))
        if rnd.random() < 0.3 and "warehouse/**" in paths:
            paths.append("!warehouse/analytics/*/ingestion_pipeline=clickstream_v2/year=2024/month=01/day=00/**")
        chosen.append({"id": f"p{i}", "patterns": ["*"], "paths": paths, "keep_commits": 1})
    return tuple(parse_cleaning_policies({"policies": chosen}))


def lakefs_ranges() -> dict[str, bytes]:
    return {p.stem: p.read_bytes() for p in sorted(FIXTURES.glob("*.sst"))
            if sstable.read_properties(p.read_bytes()).get("type") == b"ranges"}


@pytest.mark.parametrize("seed", range(6))
def test_a_scoped_range_holds_each_entry_s_key_range_and_scope(seed: int) -> None:
    rnd = random.Random(seed)
    policies = random_policies(rnd)
    prefixes = ("local://lake/repo",)
    relative = key_mapper(prefixes)
    for ordinal, (range_id, data) in enumerate(lakefs_ranges().items()):
        ctx = SimpleNamespace(read_range=lambda _r, data=data: data, prefixes=prefixes)
        batch = units.range_scoped_keys(ctx, units.scoped_unit(ordinal, range_id), path_policies=policies)
        assert batch.schema == units.SCOPED_SCHEMA
        got = list(zip(batch.column("key").to_pylist(), batch.column("range").to_pylist(),
                       [scope_of_mask(m, policies) for m in batch.column("scope").to_pylist()], strict=True))
        want = [(key, ordinal, scope_of(path.decode(errors="replace"), policies))
                for path, address, kind, _ in sstable.range_entries(data)
                if (key := relative(address, kind)) is not None]
        assert got == want and want


def test_a_mask_is_a_scope_and_back() -> None:
    rnd = random.Random(3)
    for _ in range(50):
        policies = random_policies(rnd)
        path = rnd.choice(["warehouse/a", "dir0/x", "external/part.parquet", "x/region=eu-west-0/y.parquet", "top"])
        mask = scope_mask(path, policies)
        assert 0 <= mask < 1 << len(policies)
        assert scope_of_mask(mask, policies) == scope_of(path, policies)


@pytest.mark.parametrize("seed", range(8))
def test_the_kept_keys_are_those_of_the_live_pairs(seed: int) -> None:
    rnd = random.Random(seed)
    rows = [(f"data/s{rnd.randint(0, 3)}/k{rnd.randint(0, 400)}", rnd.randint(0, 9), rnd.choice([0, 1, 2, 5, 7]))
            for _ in range(rnd.randint(0, 600))]
    scoped = pa.Table.from_pylist([{"key": k, "range": r, "scope": s} for k, r, s in rows], schema=units.SCOPED_SCHEMA)
    backend = ArrowBackend(ThreadRunner(2), config=None)  # type: ignore[arg-type]
    pairs = backend.scope_pairs(scoped)
    assert sorted(pairs) == sorted({(r, s) for _, r, s in rows})
    whole = {r for r in range(10) if rnd.random() < 0.3}  # ranges all of whose scopes are live
    live = [p for p in pairs if p[0] in whole or rnd.random() < 0.5]
    # one batch of every range (mixed: joined), and a batch a range as reach_scoped gives them (filtered per batch)
    by_range = pa.Table.from_batches(
        [pa.RecordBatch.from_pylist([{"key": k, "range": r, "scope": s} for k, r, s in rows if r == at],
                                    schema=units.SCOPED_SCHEMA) for at in range(10)], schema=units.SCOPED_SCHEMA)
    for table in (scoped, by_range):
        kept = backend.kept_of(table, live)
        assert kept.schema.names == ["key"]
        assert sorted(kept["key"].to_pylist()) == sorted(k for k, r, s in rows if (r, s) in set(live))
