"""engine/runtime/imports: the import pyarrow defers to its first conversion of Python values (pandas) is begun on
a thread of its own, once per process, and a thread converting meanwhile gets a correct array."""

from __future__ import annotations

import json
import subprocess
import sys

_PROBE = """
import json, sys, threading, time
from spark_jobs.engine.runtime.imports import warm_arrow_conversion
before = "pandas" in sys.modules
warm_arrow_conversion()
warm_arrow_conversion()
threads = [t.name for t in threading.enumerate() if t.name == "gc-warm-arrow"]
import pyarrow as pa
values = pa.array(["a", "b"]).to_pylist()  # waits for the import if it is under way
for t in threading.enumerate():
    if t.name == "gc-warm-arrow":
        t.join(60)
print(json.dumps({"before": before, "threads": threads, "values": values, "after": "pandas" in sys.modules}))
"""


def test_the_deferred_import_is_begun_once_on_its_own_thread():
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120, check=True)
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["before"] is False  # importing the engine's modules does not pay for it
    assert len(seen["threads"]) <= 1  # once per process (the thread may already be done)
    assert seen["values"] == ["a", "b"]
    assert seen["after"] is True  # pyarrow imported pandas (the engine's environment has it)
