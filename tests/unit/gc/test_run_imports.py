"""engine/runtime/imports: what pyarrow defers to its first conversion of Python values (importing pandas, to ask
whether a value is a pandas object) is not paid at all; every conversion gives the right array, a plan's Parquet is
written and read, and pandas itself stays importable and usable through pyarrow."""

from __future__ import annotations

import json
import subprocess
import sys

_WITHOUT = """
import io, json, sys
import pyarrow as pa
import pyarrow.parquet as pq
from spark_jobs.engine.runtime.imports import arrow_without_pandas
arrow_without_pandas()
arrow_without_pandas()
seen = {"values": pa.array(["a", None, "b"]).to_pylist() + pa.array([1, 2], pa.int64()).to_pylist()}
out = io.BytesIO()
pq.write_table(pa.table({"key": ["k1", "k2"], "size": [3, 4]}), out)  # a plan's Parquet, written and read back
seen["parquet"] = pq.read_table(io.BytesIO(out.getvalue())).to_pylist()
seen["imported"] = "pandas" in sys.modules
seen["finders"] = [type(f).__name__ for f in sys.meta_path if type(f).__name__ == "_PandasNotNow"]
frame = pa.table({"a": [1, 2]}).to_pandas()  # asking pyarrow for pandas itself imports it then
import pandas as pd
seen["to_pandas"] = [type(frame).__name__, frame["a"].tolist()]
seen["from_series"] = pa.Array.from_pandas(pd.Series([1.5, None])).to_pylist()
seen["after"] = "pandas" in sys.modules
print(json.dumps(seen))
"""


def _probe(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_run_converts_without_importing_pandas_and_pandas_still_works():
    seen = _probe(_WITHOUT)
    assert seen["values"] == ["a", None, "b", 1, 2]
    assert seen["parquet"] == [{"key": "k1", "size": 3}, {"key": "k2", "size": 4}]
    assert seen["imported"] is False and seen["finders"] == []  # not imported, and the finder is gone
    assert seen["to_pandas"] == ["DataFrame", [1, 2]]
    assert seen["from_series"] == [1.5, None]
    assert seen["after"] is True
