"""bench/gc daily runs (issue 28): the incremental GC run after a day's commits against the full run it replaces,
at 100k and 1M objects, on local disk and versitygw, with both runners.

    .venv/bin/python bench/gc/daily_bench.py [--stores local,s3] [--runners threads,spark]
        [--sizes 100000,1000000] [--s3-sizes 100000] [--rounds 3] [--commits 10] [--overwrites 30] [--deletes 10] [--uploads 20]
        [--no-warmup] [--output PATH] [--profile DIR]
    .venv/bin/python bench/gc/daily_bench.py --quick   # a few thousand objects, local disk, threads: checks only

Per store (``local`` = lakeFS's local blockstore, ``s3`` = versitygw; tests/services.py) a lakeFS v1.84 on it, on
127.0.0.1, stopped at the end. One repository grows through the sizes exactly as in scale_bench.py (its ``grow``:
objects staged in bulk by ``generate.BulkMetadataOnly``, an empty file written behind every address, dated 3 days
before the first simulated day, in lakeFS-named slices opened 30 days ago; its commits dated 90 days ago and
earlier). GC rules keep 30 days; every commit the bench adds is dated 90 days ago too, so only the HEAD is retained (by the engine's rule and by
lakeFS's own retained set) and each day's overwritten and deleted versions are garbage.

Per size, store and runner:

1. **Setup** (untimed): one real run (``listing="full"``, not dry) in a child process: it deletes whatever is
   garbage and leaves the state the next run starts from (``_lakefs/…/janitor-incremental``).
2. **Each round** (``--rounds``), a simulated day: ``--commits`` commits (untimed), each overwriting ``--overwrites``
   and deleting ``--deletes`` objects at random paths (``--pattern tail``: among the newest 50,000 paths, those of
   one table, so that the day touches one or two ranges), the new versions in a slice of their own named as lakeFS
   names a slice opened now, their files dated now; plus ``--uploads`` files written into a recent slice and never
   staged (uncommitted garbage: the GC runs with min age 0). Then two **dry** runs on the same state, each in a
   fresh child process (one untimed warm-up run of the same kind, then the timed one; ``--no-warmup``: only the
   timed one), the order alternating between rounds: the incremental run (``listing="auto"``) and the full run
   (``listing="full"``). This process samples each child's process tree every 0.1 s (bench/gc/proctree.py:
   driver Python, Spark's JVM, the JVM's Python workers) for peak resident memory. On S3, in the last round, the
   same two dry runs once more in this process (threads runner, untimed) through a counting pass-through proxy
   (bench_gc.RequestCounter on tests.services.ThrottlingProxy): the S3 requests of each, by kind (without the
   range cache: the requests a run makes whatever it kept). Last, one real incremental run (untimed, its own child)
   deletes the day's garbage and advances the state.

Every run in a child uses the range cache as deployed (``--range-cache-mib``, 2 GiB by default; 0: off), in a folder
of the bench's own: an incremental run keeps copies of the range files it compares (on a store other than this
machine's disk), so a round's dead ranges come from the copies the day before kept, except in the first round
(its dead ranges are the setup's full run's, which keeps none). Each round's figure says how many came from it.

Tracked: incremental / full time per size (goal at 1M: <= 1/20), the incremental run's growth from the smallest to
the largest size (goal <= 2), peak memory of each, objects and requests listed by each, and from them the cost per
listed object and per request and a **projection** to 1B objects (arithmetic on the measured costs, not a
measurement).

Checks (a failure exits 1 and writes nothing): every run succeeds; the incremental dry run says kind
"incremental", the full one kind "full" with nothing missed by the incremental rule; both plan exactly the day's
garbage (the versions the day's commits replaced or deleted, as lakeFS addressed them, and the uploads); the real
incremental run deletes exactly that, and those objects are gone from the store.
Writes bench/results/gc-daily.json and .md (``--output`` elsewhere; ``--quick`` writes nothing), and after each
runner's measurements what is measured so far to gc-daily.partial.json (removed at the end).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from common import ROOT, STORE_NAMES, CheckFailed, World, check, machine  # noqa: E402
from generate import BulkMetadataOnly, _base_path, _commit, staged_base, touch_files  # noqa: E402
from proctree import TreeSampler, machine_busy, tree_cpu  # noqa: E402
from scale_bench import REPO, grow  # noqa: E402

from spark_jobs.core.slices import slice_name  # noqa: E402
from spark_jobs.engine.runtime.range_cache import RangeCacheSettings  # noqa: E402
from tests.services import ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY, ThrottlingProxy  # noqa: E402

QUICK = {"stores": "local", "runners": "threads", "sizes": "1500,4000", "rounds": 2, "commits": 3,
         "overwrites": 5, "deletes": 3, "uploads": 4, "warmup": False}
TAIL = 50_000  # --pattern tail: the paths of tables/t0/ among the newest TAIL paths
COMMITS_DATED = timedelta(days=90)  # before the 30 days the rules keep, even on the first simulated day


# --- the child: one runner, one process, a few runs ---------------------------------------------------------------
def child(spec: dict[str, Any]) -> int:
    from common import gc_run, spark_context  # noqa: PLC0415

    from spark_jobs.engine.runtime.parallel import ThreadRunner  # noqa: PLC0415
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
    if spec.get("range_cache"):  # as deployed (gc.range_cache_folder): the folder outlives each child
        gc = replace(gc, range_cache=RangeCacheSettings(spec["range_cache"], spec["range_cache_mib"]))
    runs = []
    try:
        for run in spec["runs"]:
            say(f"MARK {run['name']}")
            profiler = Profiler(spec.get("profile"), f"{spec['runner']}-{run['name']}")
            started = time.perf_counter()
            with profiler:
                summary, marked = gc_run(gc, spec["repo"], "dry-run" if run["dry_run"] else "full",
                                         min_age=timedelta(0), listing=run["listing"], cache=spec["cache"],
                                         now=datetime.fromisoformat(spec["now"]))
            runs.append(describe(run["name"], time.perf_counter() - started, summary, marked))
    finally:
        say("MARK stop")
        if sc is not None:
            sc.stop()
    say("RESULT " + json.dumps(runs))
    return 0


class Profiler:
    """--profile: where a run's time goes. py-spy (when on PATH) samples every thread of this process, the engine's
    worker threads too, into ``<name>.txt`` (collapsed stacks: ``sort -t' ' -k2 -n``); else cProfile, which sees the
    calling thread only, into ``<name>.prof``. Nothing without a folder."""

    def __init__(self, folder: str | None, name: str) -> None:
        self.folder, self.name = folder, f"{name}-{os.getpid()}"
        self.spy: subprocess.Popen | None = None
        self.profile: cProfile.Profile | None = None

    def __enter__(self) -> None:
        if not self.folder:
            return
        if spy := shutil.which("py-spy"):
            out = Path(self.folder) / f"{self.name}.txt"
            self.spy = subprocess.Popen([spy, "record", "--pid", str(os.getpid()), "--rate", "500", "--threads",
                                         "--format", "raw", "--output", str(out)], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
            time.sleep(0.5)  # attached before the run starts
        else:
            self.profile = cProfile.Profile()
            self.profile.enable()

    def __exit__(self, *exc: object) -> None:
        if self.spy is not None:
            self.spy.send_signal(signal.SIGINT)  # py-spy writes what it sampled when interrupted
            self.spy.wait(timeout=60)
        if self.profile is not None:
            self.profile.disable()
            self.profile.dump_stats(Path(self.folder) / f"{self.name}.prof")


def describe(name: str, seconds: float, summary, marked) -> dict[str, Any]:
    return {"name": name, "seconds": seconds, "phases": dict(summary.seconds),
            "listing": dict(getattr(summary, "listing", {}) or {}), "success": summary.success,
            "error": summary.error, "planned": summary.num_deleted_objects, "swept": summary.swept,
            "deleted_keys": sorted(o.key for o in marked.deleted), "kept": summary.kept_objects,
            "kept_addresses": len(marked.kept), "ranges": summary.ranges,
            "cache": dict(getattr(summary, "cache", {}) or {})}


def in_child(world: World, runner: str, runs: list[dict[str, Any]], now: datetime) -> dict[str, Any]:
    """``runs`` in a fresh child process, dated ``now``, its tree sampled; each run's record with its segment's
    peaks."""
    spec = {"runner": runner, "repo": REPO, "endpoint": world.server.endpoint, "options": world.options(),
            "runs": runs, "cache": world.mark_cache, "now": now.isoformat(), "profile": world.profile,
            "range_cache": world.range_cache, "range_cache_mib": world.range_cache_mib}
    proc = subprocess.Popen([sys.executable, __file__, "--child", json.dumps(spec)], stdout=subprocess.PIPE,
                            text=True, cwd=ROOT)
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
    for r in result:
        seg = segments.get(r["name"], {})
        r["peak_mib"] = seg.get("peak_mib")
        r["peak_by_role_mib"] = seg.get("peak_by_role_mib", {})
        r["cpu_seconds"] = seg.get("cpu_seconds")
    return {"runs": {r["name"]: r for r in result}, "start_peak_mib": segments.get("start", {}).get("peak_mib"),
            "child_wall_seconds": wall, "other_cpu_cores": round(max(0.0, other) / wall, 2)}


# --- a day of commits -----------------------------------------------------------------------------------------------
class Day:
    """The repository's paths, and what each simulated day makes garbage. Day ``n`` of ``total`` is ``total - n``
    days before the wall clock (a real run may not be dated in the future): its runs are dated then, its new
    slices opened then and its files written then, so that each incremental run lists one day's slices, as a
    daily run does (the engine takes a run's time from the request, an object's age from its file's time and a
    slice's age from its name)."""

    def __init__(self, world: World, namespace: str, a: argparse.Namespace, total: int, seed: int = 0) -> None:
        self.world, self.namespace, self.a = world, namespace, a
        self.rng = random.Random(seed)
        self.size = 0
        self.gone: set[int] = set()  # base paths deleted
        self.folder = world.store.fsspec_path(namespace).rstrip("/") + "/"
        self.writer = BulkMetadataOnly(staged_base(world.store, namespace), world.server.endpoint,
                                       ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY)  # the files: written here, dated now
        self.days = 0
        self.total = total
        self.commit_seq = 0

    def now(self) -> datetime:
        return datetime.now(UTC) - timedelta(days=self.total - self.days)

    def touch(self, keys: list[str]) -> None:
        """Files at ``keys``, written a minute before this day's now."""
        touch_files(self.world.store, self.namespace, keys, age_seconds=60 + 86400 * (self.total - self.days))

    def key_of(self, address: str) -> str:
        return address.rsplit(self.folder, 1)[-1]

    def address(self, path: str) -> str:
        lakefs = self.world.lakefs
        return lakefs.call("stat", lakefs.objects.stat_object, REPO, "main", path).physical_address

    def slice(self, what: int) -> str:
        return slice_name(self.now() - timedelta(minutes=30 - what),
                          b"d" + self.days.to_bytes(2, "big") + what.to_bytes(2, "big"))

    def one_day(self) -> dict[str, Any]:
        """Commits and uploads; returns the keys that are garbage now, and what was done."""
        import lakefs_sdk  # noqa: PLC0415

        a, lakefs = self.a, self.world.lakefs
        self.days += 1
        garbage: set[str] = set()
        started = time.monotonic()
        new_objects = 0
        before = self.head()
        if a.pattern == "tail":  # the newest paths of one table (tables/t0/): what a day's compaction touches
            start = max(0, self.size - TAIL)
            pool = range(start - start % 10, self.size, 10)
        else:  # anywhere in the lake
            pool = range(self.size)
        for c in range(a.commits):
            alive = [i for i in self.rng.sample(pool, min(len(pool), 3 * (a.overwrites + a.deletes)))
                     if i not in self.gone]
            over = [_base_path(i) for i in alive[:a.overwrites]]
            dead = alive[a.overwrites:a.overwrites + a.deletes]
            for path in over + [_base_path(i) for i in dead]:
                garbage.add(self.key_of(self.address(path)))
            if over:
                slice_id = self.slice(c)
                addresses = self.writer.many(REPO, "main", [(p, slice_id) for p in over], 100)
                self.touch([self.key_of(x) for x in addresses])
                new_objects += len(addresses)
            if dead:
                lakefs.call("delete", lakefs.objects.delete_objects, REPO, "main",
                            lakefs_sdk.PathList(paths=[_base_path(i) for i in dead]))
                self.gone.update(dead)
            self.commit_seq += 1
            _commit(lakefs, REPO, "main", f"day {self.days} commit {c}",
                    datetime.now(UTC) - COMMITS_DATED + timedelta(seconds=self.commit_seq))
        uploads = [f"data/{self.slice(a.commits)}/{uuid.uuid4().hex}" for _ in range(a.uploads)]
        self.touch(uploads)
        garbage.update(uploads)
        return {"garbage": garbage, "new_objects": new_objects, "uploads": len(uploads),
                "seconds": time.monotonic() - started, "before": before, "after": self.head()}

    def head(self) -> str:
        return self.world.lakefs.branches.get_branch(REPO, "main").commit_id

    def day_ranges(self, before: str, after: str) -> tuple[dict[str, bytes], set[str]]:
        """The range files a day replaced (dead) and wrote (new): those an incremental run compares."""
        from spark_jobs.core import sstable  # noqa: PLC0415

        fs = self.world.store.filesystem()

        def read(object_id: str) -> bytes:
            return fs.cat_file(self.world.store.fsspec_path(self.namespace, f"_lakefs/{object_id}"))

        def ranges(commit: str) -> set[str]:
            metarange = self.world.lakefs.commits.get_commit(REPO, commit).meta_range_id
            return set(sstable.metarange_range_ids(read(metarange))) if metarange else set()

        old, new = ranges(before), ranges(after)
        return {r: read(r) for r in sorted(old ^ new)}, old - new


# --- the day's ranges, decoded -------------------------------------------------------------------------------------
def decoder_figures(files: dict[str, bytes], dead: set[str], *, careful: bool) -> dict[str, Any]:
    """The day's dead and new range files decoded in this process, on one thread: the compiled walk
    (range_arrow.range_batch, checksums and Snappy included) and, with ``careful``, the careful decoder it
    replaced (sstable.range_entries), in MB/s of uncompressed range data and entries/s of CPU time; then the day's
    change as the incremental run finds it (range_changes.changes, two threads; wall and process CPU time). Checks
    that both decoders agree and that the change is the careful count's."""
    import gc  # noqa: PLC0415
    from collections import Counter  # noqa: PLC0415
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    from spark_jobs.core import range_arrow, range_changes, sstable  # noqa: PLC0415

    uncompressed = sum(len(b) for d in files.values() for b in sstable._Table(d).data_blocks())  # noqa: SLF001
    out: dict[str, Any] = {"ranges": len(files), "dead": len(dead), "file_mb": sum(map(len, files.values())) / 1e6,
                           "uncompressed_mb": uncompressed / 1e6, "compiled": range_arrow.compiled()}
    gc.collect()
    # CPU time of this thread, the best of 5: the machine is shared (other processes' load stretches wall time,
    # not the work); the wall time is kept beside it
    best = wall = float("inf")
    for _ in range(5):
        started, cpu = time.perf_counter(), time.thread_time()
        batches = [range_arrow.range_batch(d) for d in files.values()]
        best, wall = min(best, time.thread_time() - cpu), min(wall, time.perf_counter() - started)
    entries = sum(b.num_rows for b in batches)
    out.update(entries=entries, fast_s=best, fast_wall_s=wall, decoder_mb_s=uncompressed / 1e6 / best,
               entries_per_s=entries / best)
    if careful:
        cpu = time.thread_time()
        rows = [sstable.range_entries(d) for d in files.values()]
        slow = time.thread_time() - cpu
        check(all(b.equals(range_arrow._from_entries(r)) for b, r in zip(batches, rows, strict=True)),  # noqa: SLF001
              "the compiled walk and the careful decoder disagree on the day's ranges")
        out.update(careful_s=slow, careful_mb_s=uncompressed / 1e6 / slow, speedup=slow / best)
    del batches
    with ThreadPoolExecutor(2) as pool:
        walls, cpus = [], []
        for _ in range(3):
            started, cpu = time.perf_counter(), time.process_time()
            found, tally = range_changes.changes(files, dead, map_=pool.map)
            walls.append(time.perf_counter() - started)
            cpus.append(time.process_time() - cpu)
        out.update(change_s=min(walls), change_cpu_s=min(cpus))
    want: Counter = Counter()
    for range_id, data in files.items():
        for _, address, kind, _ in sstable.range_entries(data):
            want[(address, kind)] += -1 if range_id in dead else 1
    check({(a, k): n for a, k, n in found} == {k: n for k, n in want.items() if n},
          "the day's change differs from the careful count")
    out["change"] = tally.as_dict()
    return out


def fixed_costs(rounds: int = 5) -> dict[str, float]:
    """A daily run starts a fresh process: what importing the decoder costs there (no JIT: the walk is compiled
    at install), against an interpreter that imports nothing; medians of ``rounds``."""
    def seconds(code: str) -> float:
        runs = []
        for _ in range(rounds):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
            runs.append(time.perf_counter() - started)
        return statistics.median(runs)

    bare = seconds("pass")
    return {"python_s": bare, "import_range_arrow_s": seconds("import spark_jobs.core.range_arrow") - bare,
            "import_lean_mark_s": seconds("import spark_jobs.engine.reach.lean_mark") - bare}


# --- the S3 requests of a run, counted --------------------------------------------------------------------------
def counted(world: World, *, listing: str, now: datetime) -> dict[str, Any]:
    from bench_gc import RequestCounter  # noqa: PLC0415
    from common import gc_run  # noqa: PLC0415

    counter = RequestCounter()
    proxy = ThrottlingProxy(world.store.endpoint, "s3", match=counter).start()
    try:
        gc = world.collector("threads", endpoint=proxy.url)
        summary, marked = gc_run(gc, REPO, "dry-run", min_age=timedelta(0), listing=listing,
                                 cache=world.mark_cache, now=now)
    finally:
        proxy.stop()
    return {"requests": dict(counter.counts), "listing": dict(summary.listing or {}),
            "deleted": len(marked.deleted)}


# --- one size, store and runner ---------------------------------------------------------------------------------
def check_run(r: dict[str, Any], garbage: set[str], what: str, *, kind: str | None, real: bool = False) -> None:
    check(r["success"], f"{what}: the run failed: {r['error']}")
    listing = r["listing"]
    if kind is not None:
        check(listing.get("kind") == kind, f"{what}: listing {listing}, expected kind {kind!r}")
    if kind == "full":
        check(listing.get("missed_by_incremental") in (0, None),
              f"{what}: the incremental rule would have missed {listing.get('missed_by_incremental')}")
    deleted = set(r["deleted_keys"])
    check(deleted == garbage, f"{what}: planned {len(deleted)} deletions, {len(garbage)} garbage objects; "
                              f"{len(deleted - garbage)} planned are not garbage (e.g. {sorted(deleted - garbage)[:3]}), "
                              f"{len(garbage - deleted)} missed (e.g. {sorted(garbage - deleted)[:3]}); listing {listing}")
    if real:
        check(r["swept"] == len(garbage), f"{what}: swept {r['swept']} of {len(garbage)}")


def bench_runner(world: World, day: Day, runner: str, size: int, a: argparse.Namespace) -> dict[str, Any]:
    tag = f"{world.kind} {size:,} {runner}"
    setup = in_child(world, runner, [{"name": "setup", "listing": "full", "dry_run": False}],
                     day.now())["runs"]["setup"]
    check(setup["success"], f"{tag} setup: {setup['error']}")
    print(f"  {tag} setup (real, full): {setup['seconds']:.1f} s, swept {setup['swept']}, "
          f"listing {setup['listing'].get('kind')} ({setup['listing'].get('reason', '')})", flush=True)
    rounds = []
    for n in range(a.rounds):
        made = day.one_day()
        garbage = made["garbage"]
        measured: dict[str, Any] = {}
        order = ("incremental", "full") if n % 2 == 0 else ("full", "incremental")
        for kind in order:
            listing = "auto" if kind == "incremental" else "full"
            runs = ([{"name": "warmup", "listing": listing, "dry_run": True}] if a.warmup else []) + \
                   [{"name": "timed", "listing": listing, "dry_run": True}]
            m = in_child(world, runner, runs, day.now())
            if a.warmup:
                check_run(m["runs"]["warmup"], garbage, f"{tag} round {n} {kind} warm-up", kind=kind)
            t = m["runs"]["timed"]
            check_run(t, garbage, f"{tag} round {n} {kind}", kind=kind)
            measured[kind] = {**{k: v for k, v in t.items() if k != "deleted_keys"},
                              "start_peak_mib": m["start_peak_mib"], "other_cpu_cores": m["other_cpu_cores"]}
        if world.kind == "s3" and n == a.rounds - 1:
            for kind in order:
                c = counted(world, listing="auto" if kind == "incremental" else "full", now=day.now())
                check(c["deleted"] == len(garbage), f"{tag} counted {kind}: planned {c['deleted']}")
                measured[f"requests_{kind}"] = c
        files, dead = day.day_ranges(made["before"], made["after"])
        if a.keep_ranges:  # the day's files, to profile the decoder on later
            folder = a.keep_ranges / f"{a.pattern}-{size}-{n}"
            folder.mkdir(parents=True, exist_ok=True)
            for range_id, data in files.items():
                (folder / f"{'dead' if range_id in dead else 'new'}-{range_id}.sst").write_bytes(data)
        measured["decoder"] = decoder_figures(files, dead, careful=n == 0)
        del files
        if a.lakefs_diff:
            from lakefs_diff_bench import diff_seconds  # noqa: PLC0415

            diffs = [diff_seconds(world.server.endpoint.rstrip("/"), made["before"], made["after"]) for _ in range(3)]
            measured["lakefs_diff"] = {"seconds": statistics.median(x for x, _ in diffs), "paths": diffs[0][1]}
        adv = in_child(world, runner, [{"name": "advance", "listing": "auto", "dry_run": False}],
                       day.now())["runs"]["advance"]
        check_run(adv, garbage, f"{tag} round {n} real incremental run", kind="incremental", real=True)
        fs = world.store.filesystem()
        left = [k for k in garbage if fs.exists(world.store.fsspec_path(day.namespace, k))]
        check(not left, f"{tag} round {n}: {len(left)} garbage objects still in the store after the real run")
        inc, full = measured["incremental"], measured["full"]
        rounds.append({"order": list(order), "garbage": len(garbage), "new_objects": made["new_objects"],
                       "day_seconds": made["seconds"], **measured,
                       "advance": {k: v for k, v in adv.items() if k != "deleted_keys"},
                       "ratio": inc["seconds"] / full["seconds"]})
        print(f"  {tag} round {n}: incremental {inc['seconds']:.2f} s ({inc['peak_mib']:.0f} MiB, "
              f"{inc['listing'].get('objects')} listed in {inc['listing'].get('slices')}/"
              f"{inc['listing'].get('slices_total')} slices, {inc['listing'].get('found_without_listing')} found "
              f"without listing), full {full['seconds']:.2f} s ({full['peak_mib']:.0f} MiB, "
              f"{full['listing'].get('objects')} listed), ratio {inc['seconds'] / full['seconds']:.3f}, "
              f"garbage {len(garbage)}, other CPU {inc['other_cpu_cores']}/{full['other_cpu_cores']}", flush=True)
    return summarize(rounds, setup)


def summarize(rounds: list[dict[str, Any]], setup: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"rounds": rounds, "setup": {k: v for k, v in setup.items() if k != "deleted_keys"}}
    for kind in ("incremental", "full"):
        runs = [r[kind] for r in rounds]
        last = runs[-1]
        peaks: dict[str, float] = {}
        for r in runs:
            for role, mib in r["peak_by_role_mib"].items():
                peaks[role] = max(peaks.get(role, 0.0), mib)
        out[kind] = {
            "median": statistics.median(r["seconds"] for r in runs),
            "phases": {p: statistics.median(r["phases"].get(p, 0.0) for r in runs) for p in last["phases"]},
            "peak_mib": max(r["peak_mib"] for r in runs), "peak_by_role_mib": peaks,
            "start_peak_mib": max((r["start_peak_mib"] or 0.0) for r in runs),
            "listing": last["listing"], "ranges": last["ranges"], "kept": last["kept"],
            "other_cpu_cores": [r["other_cpu_cores"] for r in runs]}
    out["ratio"] = out["incremental"]["median"] / out["full"]["median"]
    out["ratios"] = [r["ratio"] for r in rounds]
    decoders = [r["decoder"] for r in rounds if "decoder" in r]
    if decoders:
        out["decoder"] = {**decoders[0], "decoder_mb_s": statistics.median(d["decoder_mb_s"] for d in decoders),
                          "entries_per_s": statistics.median(d["entries_per_s"] for d in decoders),
                          "change_s": statistics.median(d["change_s"] for d in decoders)}
    diffs = [r["lakefs_diff"]["seconds"] for r in rounds if "lakefs_diff" in r]
    if diffs:
        out["lakefs_diff_s"] = statistics.median(diffs)
    for kind in ("incremental", "full"):
        if f"requests_{kind}" in rounds[-1]:
            out[f"requests_{kind}"] = rounds[-1][f"requests_{kind}"]["requests"]
    return out


# --- figures ------------------------------------------------------------------------------------------------------
def requests_of(m: dict[str, Any], kind: str, store: str) -> dict[str, int]:
    """The requests a run made to list and find objects: counted on S3; on local disk derived from its listing
    (a directory read per slice listed, one for data/ and one for the root; a stat per key asked for)."""
    if f"requests_{kind}" in m:
        r = m[f"requests_{kind}"]
        return {"list": r.get("list", 0), "head": r.get("head", 0), "get": r.get("get", 0), "counted": 1}
    listing = m[kind]["listing"]
    return {"list": listing.get("slices", 0) + 2, "head": listing.get("checked", 0), "counted": 0}


def ranges_read(m: dict[str, Any]) -> int:
    """The ranges an incremental run read: those that died and those that appeared since the previous run (the
    kept index's lean mark); 0 when the record does not say."""
    listing = m["incremental"]["listing"]
    return int(listing.get("ranges_dead", 0)) + int(listing.get("ranges_new", 0))


def figures(results: dict[str, Any]) -> dict[str, Any]:
    """Ratios, growth, per-object, per-range and per-request costs and the 1B projection, per store and runner."""
    a = results["args"]
    changed_paths = a["commits"] * (a["overwrites"] + a["deletes"])
    out: dict[str, Any] = {}
    for store, by_size in results["stores"].items():
        sizes = sorted(by_size, key=int)
        runners = sorted({r for s in sizes for r in by_size[s]})
        for runner in runners:
            at = {int(s): by_size[s][runner] for s in sizes if runner in by_size[s]}
            if not at:
                continue
            lo, hi = min(at), max(at)
            m = at[hi]
            inc, full = m["incremental"], m["full"]
            f: dict[str, Any] = {"ratio_by_size": {n: x["ratio"] for n, x in at.items()},
                                 "incremental_s": {n: x["incremental"]["median"] for n, x in at.items()},
                                 "full_s": {n: x["full"]["median"] for n, x in at.items()},
                                 "incremental_peak_mib": {n: x["incremental"]["peak_mib"] for n, x in at.items()},
                                 "full_peak_mib": {n: x["full"]["peak_mib"] for n, x in at.items()},
                                 "ranges_read": {n: ranges_read(x) for n, x in at.items()},
                                 "ranges_at_head": {n: x["full"]["ranges"] for n, x in at.items()}}
            full_objects = full["listing"].get("objects") or hi
            # the full run: its cost per object (the slope between the sizes when there are two and it is one)
            per_object_run = full["median"] / hi
            per_object_list = full["phases"].get("list", 0.0) / full_objects
            # the incremental run: its cost per range read (the lean mark reads the dead and the new ranges)
            per_range = inc["median"] / max(1, ranges_read(m))
            per_mib = None
            inc_per_object = inc["median"] / hi
            if hi != lo:
                f["incremental_growth"] = at[hi]["incremental"]["median"] / at[lo]["incremental"]["median"]
                f["full_growth"] = at[hi]["full"]["median"] / at[lo]["full"]["median"]
                f["growth_sizes"] = [lo, hi]
                slope = (at[hi]["full"]["median"] - at[lo]["full"]["median"]) / (hi - lo)
                per_object_run = slope if slope > 0 else per_object_run
                d_ranges = ranges_read(at[hi]) - ranges_read(at[lo])
                slope = (at[hi]["incremental"]["median"] - at[lo]["incremental"]["median"]) / max(1, d_ranges)
                per_range = slope if slope > 0 and d_ranges > 0 else per_range
                per_mib = ((at[hi]["incremental"]["peak_mib"] - at[lo]["incremental"]["peak_mib"]) / (hi - lo))
                inc_per_object = (at[hi]["incremental"]["median"] - at[lo]["incremental"]["median"]) / (hi - lo)
            requests = {k: requests_of(m, k, store) for k in ("incremental", "full")}
            # At 1e9 objects with the same day's change: the full run lists 1e9 objects; the incremental one lists
            # and asks for what it did here (the same slices, objects and HEADs) and reads the ranges the change
            # touches: at most 2 per changed path (the dead and the new), here every range of the HEAD twice.
            ranges_1b = min(2 * changed_paths, 2 * m["full"]["ranges"] * 1e9 / hi)
            if a.get("pattern") == "tail":  # the change touches the same few ranges however large the lake
                ranges_1b = ranges_read(m)
            inc_1b = inc["median"] + max(0.0, ranges_1b - ranges_read(m)) * per_range
            f.update({
                "per_object_run_us": 1e6 * per_object_run, "per_object_list_us": 1e6 * per_object_list,
                "per_range_read_ms": 1e3 * per_range, "requests": requests,
                "incremental_peak_kib_per_object": None if per_mib is None else 1024 * per_mib,
                "projection_1b": {
                    "full_s": per_object_run * 1e9, "incremental_s": inc_1b, "ranges_read": ranges_1b,
                    # the other bound: the incremental run's growth between the sizes taken as lake-sized (the kept
                    # index counts every live key) rather than as ranges read
                    "incremental_lake_sized_s": inc["median"] + max(0.0, inc_per_object) * (1e9 - hi),
                    "incremental_peak_gib": None if per_mib is None else
                    (at[hi]["incremental"]["peak_mib"] + per_mib * (1e9 - hi)) / 1024,
                    "assumes": f"the same day's change ({changed_paths} paths overwritten or deleted "
                               f"{'in one table' if a.get('pattern') == 'tail' else 'at random'}, "
                               f"the same slices listed and keys asked for) on a lake of 1e9 objects: full = the "
                               f"full run's cost per object x 1e9; incremental = the run at {hi:,} + the extra "
                               f"ranges read ({ranges_1b:,.0f} instead of {ranges_read(m)}) x the cost per range "
                               f"read; memory: the incremental run's peak grown at its measured MiB per object"}})
            out[f"{store}/{runner}"] = f
    return out


def _h(seconds: float) -> str:
    if seconds >= 86400:
        return f"{seconds / 86400:.1f} d"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.1f} s"


def by_round(m: dict[str, Any]) -> str:
    """Each round's incremental run: its time, and how many of the ranges it compared the range cache gave (the
    first round's dead ranges are the setup's full run's, which keeps no copies: from the second on, yesterday's)."""
    def one(r: dict[str, Any]) -> str:
        li = r["incremental"]["listing"]
        return (f"{r['incremental']['seconds']:.2f} ({li.get('ranges_from_cache', 0)}/"
                f"{li.get('ranges_dead', 0) + li.get('ranges_new', 0)})")
    return ", ".join(one(r) for r in m["rounds"])


def report_lines(results: dict[str, Any]) -> list[str]:
    a = results["args"]
    where = ("among the newest paths of one table (tables/t0/)" if a.get("pattern") == "tail"
             else "at random paths")
    out = ["", f"Daily run: {a['commits']} commits x ({a['overwrites']} overwrites + {a['deletes']} deletes) {where}"
           f" + {a['uploads']} uploads never committed, then a dry incremental run and a dry full run on the same "
           f"state, each in a fresh child ({'a warm-up run, then the timed one' if a['warmup'] else 'one timed run'}), "
           f"alternating; median of {a['rounds']} rounds. Peak = resident memory of the child's tree (MiB; driver + "
           "JVM + Python workers for Spark).", "",
           "| store | objects | runner | incremental s | full s | **incremental / full** (goal at 1M <= 0.05; "
           "rounds) | incremental: listed (slices) + asked for | full: listed (slices) | requests: incremental / full "
           "| peak MiB incremental / full | phases incremental (mark / list / plan s) | other CPU (cores) | "
           "incremental s by round (ranges from the range cache / ranges compared) |",
           "|---|---:|---|---:|---:|---:|---|---|---|---|---|---|---|"]
    for store, by_size in results["stores"].items():
        for size in sorted(by_size, key=int):
            for runner, m in by_size[size].items():
                inc, full = m["incremental"], m["full"]
                li, lf = inc["listing"], full["listing"]
                ri, rf = requests_of(m, "incremental", store), requests_of(m, "full", store)
                how = "counted" if ri["counted"] else "derived"
                ph = inc["phases"]
                out.append(
                    f"| {STORE_NAMES[store]} | {int(size):,} | {runner} | {inc['median']:.2f} | {full['median']:.2f} "
                    f"| **{m['ratio']:.3f}** ({', '.join(f'{x:.3f}' for x in m['ratios'])}) | "
                    f"{li.get('objects', 0):,} ({li.get('slices', 0)}/{li.get('slices_total', 0)}) + "
                    f"{li.get('found_without_listing', 0):,} of {li.get('checked', 0):,} | "
                    f"{lf.get('objects', 0):,} ({lf.get('slices', 0)}) | {ri['list']} LIST + {ri['head']} HEAD / "
                    f"{rf['list']} LIST + {rf['head']} HEAD ({how}) | {inc['peak_mib']:.0f} / {full['peak_mib']:.0f} | "
                    f"{ph.get('mark', 0):.2f} / {ph.get('list', 0):.2f} / {ph.get('plan', 0):.2f} | "
                    f"{max(inc['other_cpu_cores']):.2f} / {max(full['other_cpu_cores']):.2f} | "
                    f"{by_round(m)} |")
    figs = results.get("figures", {})
    if figs:
        out += ["", "Figures: growth = time at the largest size / at the smallest (goal for the incremental run <= 2 "
                "from 100k to 1M); costs at the largest size (per object: the full run's slope between the sizes "
                "when there are two; per range read: the incremental run's, the same way).", "",
                "| store / runner | sizes | **incremental growth** | full growth | incremental / full by size | "
                "ranges read by the incremental run (ranges at HEAD) | full µs per object | list µs per object "
                "(full run) | incremental ms per range read | incremental peak KiB per object |",
                "|---|---|---:|---:|---|---|---:|---:|---:|---:|"]
        for key, f in figs.items():
            sizes = sorted(f["ratio_by_size"], key=int)
            growth = f"**{f['incremental_growth']:.2f}**" if "incremental_growth" in f else "—"
            full_growth = f"{f['full_growth']:.2f}" if "full_growth" in f else "—"
            kib = f["incremental_peak_kib_per_object"]
            ratios = " / ".join(f"{f['ratio_by_size'][n]:.3f}" for n in sizes)
            read = " / ".join(f"{f['ranges_read'][n]} ({f['ranges_at_head'][n]})" for n in sizes)
            out.append(f"| {key} | {' / '.join(f'{int(n):,}' for n in sizes)} | {growth} | {full_growth} | "
                       f"{ratios} | {read} | {f['per_object_run_us']:.1f} | {f['per_object_list_us']:.1f} | "
                       f"{f['per_range_read_ms']:.1f} | {'—' if kib is None else f'{kib:.2f}'} |")
        out += ["", "**Projection to 1B objects** — arithmetic on the measured costs above, not a measurement "
                "(the same day's change; see each line's assumptions in the JSON):", "",
                "| store / runner | full run | incremental run, its growth as ranges read | ranges the incremental run "
                "reads | incremental / full | incremental run, its growth as lake-sized | incremental peak memory "
                "(lake-sized) |", "|---|---:|---:|---:|---:|---:|---:|"]
        for key, f in figs.items():
            p = f["projection_1b"]
            gib = p.get("incremental_peak_gib")
            out.append(f"| {key} | {_h(p['full_s'])} | {_h(p['incremental_s'])} | {p['ranges_read']:,.0f} | "
                       f"{p['incremental_s'] / p['full_s']:.5f} | {_h(p['incremental_lake_sized_s'])} | "
                       f"{'—' if gib is None else f'{gib:,.0f} GiB'} |")
    return out


def decoder_lines(results: dict[str, Any]) -> list[str]:
    rows = []
    for store, by_size in results["stores"].items():
        for size in sorted(by_size, key=int):
            for runner, m in by_size[size].items():
                d = m.get("decoder")
                if not d:
                    continue
                diff = m.get("lakefs_diff_s")
                inc = m["incremental"]["median"]
                rows.append(
                    f"| {STORE_NAMES[store]} | {int(size):,} | {runner} | {d['ranges']} ({d['dead']} dead) | "
                    f"{d['uncompressed_mb']:.0f} | **{d['decoder_mb_s']:.0f}** | {d['entries_per_s'] / 1e6:.1f} | "
                    f"{d.get('careful_mb_s', 0):.0f} | {d.get('speedup', 0):.1f} | {d['change_s']:.3f} | "
                    f"{'—' if diff is None else f'{diff:.3f}'} | {m['incremental']['median']:.2f} | "
                    f"{'—' if not diff else f'{inc / diff:.2f}'} |")
    if not rows:
        return []
    fixed = results.get("fixed_costs", {})
    return ["", "The day's ranges (dead and new) decoded in the bench's process, one thread, CPU time (the machine "
            "is shared): the compiled walk (checksums, Snappy and Arrow columns included) against the careful "
            "decoder it replaced; the day's change as the incremental run computes it (two threads, wall time); "
            "lakeFS's own two-dot diff of the same day (wall, median of 3). Fixed costs of a fresh process (included in the runs' times): interpreter "
            f"{fixed.get('python_s', 0):.3f} s, importing the decoder {fixed.get('import_range_arrow_s', 0):.3f} s, "
            f"the lean mark {fixed.get('import_lean_mark_s', 0):.3f} s; no JIT.", "",
            "| store | objects | runner | ranges | uncompressed MB | **decoder MB/s** | M entries/s | careful MB/s | "
            "speed-up | change s | lakeFS diff s | incremental s | incremental / lakeFS diff |",
            "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|", *rows]


def daily_records(results: dict[str, Any]) -> list[dict[str, Any]]:
    """One record per store, size and runner: what bench/results/daily-1m.json keeps."""
    out = []
    for store, by_size in results["stores"].items():
        for size in sorted(by_size, key=int):
            for runner, m in by_size[size].items():
                d = m.get("decoder", {})
                cpu = {kind: statistics.median(r[kind]["cpu_seconds"] for r in m["rounds"])
                       if all(r[kind].get("cpu_seconds") is not None for r in m["rounds"]) else None
                       for kind in ("incremental", "full")}
                out.append({"pattern": results["args"]["pattern"], "runner": runner, "store": store,
                            "objects": int(size), "incremental_s": m["incremental"]["median"],
                            "full_s": m["full"]["median"], "lakefs_diff_s": m.get("lakefs_diff_s"),
                            "decoder_mb_s": d.get("decoder_mb_s"), "decoder_entries_per_s": d.get("entries_per_s"),
                            "careful_decoder_mb_s": d.get("careful_mb_s"), "change_s": d.get("change_s"),
                            "incremental_over_full": m["ratio"],
                            # CPU seconds of the run's process tree: what the run cost when the machine is shared
                            "incremental_cpu_s": cpu["incremental"], "full_cpu_s": cpu["full"],
                            "other_cpu_cores": max(m["incremental"]["other_cpu_cores"] + m["full"]["other_cpu_cores"]),
                            "incremental_peak_mib": m["incremental"]["peak_mib"],
                            "full_peak_mib": m["full"]["peak_mib"], "fixed_costs": results.get("fixed_costs"),
                            "date": results["date"], "git": results["git"]})
    return out


def write_daily(records: list[dict[str, Any]], path: Path) -> None:
    """Into ``path`` (a JSON list), replacing the records of the same pattern, runner, store and size."""
    def same(r: dict[str, Any]) -> tuple:
        return r["pattern"], r["runner"], r["store"], r["objects"]

    kept = json.loads(path.read_text()) if path.exists() else []
    mine = {same(r) for r in records}
    merged = [r for r in kept if same(r) not in mine] + records
    path.write_text(json.dumps(sorted(merged, key=same), indent=2) + "\n")


def write_md(results: dict[str, Any], output: Path) -> None:
    output.with_suffix(".md").write_text("\n".join(
        [f"# bench/gc daily runs (issue 28) — {results['date']} (git {results['git']})", *report_lines(results),
         *decoder_lines(results), ""]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--render", type=Path, help="recompute the figures and write the .md of a results JSON "
                                                    "(and its records into --daily); stop")
    parser.add_argument("--stores", default="local,s3")
    parser.add_argument("--runners", default="threads,spark")
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--s3-sizes", default=None, help="sizes on versitygw (default: --sizes); its listing is "
                                                          "the slowest part of a full run there")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--commits", type=int, default=10)
    parser.add_argument("--overwrites", type=int, default=30, help="paths overwritten per commit")
    parser.add_argument("--deletes", type=int, default=10, help="paths deleted per commit")
    parser.add_argument("--uploads", type=int, default=20, help="files never committed, per day")
    parser.add_argument("--pattern", choices=["random", "tail"], default="random",
                        help="which paths a day overwrites and deletes: anywhere (random), or among the newest "
                             f"{TAIL:,} paths of one table (tail: a table's latest partitions)")
    parser.add_argument("--warmup", action=argparse.BooleanOptionalAction, default=True,
                        help="an untimed run of the same kind before each timed one, in its child")
    parser.add_argument("--cache", action=argparse.BooleanOptionalAction, default=True,
                        help="the mark cache (the engine's default: on)")
    parser.add_argument("--range-cache-mib", type=int, default=2048,
                        help="the range cache's size (gc.range_cache_mib, the default as deployed), in a folder of "
                             "the bench's own that lives as long as the store's lakeFS; 0: none")
    parser.add_argument("--quick", action="store_true", help="a few thousand objects, local disk, threads; "
                                                             "the checks only, writes nothing")
    parser.add_argument("--output", type=Path, default=None, help="default bench/results/gc-daily.json")
    parser.add_argument("--keep-ranges", type=Path, default=None,
                        help="a folder to keep each day's dead and new range files in")
    parser.add_argument("--profile", type=Path, default=None,
                        help="a folder for a profile of each run (py-spy of every thread when on PATH, else cProfile; "
                             "the timed runs then include the profiler's cost)")
    parser.add_argument("--lakefs-diff", action=argparse.BooleanOptionalAction, default=True,
                        help="time lakeFS's own two-dot diff of each day (bench/gc/lakefs_diff_bench.py)")
    parser.add_argument("--daily", type=Path, default=ROOT / "bench" / "results" / "daily-1m.json",
                        help="the JSON list of (pattern, runner, store, objects) records this run updates")
    args = parser.parse_args()
    if args.child:
        return child(json.loads(args.child))
    if args.render:
        results = json.loads(args.render.read_text(), object_hook=lambda d: d)
        results["figures"] = figures(results)
        args.render.write_text(json.dumps(results, indent=2, default=str) + "\n")
        write_md(results, args.render)
        write_daily(daily_records(results), args.daily)
        print(args.render.with_suffix(".md").read_text())
        return 0
    if args.quick:  # the quick mode's sizes, unless given
        parser.set_defaults(**QUICK)
        args = parser.parse_args()
    output = args.output or (None if args.quick else ROOT / "bench" / "results" / "gc-daily.json")
    sizes = [int(s) for s in args.sizes.split(",") if s]
    s3_sizes = [int(s) for s in args.s3_sizes.split(",") if s] if args.s3_sizes else sizes
    runners = [r for r in args.runners.split(",") if r]
    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    results: dict[str, Any] = {"date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "git": git.strip(),
                               "args": vars(args) | {"output": str(output)},
                               "machine": machine(("pyspark", "lakefs-sdk", "s3fs", "cramjam", "pyarrow")),
                               "stores": {}, "generate": {}}
    results["fixed_costs"] = fixed_costs(1 if args.quick else 5)
    started = time.monotonic()
    try:
        for kind in [s for s in args.stores.split(",") if s]:
            world = World(kind)
            world.mark_cache = args.cache
            world.range_cache = tempfile.mkdtemp(prefix="janitor-range-cache-") if args.range_cache_mib else None
            world.range_cache_mib = args.range_cache_mib
            world.profile = str(args.profile) if args.profile else None
            if args.profile:
                args.profile.mkdir(parents=True, exist_ok=True)
            try:
                namespace = world.store.namespace(REPO)
                store_sizes = s3_sizes if kind == "s3" else sizes
                total = args.rounds * len(runners) * len(store_sizes) + 1  # simulated days, the last one today
                # the lake's objects were written 3 days before the first simulated day
                writer = BulkMetadataOnly(staged_base(world.store, namespace), world.server.endpoint,
                                          ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY, files_in=(world.store, namespace),
                                          spawn_above=300 if args.quick else 2000, files_age=86400 * (total + 3))
                day = Day(world, namespace, args, total)
                results["stores"][kind] = {}
                for size, made in grow(world, namespace, store_sizes, writer,
                                       uuid.uuid4().hex[:6],
                                       newest=COMMITS_DATED):
                    day.size = size
                    results["generate"].setdefault(kind, {})[size] = made
                    by_runner = results["stores"][kind][size] = {}
                    for runner in runners:
                        by_runner[runner] = bench_runner(world, day, runner, size, args)
                        if output:  # what is measured so far, in case a later step fails or is stopped
                            partial = output.with_suffix(".partial.json")
                            partial.write_text(json.dumps(results, indent=2, default=str) + "\n")
            finally:
                world.close()
                if world.range_cache:
                    shutil.rmtree(world.range_cache, ignore_errors=True)
    except CheckFailed as exc:
        print(f"FAIL: {exc}", file=sys.stderr)
        return 1
    results["seconds"] = time.monotonic() - started
    results["figures"] = figures(results)
    lines = report_lines(results) + decoder_lines(results)
    print("\n".join(lines))
    print(f"daily_bench: all checks hold ({results['seconds']:.0f} s)")
    if output:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(results, indent=2, default=str) + "\n")
        output.with_suffix(".partial.json").unlink(missing_ok=True)
        write_md(results, output)
        write_daily(daily_records(results), args.daily)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
