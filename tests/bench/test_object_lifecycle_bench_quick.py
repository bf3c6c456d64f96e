"""The object lifecycle benchmark (bench/object_lifecycle/bench.py) in its quick mode, as a smoke test in the style
of test_bench_quick.py: real lakeFS and Redis, 2,000 imported objects, one real run, its checks (the branch holds
exactly the objects not due, the report counts the due ones); no timing asserted, nothing written to
bench/results."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "object_lifecycle" / "bench.py"


def results() -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for p in (ROOT / "bench" / "results").glob("object-lifecycle*")}


def test_object_lifecycle_bench_runs_in_quick_mode():
    before = results()
    out = subprocess.run([sys.executable, str(SCRIPT), "--quick"], cwd=ROOT, capture_output=True, text=True,
                         timeout=180, check=False)
    assert out.returncode == 0, f"{SCRIPT.name} --quick exited {out.returncode}:\n{out.stdout[-4000:]}\n" \
                                f"{out.stderr[-4000:]}"
    figures = json.loads(out.stdout)
    assert figures["expired"] > 0 and figures["mtime_check"]["mismatched"] == 0
    # one batch delete per 1,000 expired paths: the count the goal rests on
    assert figures["requests_by_kind"]["delete objects (batch)"] == -(-figures["expired"] // 1000)
    assert results() == before, "a quick run must not write bench/results"
