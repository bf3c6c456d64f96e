"""bench/gc: the one GC engine (spark_jobs/engine/) — mark growth, sweep, and what one range file costs the mark —
on real object-store servers, with both runners (threads in process; Spark executors in a local-mode context).

    .venv/bin/python bench/gc/bench_gc.py [--stores local,s3 --runners threads,spark --objects 20000
                                           --commits 200 --changed 10 --rounds 3 --sweep-stores local,s3
                                           --sweep-objects 4000 --sweep-commits 10 --sweep-changed 100
                                           --output PATH]
    .venv/bin/python bench/gc/bench_gc.py --quick     # small sizes, checks only, writes nothing (make test)
    make bench-gc   (this, then bench/gc/sstable_bench.py)

Everything runs on 127.0.0.1 and is stopped at the end: per store (tests/services.py: ``local`` = lakeFS's local
blockstore on disk, ``s3`` = versitygw, ``azure`` = Azurite, ``gcs`` = fake-gcs-server) the store and a lakeFS
v1.84 on it. Repositories come from bench/gc/generate.py (objects staged by metadata, commits backdated). Each GC
run is ``spark_jobs.engine.run.run_marked`` as a caller sees it (tests/gc_engine.Collector), timed end to end:
lakeFS calls, metadata reads from the store, listing, plan and record writes. Runners: ``threads``
(ThreadRunner(8), in this process) and ``spark`` (spark_jobs.jobs.gc.SparkRunner on a local[2] SparkContext in
this process, started once; one untimed warm-up run per runner and store, so JVM and worker start-up are not in
the figures). The mark phase alone (metaranges + ranges + staged addresses) is the record's ``seconds.mark``.

1. Mark growth (dry run; GC rules keep every commit): one repository of ``--objects`` objects in 1 commit, timed
   (median of ``--rounds``), then ``--commits`` more commits of ``--changed`` new files each (new date
   partitions: keys after all others, how tables grow), timed again. Tracked: time after / time before (goal
   <= 3), and the metadata files read (metaranges + ranges) before and after.
2. Per-range-file cost of the mark on each store: (mark phase after - before) / (files after - before), in ms;
   the ratio of each store's to local disk's, measured in the same run.
3. Sweep (full run, min age 0, retention 7 days, a history 40 to 20 days old): ``--sweep-objects`` objects with
   data, then ``--sweep-commits`` commits overwriting ``--sweep-changed`` of them at random paths, so exactly
   sweep-commits x sweep-changed objects are garbage; one fresh repository per store and runner. Tracked: end to
   end seconds, delete requests per deleted object; on S3 the requests are counted by a pass-through proxy
   (tests/services.ThrottlingProxy throttling nothing) in front of versitygw, beside the engine's own count.

Checks (a failure exits 1 and writes nothing): every run succeeds; the dry runs plan nothing (no data behind the
staged addresses) and both runners read the same metadata files; the sweep deletes exactly the garbage objects,
every object the HEAD reaches is still in the store, and on S3 no single-object DELETE was sent.
Writes bench/results/gc.json and bench/results/gc.md (``--output`` elsewhere; ``--quick`` writes nothing).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import math
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from common import ROOT, STORE_NAMES, CheckFailed, World, check, machine, spark_context  # noqa: E402
from generate import HistoryShape, MetadataOnly, StoreObjects, extend, generate, staged_base  # noqa: E402

from spark_jobs.engine.stores import STORES  # noqa: E402
from tests.services import ThrottlingProxy, is_batch_delete  # noqa: E402

QUICK = {"objects": 300, "commits": 6, "changed": 5, "rounds": 1, "sweep_objects": 150, "sweep_commits": 3,
         "sweep_changed": 20}


def time_marks(world: World, gc, repo: str, rounds: int) -> dict[str, Any]:
    # the reading mark, every file read each time, as the results were measured (the mark cache's warm runs are
    # cache_bench.py's): with the cache, a repeated mark of a few hundred objects takes under a millisecond
    gc = dataclasses.replace(gc, cache=False)
    times, phases, summary = [], [], None
    for _ in range(rounds):
        started = time.perf_counter()
        marked = gc.mark(repo, dry_run=True)
        times.append(time.perf_counter() - started)
        summary = marked.summary
        check(summary.success and summary.num_deleted_objects == 0,
              f"{world.kind}/{gc.runner_name}: a dry run over metadata-only objects planned "
              f"{summary.num_deleted_objects} deletions")
        phases.append(summary.seconds["mark"])
    return {"seconds": times, "median": statistics.median(times), "mark_phase": phases,
            "mark_phase_median": statistics.median(phases), "metaranges": summary.metaranges,
            "ranges": summary.ranges, "files": summary.metaranges + summary.ranges, "commits": summary.commits}


def mark_growth(world: World, runners: dict[str, Any], a: argparse.Namespace) -> dict[str, Any]:
    end = datetime.now(UTC) - timedelta(hours=1)
    name = "mark-growth"
    namespace = world.store.namespace(name)
    writer = MetadataOnly(staged_base(world.store, namespace))
    repo = generate(world.lakefs, repository_id=name, storage_namespace=namespace, shape=HistoryShape(a.objects, 0),
                    writer=writer, end=end - timedelta(hours=a.commits), progress=print)
    world.rules(name, 3650)
    result: dict[str, Any] = {"objects": a.objects, "commits": a.commits, "changed": a.changed}
    for runner, gc in runners.items():
        dataclasses.replace(gc, cache=False).mark(name, dry_run=True)  # warm-up, untimed
        result[f"{runner}_1_commit"] = time_marks(world, gc, name, a.rounds)
    extend(world.lakefs, repo, shape=HistoryShape(a.objects, a.commits, a.changed, "append"), writer=writer,
           first=end - timedelta(hours=a.commits - 1), progress=print)
    for runner, gc in runners.items():
        one = result[f"{runner}_1_commit"]
        many = result[f"{runner}_n_commits"] = time_marks(world, gc, name, a.rounds)
        check(many["files"] > one["files"], f"{world.kind}/{runner}: {a.commits} commits read no new files")
        result[f"{runner}_ratio"] = many["median"] / one["median"]
        # summary.seconds has millisecond resolution
        result[f"{runner}_mark_phase_ratio"] = many["mark_phase_median"] / max(one["mark_phase_median"], 0.001)
        result[f"{runner}_ms_per_file"] = (1000 * (many["mark_phase_median"] - one["mark_phase_median"])
                                           / (many["files"] - one["files"]))
    files = {(result[f"{r}_1_commit"]["files"], result[f"{r}_n_commits"]["files"]) for r in runners}
    check(len(files) == 1, f"{world.kind}: the runners read different numbers of metadata files: {files}")
    return result


class RequestCounter:
    """A ThrottlingProxy ``match`` that throttles nothing and counts the S3 requests by kind."""

    def __init__(self) -> None:
        self.counts: collections.Counter[str] = collections.Counter()

    def __call__(self, method: str, target: str) -> bool:
        if is_batch_delete("s3", method, target):
            self.counts["delete_objects"] += 1
        elif method == "DELETE":
            self.counts["delete_object"] += 1
        elif method == "GET" and ("list-type" in target or "prefix=" in target):
            self.counts["list"] += 1
        else:
            self.counts[method.lower()] += 1
        return False


def sweep(world: World, runners: dict[str, Any], a: argparse.Namespace, spark) -> dict[str, Any]:
    garbage = a.sweep_commits * a.sweep_changed
    result: dict[str, Any] = {"objects": a.sweep_objects + garbage, "garbage": garbage}
    for runner in runners:
        name = f"sweep-{runner}"
        namespace = world.store.namespace(name)
        end = datetime.now(UTC) - timedelta(days=20)
        generate(world.lakefs, repository_id=name, storage_namespace=namespace,
                 writer=StoreObjects(world.store, namespace),
                 shape=HistoryShape(a.sweep_objects, a.sweep_commits, a.sweep_changed, "random"),
                 end=end, step=timedelta(days=20) / max(1, a.sweep_commits), progress=print)
        world.rules(name, 7)
        before = world.data_keys(namespace)
        live = world.live_keys(name, namespace)
        expected = before - live
        check(len(expected) == garbage and live <= before,
              f"{world.kind}: generated {len(expected)} garbage objects, expected {garbage}")
        counter, proxy = RequestCounter(), None
        if world.kind == "s3":
            proxy = ThrottlingProxy(world.store.endpoint, "s3", match=counter).start()
        try:
            gc = world.collector(runner, spark, endpoint=proxy.url if proxy else None)
            started = time.perf_counter()
            summary, marked = gc.run(name, min_age=timedelta(0))
            elapsed = time.perf_counter() - started
        finally:
            if proxy:
                proxy.stop()
        after = world.data_keys(namespace)
        deleted = before - after
        check(summary.success and summary.swept == garbage, f"{world.kind}/{runner}: swept {summary.swept}")
        check(deleted == expected, f"{world.kind}/{runner}: deleted {len(deleted)} objects, "
                                   f"{len(deleted - expected)} of them live; missed {len(expected - deleted)}")
        check(live <= after, f"{world.kind}/{runner}: {len(live - after)} live objects are gone")
        if proxy:
            check(counter.counts["delete_object"] == 0,
                  f"{runner}: {counter.counts['delete_object']} single-object DELETE requests")
            check(counter.counts["delete_objects"] == summary.delete_requests,
                  f"{runner}: the proxy saw {counter.counts['delete_objects']} DeleteObjects requests, the record "
                  f"says {summary.delete_requests}")
        check(summary.delete_requests == math.ceil(garbage / STORES[world.kind].batch) or world.kind == "local",
              f"{world.kind}/{runner}: {summary.delete_requests} delete requests for {garbage} objects")
        result[runner] = {"seconds": elapsed, "deleted": len(deleted), "delete_requests": summary.delete_requests,
                          "requests_seen": dict(counter.counts) if proxy else None,
                          "delete_requests_per_object": summary.delete_requests / max(1, len(deleted)),
                          "phases": marked.summary.seconds | {"sweep": summary.seconds.get("sweep")}}
    return result


def mark_lines(results: dict[str, Any]) -> list[str]:
    lines = ["", "Mark growth (dry run, median s end to end; mark phase = metaranges + ranges + staged addresses):", "",
             "| store | runner | 1 commit s | after the commits s | **ratio** (goal <= 3) | mark phase 1 -> N s | "
             "files read 1 -> N | **ms per file** |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for kind, m in results["mark_growth"].items():
        for runner in ("threads", "spark"):
            if f"{runner}_ratio" not in m:
                continue
            one, many = m[f"{runner}_1_commit"], m[f"{runner}_n_commits"]
            lines.append(f"| {STORE_NAMES[kind]} | {runner} | {one['median']:.2f} | {many['median']:.2f} | "
                         f"**{m[f'{runner}_ratio']:.2f}** | {one['mark_phase_median']:.2f} -> "
                         f"{many['mark_phase_median']:.2f} | {one['files']} -> {many['files']} | "
                         f"**{m[f'{runner}_ms_per_file']:.2f}** |")
    per_file = results.get("per_file_vs_local") or {}
    if per_file:
        lines += ["", "Per-file cost of the mark, relative to local disk in this run (threads runner): " + ", ".join(
            f"{STORE_NAMES[k]} **{v:.1f}x**" for k, v in per_file.items())]
    return lines


def write_results(results: dict[str, Any], output: Path) -> None:
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=2, default=str) + "\n")
    a = results["args"]
    lines = [f"# bench/gc — {results['date']} (git {results['git']})", "",
             f"{a['objects']:,} objects then +{a['commits']:,} commits x {a['changed']} new files; sweep "
             f"{a['sweep_objects']:,} objects + {a['sweep_commits']} x {a['sweep_changed']} overwrites."]
    lines += mark_lines(results)
    if results["sweep"]:
        lines += ["", "Sweep, full run (mark + sweep), min age 0, end to end:", "",
                  "| store | runner | objects | seconds | deleted | delete requests | requests / object |",
                  "|---|---|---:|---:|---:|---:|---:|"]
        for kind, s in results["sweep"].items():
            for runner in ("threads", "spark"):
                if runner in s:
                    e = s[runner]
                    lines.append(f"| {STORE_NAMES[kind]} | {runner} | {s['objects']:,} | {e['seconds']:.2f} | "
                                 f"{e['deleted']:,} | {e['delete_requests']} | {e['delete_requests_per_object']:.5f} |")
    output.with_suffix(".md").write_text("\n".join(lines) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", default="local,s3", help="mark growth on these (local,s3,azure,gcs)")
    parser.add_argument("--sweep-stores", default="local,s3")
    parser.add_argument("--runners", default="threads,spark")
    parser.add_argument("--objects", type=int, default=20_000)
    parser.add_argument("--commits", type=int, default=200)
    parser.add_argument("--changed", type=int, default=10)
    parser.add_argument("--sweep-objects", type=int, default=4000)
    parser.add_argument("--sweep-commits", type=int, default=10)
    parser.add_argument("--sweep-changed", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="small sizes, the checks only; writes nothing")
    parser.add_argument("--output", type=Path, default=None, help="default bench/results/gc.json (none if --quick)")
    args = parser.parse_args()
    if args.quick:
        for key, value in QUICK.items():
            setattr(args, key, value)
    output = args.output or (None if args.quick else ROOT / "bench" / "results" / "gc.json")
    stores = [s for s in args.stores.split(",") if s]
    sweep_stores = [s for s in args.sweep_stores.split(",") if s]
    runner_names = [r for r in args.runners.split(",") if r]
    for s in {*stores, *sweep_stores}:
        check(s in STORE_NAMES, f"unknown store {s!r}")
    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    results: dict[str, Any] = {"date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "git": git.strip(),
                               "args": vars(args) | {"output": str(output)},
                               "machine": machine(("pyspark", "lakefs-sdk", "s3fs", "cramjam")),
                               "mark_growth": {}, "sweep": {}}
    spark = spark_context() if "spark" in runner_names else None
    started = time.monotonic()
    try:
        for kind in dict.fromkeys([*stores, *sweep_stores]):
            world = World(kind)
            try:
                runners = {r: world.collector(r, spark) for r in runner_names}
                if kind in stores:
                    results["mark_growth"][kind] = mark_growth(world, runners, args)
                if kind in sweep_stores:
                    results["sweep"][kind] = sweep(world, runners, args, spark)
            finally:
                world.close()
    except CheckFailed as exc:
        print(f"FAIL: {exc}", file=sys.stderr)
        return 1
    finally:
        if spark is not None:
            spark.stop()
    mg = results["mark_growth"]
    # a ratio to local disk's per-file slope only when that slope was measured above zero (a quick run's few files
    # can cost nothing measurable, or less with more files: noise)
    if "local" in mg and mg["local"].get("threads_ms_per_file", 0) > 0:
        results["per_file_vs_local"] = {k: m["threads_ms_per_file"] / mg["local"]["threads_ms_per_file"]
                                        for k, m in mg.items() if k != "local" and "threads_ms_per_file" in m}
    print("\n".join(mark_lines(results)))
    print(json.dumps(results["sweep"], indent=1, default=str)[:3000])
    print(f"bench_gc: all checks hold ({time.monotonic() - started:.0f} s)")
    if output:
        write_results(results, output)
        print(output.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
