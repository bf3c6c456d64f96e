"""bench/gc cold and warm runs: mark growth 1 -> 1,000 commits with every file read (cold), the cost per distinct
range file and where it goes, and the daily run with the mark cache (warm) against the single-commit repository.

    .venv/bin/python bench/gc/cache_bench.py [--stores local,s3] [--runners threads] [--objects 100000]
        [--commits 1000] [--changed 10] [--warm-commits 10] [--rounds 3] [--profile-files 300] [--no-warm]
        [--output PATH]
    .venv/bin/python bench/gc/cache_bench.py --quick   # 300 objects + 8 commits, checks only, writes nothing

Per store (``local`` = lakeFS's local blockstore, ``s3`` = versitygw; tests/services.py) a lakeFS v1.84 on it, all
on 127.0.0.1, stopped at the end; Spark is a local[2] SparkContext in this process, started once, with one
untimed warm-up run per store, as in bench_gc.py. Two repositories per store (bench/gc/generate.py, objects
staged by metadata in bulk, nothing behind them, so a run is its mark): **single** = ``--objects`` objects in one
commit; **history** = the same, then ``--commits`` commits of ``--changed`` new files each (new date partitions:
keys after all others, how tables grow). GC rules keep every commit. Every run is a dry run (it still writes its
plan and, with the cache on, the cache), timed end to end as ``tests.gc_engine.Collector`` makes it.

1. **Cold** (cache off, ``RunRequest(cache=False)``): single and history, alternating, ``--rounds`` rounds per
   runner. Tracked: history / single (the mark growth), and the cost per distinct metadata file: (mark phase of
   history - of single) / (files read by history - by single).
2. **Where a cold file's time goes** (``--profile-files``, in this process, one thread, as one partition of the
   threads runner reads them, in key order): fetch through the engine's Namespace.read (fsspec), fetch with a
   bare boto3 client (S3 only, for comparison; and both again from 8 threads, wall time per file), table open (footer), index (metaindex, properties, index blocks),
   block hashing, decoding the blocks not seen before, and mapping addresses to keys; then cProfile of one whole
   cold mark of history on the threads runner (bench/results/gc-cold-profile-<store>.txt).
3. **Warm** (cache on, the engine's default; skipped with ``--no-warm`` or an engine without the cache): one
   untimed run fills the cache (its time recorded as "cold, writing the cache"); then each round, per runner:
   ``--warm-commits`` more commits on history (untimed), a run on history (warm), a run on single with its cache
   (single warm), one on single without (single cold). Tracked: warm / single, and cold / warm.

Checks (a failure exits 1 and writes nothing): every run succeeds and plans no deletion; the kept addresses of
every run number the objects staged (objects + commits x changed); both runners read the same files; a warm run
says the cache was used and read only the new files; at the end a cache-on run and a cache-off run of history keep
the same addresses. Writes bench/results/gc-cache.json and .md (``--output`` elsewhere; ``--quick`` writes
nothing).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from common import (  # noqa: E402
    ROOT,
    STORE_NAMES,
    CheckFailed,
    World,
    cache_available,
    check,
    gc_run,
    machine,
    spark_context,
)
from generate import BulkMetadataOnly, HistoryShape, extend, generate, staged_base  # noqa: E402
from proctree import machine_busy, tree_cpu  # noqa: E402

from tests.services import ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY  # noqa: E402

QUICK = {"objects": 300, "commits": 8, "changed": 2, "warm_commits": 2, "rounds": 1, "profile_files": 5}
CACHE_PREFIX = "_lakefs/retention/gc/janitor-mark-cache"


class Repo:
    def __init__(self, name: str, generated, expected: int) -> None:
        self.name, self.generated, self.expected = name, generated, expected


def timed(world: World, gc, repo: Repo, *, cache: bool | None, what: str) -> dict[str, Any]:
    me = os.getpid()
    busy0, ours0 = machine_busy(), tree_cpu(me)
    started = time.perf_counter()
    summary, marked = gc_run(gc, repo.name, "dry-run", cache=cache, min_age=timedelta(0))
    elapsed = time.perf_counter() - started
    other = max(0.0, (machine_busy() - busy0) - (tree_cpu(me) - ours0)) / elapsed
    check(summary.success and summary.num_deleted_objects == 0,
          f"{world.kind}/{gc.runner_name} {what}: a dry run over metadata-only objects planned {summary.num_deleted_objects}")
    check(len(marked.kept) == repo.expected,
          f"{world.kind}/{gc.runner_name} {what}: kept {len(marked.kept)} addresses, {repo.expected} staged")
    return {"seconds": elapsed, "phases": dict(summary.seconds), "metaranges": summary.metaranges,
            "ranges": summary.ranges, "files": summary.metaranges + summary.ranges,
            "cache": dict(getattr(summary, "cache", {}) or {}), "other_cpu_cores": round(other, 2),
            "kept": len(marked.kept)}


def drop_cache(world: World, namespace: str) -> None:
    fs = world.store.filesystem()
    path = world.store.fsspec_path(namespace, CACHE_PREFIX)
    if fs.exists(path):
        fs.rm(path, recursive=True)


def med(runs: list[dict[str, Any]], key: str = "seconds") -> float:
    return statistics.median(r[key] if key == "seconds" else r["phases"][key] for r in runs)


def make_repos(world: World, a: argparse.Namespace) -> tuple[Repo, Repo]:
    end = datetime.now(UTC) - timedelta(hours=1)
    repos = []
    for name, commits in (("single", 0), ("history", a.commits)):
        namespace = world.store.namespace(name)
        writer = BulkMetadataOnly(staged_base(world.store, namespace), world.server.endpoint, ADMIN_ACCESS_KEY,
                                  ADMIN_SECRET_KEY)
        started = time.monotonic()
        # dated so that warm rounds can add commits after them, still in the past
        made = generate(world.lakefs, repository_id=name, storage_namespace=namespace,
                        shape=HistoryShape(a.objects, commits, a.changed, "append"), writer=writer,
                        end=end - timedelta(minutes=10 * (a.rounds + 2) * a.warm_commits),
                        step=timedelta(minutes=1), progress=print)
        world.rules(name, 3650)
        made.writer = writer
        print(f"{world.kind}: {name} generated in {time.monotonic() - started:.0f} s", flush=True)
        repos.append(Repo(name, made, a.objects + commits * a.changed))
    return repos[0], repos[1]


def add_commits(world: World, repo: Repo, a: argparse.Namespace) -> None:
    last = datetime.now(UTC) - timedelta(minutes=10 * (a.rounds + 2) * a.warm_commits)
    n_done = len(repo.generated.commit_ids)
    extend(world.lakefs, repo.generated, shape=HistoryShape(a.objects, a.warm_commits, a.changed, "append"),
           writer=repo.generated.writer, first=last + timedelta(minutes=n_done - a.commits),
           step=timedelta(minutes=1))
    repo.expected += a.warm_commits * a.changed


def profile_files(world: World, gc, repo: Repo, n: int, out_dir: Path | None) -> dict[str, Any]:
    """Where one cold file's time goes, stage by stage, for the first ``n`` ranges of history in key order
    (and all its metaranges up to ``n``); then cProfile of one whole cold mark of history."""
    from spark_jobs.core import sstable  # noqa: PLC0415
    from spark_jobs.core.addresses import relative_key  # noqa: PLC0415
    from spark_jobs.engine.runtime.context import JobConfig  # noqa: PLC0415

    summary, marked = gc_run(gc, repo.name, "dry-run", cache=False, min_age=timedelta(0))
    storage = gc.storage
    storage = type(storage)(marked.graph.namespace, marked.graph.local_root, storage.options_json,
                            storage.max_in_flight)
    ctx = JobConfig(gc.api, storage, repo.name).open()
    ranges = marked.ranges[:n]
    metaranges = sorted({c.meta_range_id for c in marked.graph.commits.values() if c.meta_range_id})[:n]
    t: dict[str, float] = dict.fromkeys(("fetch", "open", "index", "hash", "decode", "map"), 0.0)
    blocks = decoded = entries = nbytes = 0
    seen: set[bytes] = set()
    for rid in ranges:
        t0 = time.perf_counter()
        data = ctx.read_range(rid)
        t1 = time.perf_counter()
        table = sstable._Table(data)  # noqa: SLF001 - the stages of range_addresses, timed one by one
        t2 = time.perf_counter()
        handles = table.data_handles()
        t3 = time.perf_counter()
        digests = [sstable._blake2b(table.data[o:o + s + 1], digest_size=16).digest() for o, s in handles]  # noqa: SLF001
        t4 = time.perf_counter()
        out: list[tuple[str, int]] = []
        for (o, s), d in zip(handles, digests, strict=True):
            if d not in seen:
                sstable._block_addresses(table.block((o, s)), out)  # noqa: SLF001
                seen.add(d)
                decoded += 1
        t5 = time.perf_counter()
        keys = {k for a, kind in out if (k := relative_key(a, kind, ctx.prefixes)) is not None}
        t6 = time.perf_counter()
        for stage, dt in zip(t, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t6 - t5), strict=True):
            t[stage] += dt
        blocks += len(handles)
        entries += len(out)
        nbytes += len(data)
        del keys
    m_fetch = m_decode = 0.0
    spans = 0
    for mid in metaranges:  # decoded as the engine's mark decodes them: spans, blocks shared in the partition
        t0 = time.perf_counter()
        data = ctx.read_metarange(mid)
        t1 = time.perf_counter()
        spans += len(sstable.metarange_spans(data, seen_blocks=ctx.metarange_blocks))
        m_fetch += t1 - t0
        m_decode += time.perf_counter() - t1
    result: dict[str, Any] = {
        "ranges": len(ranges), "metaranges": len(metaranges), "range_bytes_mean": nbytes / max(1, len(ranges)),
        "blocks_per_range": blocks / max(1, len(ranges)), "blocks_decoded": decoded, "entries_decoded": entries,
        "ranges_per_metarange": spans / max(1, len(metaranges)),
        "range_ms": {k: 1000 * v / max(1, len(ranges)) for k, v in t.items()},
        "metarange_ms": {"fetch": 1000 * m_fetch / max(1, len(metaranges)),
                         "decode": 1000 * m_decode / max(1, len(metaranges))}}
    if world.kind == "s3":  # the same GETs through a bare boto3 client: what fsspec/s3fs adds per request
        client = world.store.client()
        bucket, _, prefix = world.store.fsspec_path(marked.graph.namespace).partition("/")
        t0 = time.perf_counter()
        for rid in ranges:
            client.get_object(Bucket=bucket, Key=f"{prefix}/_lakefs/{rid}")["Body"].read()
        result["range_ms"]["fetch_boto3"] = 1000 * (time.perf_counter() - t0) / max(1, len(ranges))
        # and with 8 threads, as ThreadRunner(8) fetches: wall time per file through Namespace.read (s3fs: one
        # event-loop thread serves every thread's requests) and through one boto3 client shared by the threads
        from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

        for name, fetch in (("ns_8_threads", ctx.read_range),
                            ("boto3_8_threads", lambda rid: client.get_object(
                                Bucket=bucket, Key=f"{prefix}/_lakefs/{rid}")["Body"].read())):
            t0 = time.perf_counter()
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(fetch, ranges))
            result["range_ms"][f"fetch_{name}"] = 1000 * (time.perf_counter() - t0) / max(1, len(ranges))
    ctx.close()
    text, result["profiled_run_seconds"] = profiled(
        lambda: gc_run(inline(gc), repo.name, "dry-run", cache=False, min_age=timedelta(0)))
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / f"gc-cold-profile-{world.kind}.txt").write_text(
            f"cProfile of one cold dry run of history (the threads runner's work in one thread; profiler overhead "
            "included: "
            f"{result['profiled_run_seconds']:.2f} s wall)\n\n" + text)
    return result


class InlineRunner:
    """The threads runner's work in the calling thread (one partition, one context), so that cProfile sees it:
    cProfile follows one thread, and ThreadRunner's pool threads would show only as waiting."""

    def map_units(self, units, fn, make_context, *, partitions):
        context = make_context()
        try:
            return [item for unit in units for item in fn(context, unit)]
        finally:
            context.close()


def inline(gc):
    import dataclasses  # noqa: PLC0415

    return dataclasses.replace(gc, runner=InlineRunner())


def profiled(fn) -> tuple[str, float]:
    """cProfile of ``fn()`` (run it on ``inline(collector)``), top 30 by own time and 40 by cumulative time;
    and the wall seconds."""
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    fn()
    profiler.disable()
    seconds = time.perf_counter() - started
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("tottime").print_stats(30)
    stats.sort_stats("cumulative").print_stats(40)
    return text.getvalue(), seconds


def bench_store(world: World, runners: dict[str, Any], a: argparse.Namespace, warm: bool,
                out_dir: Path | None) -> dict[str, Any]:
    single, history = make_repos(world, a)
    res: dict[str, Any] = {"objects": a.objects, "commits": a.commits, "changed": a.changed,
                           "generate_seconds": None, "cold": {}, "warm": {}}
    names = list(runners)
    for gc in runners.values():  # warm-up, untimed (JVM and Python workers, imports, fsspec clients)
        gc_run(gc, single.name, "dry-run", cache=False, min_age=timedelta(0))
    cold: dict[str, dict[str, list]] = {r: {"single": [], "history": []} for r in names}
    for n in range(a.rounds):
        for runner in (names if n % 2 == 0 else names[::-1]):
            for repo in ((single, history) if n % 2 == 0 else (history, single)):
                r = timed(world, runners[runner], repo, cache=False, what=f"cold {repo.name}")
                cold[runner][repo.name].append(r)
                print(f"  {world.kind} {runner} cold {repo.name}: {r['seconds']:.2f} s (mark "
                      f"{r['phases']['mark']:.2f}), {r['files']} files, other CPU {r['other_cpu_cores']}", flush=True)
    for runner, c in cold.items():
        s, h = c["single"], c["history"]
        files_s, files_h = s[-1]["files"], h[-1]["files"]
        check(files_h > files_s, f"{world.kind}/{runner}: {a.commits} commits read no new files")
        res["cold"][runner] = {
            "single": s, "history": h, "single_median": med(s), "history_median": med(h),
            "ratio": med(h) / med(s), "ratios": [x["seconds"] / y["seconds"] for x, y in zip(h, s, strict=True)],
            "mark_single": med(s, "mark"), "mark_history": med(h, "mark"),
            "files_single": files_s, "files_history": files_h,
            "ms_per_file": 1000 * (med(h, "mark") - med(s, "mark")) / (files_h - files_s)}
    files = {(c["files_single"], c["files_history"]) for c in res["cold"].values()}
    check(len(files) == 1, f"{world.kind}: the runners read different numbers of files: {files}")
    if "threads" in runners and a.profile_files:
        res["profile"] = profile_files(world, runners["threads"], history, a.profile_files, out_dir)
    if not warm:
        return res
    # Warm: fill the caches (timed: a cold run that writes the cache), then rounds of +commits and runs
    for runner in names:
        drop_cache(world, history.generated.storage_namespace)
        r = timed(world, runners[runner], history, cache=True, what="cold, writing the cache")
        check(r["cache"].get("state") == "empty", f"{world.kind}/{runner}: a dropped cache reads as {r['cache']}")
        res["warm"].setdefault(runner, {})["cold_writing_cache"] = r
        print(f"  {world.kind} {runner} cold writing the cache: {r['seconds']:.2f} s", flush=True)
    timed(world, runners[names[0]], single, cache=True, what="single, filling its cache")
    warm_runs: dict[str, dict[str, list]] = {r: {"warm": [], "single_warm": [], "single_cold": []} for r in names}
    for n in range(a.rounds):
        for runner in (names if n % 2 == 0 else names[::-1]):
            gc = runners[runner]
            add_commits(world, history, a)
            w = timed(world, gc, history, cache=True, what="warm")
            check(w["cache"].get("state") == "used" and w["cache"].get("ranges_read", 0) <= 2 * a.warm_commits + 2,
                  f"{world.kind}/{runner}: a warm run after {a.warm_commits} commits: {w['cache']}")
            sw = timed(world, gc, single, cache=True, what="single warm")
            sc = timed(world, gc, single, cache=False, what="single cold")
            for k, v in (("warm", w), ("single_warm", sw), ("single_cold", sc)):
                warm_runs[runner][k].append(v)
            print(f"  {world.kind} {runner} warm: {w['seconds']:.2f} s ({w['cache'].get('ranges_read')} ranges "
                  f"read), single warm {sw['seconds']:.2f} s, single cold {sc['seconds']:.2f} s, other CPU "
                  f"{w['other_cpu_cores']}", flush=True)
    for runner, wr in warm_runs.items():
        w, sw, sc = wr["warm"], wr["single_warm"], wr["single_cold"]
        res["warm"][runner].update({
            **wr, "warm_median": med(w), "single_warm_median": med(sw), "single_cold_median": med(sc),
            "warm_vs_single_warm": med(w) / med(sw), "warm_vs_single_cold": med(w) / med(sc),
            "ratios_vs_single_warm": [x["seconds"] / y["seconds"] for x, y in zip(w, sw, strict=True)],
            "cold_vs_warm": res["cold"][runner]["history_median"] / med(w),
            "warm_mark": med(w, "mark")})
    if "threads" in runners and out_dir is not None:  # where a warm run's time goes
        add_commits(world, history, a)
        text, seconds = profiled(lambda: gc_run(inline(runners["threads"]), history.name, "dry-run", cache=True,
                                                min_age=timedelta(0)))
        (out_dir / f"gc-warm-profile-{world.kind}.txt").write_text(
            f"cProfile of one warm dry run of history after {a.warm_commits} more commits (the threads runner's "
            "work in one thread; "
            f"profiler overhead included: {seconds:.2f} s wall)\n\n" + text)
        res["warm"]["threads"]["profiled_run_seconds"] = seconds
    # The cache changes nothing: a cache-on and a cache-off run of the same state keep the same addresses
    gc = runners[names[0]]
    _, on = gc_run(gc, history.name, "dry-run", cache=True, min_age=timedelta(0))
    _, off = gc_run(gc, history.name, "dry-run", cache=False, min_age=timedelta(0))
    check(on.kept == off.kept and len(on.kept) == history.expected,
          f"{world.kind}: the cache-on run kept {len(on.kept)} addresses, the cache-off run {len(off.kept)}")
    return res


def report_lines(results: dict[str, Any]) -> list[str]:
    a = results["args"]
    out = ["", f"Cold (cache off): single = {a['objects']:,} objects in 1 commit, history = the same + "
           f"{a['commits']:,} commits x {a['changed']} new files; median s of {a['rounds']} alternating rounds.", "",
           "| store | runner | single s | history s | **history / single** | mark phase single -> history s | "
           "files read | **ms per file** |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for kind, r in results["stores"].items():
        for runner, c in r["cold"].items():
            out.append(f"| {STORE_NAMES[kind]} | {runner} | {c['single_median']:.2f} | {c['history_median']:.2f} | "
                       f"**{c['ratio']:.2f}** | {c['mark_single']:.2f} -> {c['mark_history']:.2f} | "
                       f"{c['files_single']} -> {c['files_history']} | **{c['ms_per_file']:.2f}** |")
    profiles = {k: r["profile"] for k, r in results["stores"].items() if "profile" in r}
    if profiles:
        stages = ["fetch", "fetch_boto3", "fetch_ns_8_threads", "fetch_boto3_8_threads", "open", "index", "hash",
                  "decode", "map"]
        out += ["", "Where a cold range file's time goes (ms per file, one thread, in key order; first "
                f"{a['profile_files']} ranges of history):", "",
                "| store | " + " | ".join(stages) + " | metarange fetch / decode | mean range KiB | blocks "
                "per range | blocks decoded |", "|---|" + "---:|" * (len(stages) + 4)]
        for kind, p in profiles.items():
            ms = p["range_ms"]
            out.append(f"| {STORE_NAMES[kind]} | " + " | ".join(f"{ms[s]:.3f}" if s in ms else "—" for s in stages)
                       + f" | {p['metarange_ms']['fetch']:.3f} / {p['metarange_ms']['decode']:.3f} | "
                       f"{p['range_bytes_mean'] / 1024:.1f} | {p['blocks_per_range']:.1f} | {p['blocks_decoded']} |")
    warm = {(k, runner): w for k, r in results["stores"].items() for runner, w in r.get("warm", {}).items()
            if "warm_median" in w}
    if warm:
        out += ["", f"Warm (cache on): after the cold run, each round adds {a['warm_commits']} commits to history and "
                "runs it; single measured in the same round with its cache (warm) and without (cold).", "",
                "| store | runner | cold run writing the cache s | warm s (ranges read) | single warm s | single cold s "
                "| **warm / single warm** (goal <= 1.5) | warm / single cold | **cold / warm** |",
                "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
        for (kind, runner), w in warm.items():
            read = sorted({x["cache"].get("ranges_read") for x in w["warm"]})
            out.append(f"| {STORE_NAMES[kind]} | {runner} | {w['cold_writing_cache']['seconds']:.2f} | "
                       f"{w['warm_median']:.2f} ({'/'.join(map(str, read))}) | {w['single_warm_median']:.2f} | "
                       f"{w['single_cold_median']:.2f} | **{w['warm_vs_single_warm']:.2f}** | "
                       f"{w['warm_vs_single_cold']:.2f} | **{w['cold_vs_warm']:.1f}** |")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", default="local,s3")
    # the mark cache is the thread runner's: the Spark runner plans a full run as datasets on its executors
    parser.add_argument("--runners", default="threads")
    parser.add_argument("--objects", type=int, default=100_000)
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--changed", type=int, default=10)
    parser.add_argument("--warm-commits", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile-files", type=int, default=300, help="0: no per-file profile")
    parser.add_argument("--no-warm", action="store_true", help="cold runs only (an engine without the mark cache)")
    parser.add_argument("--quick", action="store_true", help="small sizes, the checks only; writes nothing")
    parser.add_argument("--output", type=Path, default=None, help="default bench/results/gc-cache.json")
    args = parser.parse_args()
    if args.quick:
        for key, value in QUICK.items():
            setattr(args, key, value)
    output = args.output or (None if args.quick else ROOT / "bench" / "results" / "gc-cache.json")
    warm = not args.no_warm and cache_available()
    if not args.no_warm and not warm:
        print("cache_bench: this engine has no mark cache (RunRequest.cache): cold runs only", flush=True)
    runner_names = [r for r in args.runners.split(",") if r]
    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    results: dict[str, Any] = {"date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "git": git.strip(),
                               "args": vars(args) | {"output": str(output)}, "warm_measured": warm,
                               "machine": machine(("pyspark", "lakefs-sdk", "s3fs", "cramjam", "pyarrow")),
                               "stores": {}}
    spark = spark_context() if "spark" in runner_names else None
    started = time.monotonic()
    try:
        for kind in [s for s in args.stores.split(",") if s]:
            world = World(kind)
            try:
                runners = {r: world.collector(r, spark) for r in runner_names}
                results["stores"][kind] = bench_store(world, runners, args, warm,
                                                      None if output is None else output.parent)
            finally:
                world.close()
    except CheckFailed as exc:
        print(f"FAIL: {exc}", file=sys.stderr)
        return 1
    finally:
        if spark is not None:
            spark.stop()
    results["seconds"] = time.monotonic() - started
    lines = report_lines(results)
    print("\n".join(lines))
    print(f"cache_bench: all checks hold ({results['seconds']:.0f} s)")
    if output:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(results, indent=2, default=str) + "\n")
        output.with_suffix(".md").write_text("\n".join(
            [f"# bench/gc cold and warm runs — {results['date']} (git {results['git']})", *lines, ""]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
