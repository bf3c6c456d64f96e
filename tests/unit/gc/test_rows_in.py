"""``arrow_base.rows_in``: the rows of decoded units whose key is asked for, each unit probed against one set of
the asked keys (``KeySet``): the same rows as a Python set gives, whatever the threads."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from spark_jobs.engine.backends import arrow_base
from spark_jobs.engine.runtime.parallel import ThreadRunner

SCHEMA = pa.schema([pa.field("key", pa.string(), nullable=False), pa.field("unit", pa.int64(), nullable=False)])


def decoded(units: dict[str, list[str]]):
    def decode(_ctx, unit: str) -> pa.RecordBatch:
        keys = units[unit]
        return pa.RecordBatch.from_arrays([pa.array(keys, pa.string()), pa.array([int(unit)] * len(keys), pa.int64())],
                                          schema=SCHEMA)
    return decode


@pytest.mark.parametrize("seed", range(18))
def test_rows_in_is_every_unit_probed_alone(seed):
    rnd = random.Random(seed)
    pool = [f"data/g{rnd.randrange(5)}/k{i}" for i in range(300)]
    units = {str(u): [rnd.choice(pool) for _ in range(rnd.randrange(0, 40))] for u in range(rnd.randrange(1, 25))}
    asked = pa.array(sorted(set(rnd.sample(pool, rnd.randrange(0, 120)))), pa.string())
    found = arrow_base.rows_in(ThreadRunner(rnd.choice([1, 2, 4])), list(units), decoded(units), asked=asked,
                               make_context=lambda: None)
    got = sorted((k, u) for t in found for k, u in zip(t["key"].to_pylist(), t["unit"].to_pylist(), strict=True))
    wanted = set(asked.to_pylist())
    assert got == sorted((k, int(u)) for u, keys in units.items() for k in keys if k in wanted)


def test_nothing_asked_decodes_nothing():
    def decode(_ctx, unit):  # pragma: no cover - must not be called
        raise AssertionError(unit)
    assert arrow_base.rows_in(ThreadRunner(2), ["1", "2"], decode, asked=pa.array([], pa.string()),
                              make_context=lambda: None) == []
