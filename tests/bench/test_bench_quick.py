"""Every benchmark in bench/ runs in its quick mode, as a smoke test: it starts what it needs, its own correctness
checks hold, and it exits 0. No timing is asserted (the figures of a few seconds on a shared machine mean nothing);
nothing is written to bench/results. One test per benchmark: add yours to BENCHMARKS."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# name: (script, its quick-mode arguments, seconds it may take on a busy 2-core machine, its results files in
# bench/results/, which a quick run leaves alone)
BENCHMARKS = {
    "webhook": ("bench/webhook.py", ["--quick"], 240, "webhook*"),
    "lifecycle": ("bench/lifecycle.py", ["--quick"], 300, "lifecycle*"),
    "receiver_boot": ("bench/receiver_boot.py", [], 120, None),  # always quick: one import, one line of JSON
    # GC: the one engine on local disk and versitygw, threads and Spark local[2] (JVM start included)
    "gc": ("bench/gc/bench_gc.py", ["--quick"], 420, "gc.*"),
    "gc_inprocess": ("bench/gc/inprocess_bench.py", ["--quick"], 240, "gc-inprocess*"),
    "gc_sstable": ("bench/gc/sstable_bench.py", ["--quick"], 180, "gc-sstable*"),
    "gc_generate": ("bench/gc/generate.py", ["--quick"], 180, None),
    # GC at scale (issue 37): full and daily runs, threads and spark-submit on a standalone cluster (in full also
    # local[2]); driver memory sampled, the event log read (in full: 100k and 1M objects, local disk and versitygw)
    "gc_scale": ("bench/gc/scale_bench.py", ["--quick"], 540, "scale*"),
    # GC cold and warm runs (mark cache), local disk and versitygw, both runners
    "gc_cache": ("bench/gc/cache_bench.py", ["--quick"], 420, "gc-cache*"),
    # GC daily runs (issue 28): the incremental run against the full one after a day's commits (local disk, threads)
    "gc_daily": ("bench/gc/daily_bench.py", ["--quick"], 240, "gc-daily*"),
    # Object lifecycle (issue 29): expiring objects on one branch, requests counted by endpoint, phases, memory
    "object_lifecycle": ("bench/object_lifecycle/bench.py", ["--quick"], 180, "object-lifecycle*"),
}


def results(pattern: str | None) -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for p in (ROOT / "bench" / "results").glob(pattern)} if pattern else {}


def run_bench(name: str) -> subprocess.CompletedProcess:
    script, args, timeout, _ = BENCHMARKS[name]
    out = subprocess.run([sys.executable, str(ROOT / script), *args], cwd=ROOT, capture_output=True, text=True,
                         timeout=timeout, check=False)
    assert out.returncode == 0, f"{script} {' '.join(args)} exited {out.returncode}:\n{out.stdout[-4000:]}\n" \
                                f"{out.stderr[-4000:]}"
    return out


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_benchmark_runs_in_quick_mode(name):
    before = results(BENCHMARKS[name][3])
    run_bench(name)
    assert results(BENCHMARKS[name][3]) == before, "a quick run must not write bench/results"
