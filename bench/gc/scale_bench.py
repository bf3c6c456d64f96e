"""bench/gc scale curve: one GC run (dry run, the mark and the listing) on 10k, 100k and 1M objects, time and
peak memory of each runner, cost per object — where each runner stops being the right choice.

    .venv/bin/python bench/gc/scale_bench.py [--store s3|local] [--sizes 10000,100000,1000000]
                                             [--runners threads,spark] [--rounds 2] [--output PATH]
    .venv/bin/python bench/gc/scale_bench.py --quick    # 200 and 700 objects, checks only, writes nothing (≈ 1 min)

One store (``local`` = lakeFS's local blockstore, default; ``s3`` = versitygw) and a lakeFS v1.84 on it, on
127.0.0.1, stopped at the end. One repository grows through the sizes: each step stages the new objects in bulk
(``generate.BulkMetadataOnly``: plain HTTP, 3 processes x 16 connections), with ``--files`` (the default on local
disk) an empty file written straight into the store's folder behind each address (so the listing and the
subtraction are at full size too; versitygw lists only ≈ 1,000 objects/s on this machine, so on S3 the default is
metadata only: the mark at full size, nothing to list), then commits;
the commits of earlier steps are dated 100 days apart and the GC rules keep 30 days, so each step's run reads
the HEAD's ranges only, as a repository of that size with no history would.

Each measured run is a fresh child process (``--child``) making a dry run, the mark cache off (cold: every range
file read), exactly as ``tests.gc_engine.Collector`` would: ``threads`` = ThreadRunner(8) in that process;
``spark`` = spark_jobs.jobs.gc.SparkRunner on a local[2] SparkContext started in it. The child first makes one
untimed run (imports, JVM and Python-worker start-up), then ``--timed`` timed runs. This process samples the
child's process tree every 0.1 s from /proc (driver Python, JVM, the JVM's Python workers): peak resident memory
of each, and of the whole tree, over the timed runs (and separately before them: the runner's idle footprint).
Rounds alternate the runners' order; the CPU other processes used during each child is recorded.

Checks (a failure exits 1, nothing written): every run succeeds, plans no deletion, keeps an address per object
(and, with files, lists and keeps every object), and both runners read the same number of ranges.
Writes bench/results/gc-scale.json and .md (``--output`` elsewhere; ``--quick`` writes nothing).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from common import ROOT, STORE_NAMES, CheckFailed, World, check, machine  # noqa: E402
from generate import BulkMetadataOnly, _base_path, _commit, stage_many, staged_base  # noqa: E402
from proctree import TreeSampler, machine_busy, tree_cpu  # noqa: E402

from tests.services import ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY  # noqa: E402

QUICK = {"sizes": "200,700", "rounds": 1, "timed": 1}
REPO = "scale"


# --- the child: one runner, one process -------------------------------------------------------------------------
def child(spec: dict[str, Any]) -> int:
    from common import gc_run, spark_context  # noqa: PLC0415

    from spark_jobs.engine.parallel import ThreadRunner  # noqa: PLC0415
    from tests.gc_engine import Collector  # noqa: PLC0415

    def say(line: str) -> None:
        print(line, flush=True)

    say("MARK start")
    if spec["runner"] == "spark":
        from spark_jobs.jobs.gc import SparkRunner  # noqa: PLC0415

        sc = spark_context()
        gc = Collector(spec["endpoint"], spec["options"], runner=SparkRunner(sc), runner_name="spark")
    else:
        sc = None
        gc = Collector(spec["endpoint"], spec["options"], runner=ThreadRunner(8))
    runs = []
    try:
        for phase in ["warmup"] + [f"timed{i}" for i in range(spec["timed"])]:
            say(f"MARK {phase}")
            started = time.perf_counter()
            summary, marked = gc_run(gc, spec["repo"], "dry-run", cache=False, min_age=timedelta(0))
            runs.append({"phase": phase, "seconds": time.perf_counter() - started,
                         "phases": summary.seconds, "ranges": summary.ranges, "metaranges": summary.metaranges,
                         "kept": summary.kept_objects, "kept_addresses": len(marked.kept),
                         "deleted": summary.num_deleted_objects,
                         "success": summary.success})
    finally:
        say("MARK stop")
        if sc is not None:
            sc.stop()
    say("RESULT " + json.dumps(runs))
    return 0


def measure(world: World, runner: str, timed: int) -> dict[str, Any]:
    spec = {"runner": runner, "repo": REPO, "endpoint": world.server.endpoint, "options": world.options(),
            "timed": timed}
    cmd = [sys.executable, __file__, "--child", json.dumps(spec)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    sampler = TreeSampler(proc.pid).start()
    me = os.getpid()  # this process's tree: lakeFS, the store, the child; "other" = the machine minus that
    busy0, ours0, started = machine_busy(), tree_cpu(me), time.monotonic()
    result, lines = None, []
    for line in proc.stdout:
        line = line.rstrip("\n")
        if line.startswith("MARK "):
            sampler.mark(line[5:])
        elif line.startswith("RESULT "):
            result = json.loads(line[7:])
        else:
            lines.append(line)
    rc = proc.wait()
    wall = time.monotonic() - started
    other = (machine_busy() - busy0) - (tree_cpu(me) - ours0)
    segments = sampler.stop()
    check(rc == 0 and result is not None, f"{runner}: the child exited {rc}:\n" + "\n".join(lines[-30:]))
    timed_runs = [r for r in result if r["phase"].startswith("timed")]
    peaks = [segments[r["phase"]] for r in timed_runs]
    return {
        "runs": result,
        "seconds": [r["seconds"] for r in timed_runs],
        "median": statistics.median(r["seconds"] for r in timed_runs),
        "first_run_seconds": result[0]["seconds"],
        "phases": timed_runs[-1]["phases"],
        "ranges": timed_runs[-1]["ranges"], "kept": timed_runs[-1]["kept"],
        "kept_addresses": timed_runs[-1]["kept_addresses"],
        "peak_mib": max(p["peak_mib"] for p in peaks),
        "peak_by_role_mib": {r: max(p["peak_by_role_mib"].get(r, 0) for p in peaks)
                             for r in {k for p in peaks for k in p["peak_by_role_mib"]}},
        "idle_mib": segments.get("warmup", {}).get("peak_by_role_mib", {}),
        "start_peak_mib": segments.get("start", {}).get("peak_mib"),  # before the first run
        "child_cpu_seconds": sum(s["cpu_seconds"] for s in segments.values()),
        "timed_cpu_seconds": sum(p["cpu_seconds"] for p in peaks),
        "child_wall_seconds": wall,
        "other_cpu_cores": max(0.0, other) / wall,
    }


# --- the parent -------------------------------------------------------------------------------------------------
def grow(world: World, namespace: str, sizes: list[int], writer: BulkMetadataOnly, salt: str, progress=print, *,
         newest: timedelta = timedelta(hours=1)):
    """Yields (size, seconds it took) after each growth step of the one repository; the last step's commit is
    dated ``newest`` ago, each earlier one 100 days before the next."""
    import lakefs_sdk  # noqa: PLC0415

    world.lakefs.repositories.create_repository(lakefs_sdk.RepositoryCreation(
        name=REPO, storage_namespace=namespace, default_branch="main"))
    world.rules(REPO, 30)
    have = 0
    for step, size in enumerate(sizes):
        started = time.monotonic()
        paths = [_base_path(i) for i in range(have, size)]
        stage_many(world.lakefs, repository_id=REPO, branch_id="main", paths=paths, writer=writer, salt=salt,
                   start_index=have)
        staged = time.monotonic() - started
        date = datetime.now(UTC) - timedelta(days=100 * (len(sizes) - 1 - step)) - newest
        _commit(world.lakefs, REPO, "main", f"{size} objects", date)
        have = size
        took = time.monotonic() - started
        progress(f"{REPO}: {size:,} objects ({len(paths):,} staged in {staged:.0f} s, committed in "
                 f"{took - staged:.1f} s)")
        yield size, {"seconds": took, "staging_seconds": staged, "staged": len(paths)}


def lines_of(results: dict[str, Any]) -> list[str]:
    out = ["| objects | ranges | runner | run s (median) | µs per object | peak MiB (tree) | driver | JVM | "
           "Python workers | tree after start-up MiB | mark / list / plan s | other CPU (cores) |",
           "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    for step in results["steps"]:
        for runner, m in step["runners"].items():
            roles = m["peak_by_role_mib"]
            idle = m.get("start_peak_mib") or 0.0
            ph = m["phases"]
            out.append(f"| {step['objects']:,} | {m['ranges']} | {runner} | {m['median']:.2f} | "
                       f"{1e6 * m['median'] / step['objects']:.1f} | {m['peak_mib']:.0f} | "
                       f"{roles.get('driver', 0):.0f} | {roles.get('jvm', 0):.0f} | {roles.get('workers', 0):.0f} | "
                       f"{idle:.0f} | {ph.get('mark', 0):.2f} / {ph.get('list', 0):.2f} / {ph.get('plan', 0):.2f} | "
                       f"{m['other_cpu_cores']:.2f} |")
    return out


def write_md(results: dict[str, Any], output: Path) -> None:
    a = results["args"]
    table = lines_of(results)
    gen = ", ".join(f"{s['generate']['staged']:,} in {s['generate']['seconds']:.0f} s" for s in results["steps"])
    output.with_suffix(".md").write_text("\n".join([
        f"# bench/gc scale curve — {results['date']} (git {results['git']}), {STORE_NAMES[a['store']]}, "
        f"{'an empty file behind every object (listing and subtraction at full size)' if a['files'] else 'metadata only (nothing to list)'}", "",
        f"Dry run, mark cache off, median of {a['rounds']} child processes per runner and size (each: one "
        f"untimed warm-up run, {a['timed']} timed). Peak = resident memory sampled every 0.1 s over the timed "
        "runs; after start-up = the child's tree before its first run (imports; Spark: SparkContext and JVM "
        f"up). Generation (bulk staging + files + commit): {gen}.", "",
        *table, ""]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--render", type=Path, help="write the .md of an existing results JSON and stop")
    parser.add_argument("--store", default="local", choices=["s3", "local"])
    parser.add_argument("--files", action=argparse.BooleanOptionalAction, default=None,
                        help="an empty file behind each address (default: on local disk only; versitygw lists only "
                             "≈ 1,000 objects/s here, so 1M objects would take ≈ 15 min per listing)")
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--runners", default="threads,spark")
    parser.add_argument("--rounds", type=int, default=2, help="child processes per runner and size (alternating)")
    parser.add_argument("--timed", type=int, default=1, help="timed runs per child, after its warm-up run")
    parser.add_argument("--quick", action="store_true", help="small sizes, the checks only; writes nothing")
    parser.add_argument("--output", type=Path, default=None, help="default bench/results/gc-scale.json")
    args = parser.parse_args()
    if args.child:
        return child(json.loads(args.child))
    if args.render:
        write_md(json.loads(args.render.read_text()), args.render)
        return 0
    if args.quick:
        for key, value in QUICK.items():
            setattr(args, key, value)
    output = args.output or (None if args.quick else ROOT / "bench" / "results" / "gc-scale.json")
    if args.files is None:
        args.files = args.store == "local"
    sizes = [int(s) for s in args.sizes.split(",") if s]
    runners = [r for r in args.runners.split(",") if r]
    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    results: dict[str, Any] = {"date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "git": git.strip(),
                               "args": vars(args) | {"output": str(output)}, "store": args.store,
                               "machine": machine(("pyspark", "lakefs-sdk", "s3fs", "cramjam", "pyarrow")),
                               "steps": []}
    started = time.monotonic()
    world = World(args.store)
    try:
        namespace = world.store.namespace(REPO)
        writer = BulkMetadataOnly(staged_base(world.store, namespace), world.server.endpoint, ADMIN_ACCESS_KEY,
                                  ADMIN_SECRET_KEY, files_in=(world.store, namespace) if args.files else None,
                                  spawn_above=300 if args.quick else 2000)
        import uuid  # noqa: PLC0415

        for size, made in grow(world, namespace, sizes, writer, uuid.uuid4().hex[:6]):
            step: dict[str, Any] = {"objects": size, "generate": made, "runners": {}}
            rounds: dict[str, list[dict[str, Any]]] = {r: [] for r in runners}
            for n in range(args.rounds):
                for runner in (runners if n % 2 == 0 else runners[::-1]):
                    m = measure(world, runner, args.timed)
                    print(f"  {size:,} {runner}: {m['median']:.2f} s, peak {m['peak_mib']:.0f} MiB "
                          f"{ {k: round(v) for k, v in m['peak_by_role_mib'].items()} }, ranges {m['ranges']}, "
                          f"other CPU {m['other_cpu_cores']:.2f} cores", flush=True)
                    check(all(r["success"] and r["deleted"] == 0 for r in m["runs"]),
                          f"{runner} at {size}: a dry run failed or planned deletions")
                    check(m["kept_addresses"] == size and m["kept"] == (size if args.files else 0),
                          f"{runner} at {size}: kept {m['kept_addresses']} addresses and {m['kept']} listed objects")
                    rounds[runner].append(m)
            for runner, ms in rounds.items():
                best = dict(min(ms, key=lambda m: m["median"]))
                best["rounds"] = ms
                best["median"] = statistics.median(m["median"] for m in ms)
                best["peak_mib"] = max(m["peak_mib"] for m in ms)
                step["runners"][runner] = best
            check(len({m["ranges"] for m in step["runners"].values()}) == 1,
                  f"at {size}: the runners read different numbers of ranges")
            results["steps"].append(step)
    except CheckFailed as exc:
        print(f"FAIL: {exc}", file=sys.stderr)
        return 1
    finally:
        world.close()
    results["seconds"] = time.monotonic() - started
    table = lines_of(results)
    print("\n".join(table))
    print(f"scale_bench: all checks hold ({results['seconds']:.0f} s)")
    if output:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(results, indent=2, default=str) + "\n")
        write_md(results, output)
        print(output.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
