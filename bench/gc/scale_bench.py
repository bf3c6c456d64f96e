"""bench/gc scale (issue 37): full and daily GC runs at 100k, 1M (and 3M) objects, on local disk and versitygw, on
the thread runner and on Spark through spark-submit (local[2], and a real standalone master with one or two
workers on 127.0.0.1): wall time, the driver's peak memory, what each executor task held and returned, and the
bytes that came back to the driver.

    .venv/bin/python bench/gc/scale_bench.py [--stores local,s3] [--sizes 100000,1000000]
        [--s3-sizes 100000] [--runners threads,spark] [--clusters local[2],standalone-1,standalone-2]
        [--modes full,daily] [--cleaning bench/gc/cleaning-scale.json]
        [--partitions 8] [--driver-memory 2g] [--output PATH]
    .venv/bin/python bench/gc/scale_bench.py --quick   # 2,000 objects, local disk: the checks only, writes nothing
    make bench-scale                                    # the defaults above

Per store (``local`` = lakeFS's local blockstore, ``s3`` = versitygw; tests/services.py) a lakeFS v1.84 on it, on
127.0.0.1, stopped at the end. One repository grows through the sizes (``grow``: objects staged in bulk by
``generate.BulkMetadataOnly``, an empty file written behind every address straight into the store's folder, so
that listings and subtractions are at full size; commits dated 90 days ago and before, GC rules keep 30 days, so
only the HEAD is retained). At each size:

1. **Setup** (untimed, threads, in a child process): one real run with a full listing: it deletes what earlier
   days made garbage and leaves the state the daily run starts from (``_lakefs/…/janitor-incremental``).
2. **A day** (untimed; bench/gc/daily_bench.py's ``Day``): a few commits overwriting and deleting objects at
   random paths, and files written and never staged: the garbage both runs must plan, exactly.
3. **The measured dry runs**, all on that same state, dated that day: per runner and cluster, ``full``
   (``listing="full"``) and ``daily`` (``listing="auto"``, the incremental run).

How each runner is measured:

* ``threads``: ThreadRunner(8) in a fresh child process (one run, no warm-up); this process samples its resident
  memory every 0.1 s with psutil: ``peak_mib``, and per object (``peak_bytes_per_object``; ``growth_…`` counts
  only what the run added to the child's footprint after its imports — pyarrow's deferred ones included:
  pyarrow.parquet, and what a run does first (engine/runtime/imports.py: pyarrow's shim told that pandas is not
  needed; before 2026-11-28 17:40 UTC it imported pandas, 44 MiB); ``idle_before_deferred_mib`` is
  the footprint before them).
* ``spark``: ``workers.gc.submit.run_gc``, exactly as the worker submits a run: spark-submit of
  spark_jobs/jobs/gc.py to the cluster. ``wall_s`` is spark-submit's whole life (JVM start included; ``engine_s``
  is the engine's own phases). This process samples spark-submit's process tree every 0.1 s with psutil: the
  driver JVM and the Python driver (``driver_peak_mib``, their sum at one instant), and, on local[2] only, the
  Python workers the JVM forks (``workers_peak_mib``; a standalone cluster's executors are children of its
  workers, not of spark-submit). Spark's event log (``spark.eventLog.enabled`` to a temporary folder) gives, over
  every finished task: ``bytes_to_driver`` (the sum of the tasks' "Result Size"), the largest result of one task,
  the peak execution memory of one task, and the executors' peak JVM heap and Python RSS (process-tree metrics,
  polled every 250 ms; on local[2] the executor is the driver's JVM, so its Python RSS there includes the
  Python driver).

Checks (a failure exits 1, nothing written): every run succeeds; the full run says kind "full", the daily run kind
"incremental"; every run of every runner plans exactly the day's garbage (the versions the day's commits replaced
or deleted, and the files never staged).

Writes bench/results/scale.json (``--output`` elsewhere; ``--quick`` writes nothing): a list, one object per
measured run, with ``runner`` (threads | spark), ``cluster`` (in-process | local[2] | standalone-1 | standalone-2),
``store``, ``objects``, ``mode`` (full | daily), ``wall_s``, ``driver_peak_mib`` (Spark) or ``peak_mib`` (threads),
``bytes_to_driver`` (Spark), ``git`` (the commit measured), and the rest of what was measured. After each run what
is measured so far is in ``<output>.partial.json`` (removed at the end), so that a long run stopped early keeps
its figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import lakefs_sdk  # noqa: E402
from common import ROOT, CheckFailed, World, check, machine  # noqa: E402
from generate import BulkMetadataOnly, _base_path, _commit, stage_many, staged_base  # noqa: E402

from spark_jobs.core.cleaning import METADATA_KEY, parse_cleaning_policies  # noqa: E402
from tests.services import ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY  # noqa: E402

# (one cluster: the quick run checks the bench's steps, not its figures; a standalone cluster also starts and stops a
# master and a worker, which local[2] does not)
QUICK = {"stores": "local", "sizes": "2000", "clusters": "standalone-1", "day_commits": 2}
REPO = "scale"
COMMITS_DATED = timedelta(days=90)  # before the 30 days the rules keep: only the HEAD is retained
MIB = 2**20


# --- growing the repository (also bench/gc/daily_bench.py's) --------------------------------------------------------
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


# --- memory, sampled with psutil ------------------------------------------------------------------------------------
class Sampler:
    """Every ``interval`` s, the resident memory of the processes ``find()`` returns, summed by the role
    ``role_of(process)`` gives each (None: not counted); keeps the peak of each role, and of named sums of roles
    taken at the same instant."""

    def __init__(self, find: Callable[[], list], role_of: Callable[[Any], str | None],
                 sums: dict[str, tuple[str, ...]] | None = None, interval: float = 0.1) -> None:
        self.find, self.role_of, self.sums, self.interval = find, role_of, sums or {}, interval
        self.peaks: dict[str, float] = {}
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def sample(self) -> None:
        import psutil  # noqa: PLC0415

        now: dict[str, float] = {}
        for proc in self.find():
            try:
                role = self.role_of(proc)
                if role is not None:
                    now[role] = now.get(role, 0.0) + proc.memory_info().rss / MIB
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        if not now:
            return
        self.samples += 1
        for name, roles in self.sums.items():
            now[name] = sum(now.get(r, 0.0) for r in roles)
        for name, mib in now.items():
            self.peaks[name] = max(self.peaks.get(name, 0.0), mib)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()


def spark_submit_tree() -> list:
    """spark-submit's process tree among this process's descendants: its JVM (spark-submit's script execs it)
    and everything under it."""
    import psutil  # noqa: PLC0415

    out = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if proc.name() == "java" and "org.apache.spark.deploy.SparkSubmit" in proc.cmdline():
                out += [proc, *proc.children(recursive=True)]
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return out


def spark_role(proc) -> str | None:
    name = proc.name()
    if name == "java":
        # spark-submit's own launcher (org.apache.spark.launcher.Main) lives only until the driver's JVM starts
        return "launcher" if "org.apache.spark.launcher.Main" in proc.cmdline() else "jvm"
    if name in ("pgrep", "jspawnhelper"):
        return None  # Spark's process-tree metrics and the JVM's process spawning, a few MiB for an instant
    if "jobs/gc.py" in " ".join(proc.cmdline()):
        # the driver, child of the JVM; a fork of it (a library's subprocess) would count its pages twice
        return "python_driver" if proc.parent().name() == "java" else "driver_forks"
    return "workers"  # local mode: the Python workers the driver's JVM forks (pyspark.daemon)


# --- the threads runner: one run in a child process -----------------------------------------------------------------
def child(spec: dict[str, Any]) -> int:
    from common import gc_run  # noqa: PLC0415

    from spark_jobs.engine.runtime.parallel import ThreadRunner  # noqa: PLC0415
    from tests.gc_engine import Collector  # noqa: PLC0415

    gc = Collector(spec["endpoint"], spec["options"], runner=ThreadRunner(8))
    if os.environ.get("BENCH_STEP_TRACE"):  # each dataset step's seconds and memory (step_trace.py)
        from step_trace import trace_steps  # noqa: PLC0415

        trace_steps(os.environ["BENCH_STEP_TRACE"])
    print("READY", flush=True)
    sys.stdin.readline()  # the parent has the footprint after the engine's imports
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.parquet  # noqa: F401, PLC0415 - the state and the report are Parquet

    from spark_jobs.engine.runtime.imports import arrow_without_pandas  # noqa: PLC0415

    arrow_without_pandas()  # what a run does first (engine/runtime/imports.py): pyarrow imports no pandas
    pa.array([0])
    print("DEFERRED", flush=True)
    sys.stdin.readline()  # and after the deferred ones: the idle footprint a run's growth is counted from
    started = time.perf_counter()
    summary, marked = gc_run(gc, spec["repo"], spec["mode"], min_age=timedelta(0), listing=spec["listing"],
                             now=datetime.fromisoformat(spec["now"]))
    seconds = time.perf_counter() - started
    print("RESULT " + json.dumps({"seconds": seconds, "summary": summary.as_dict(),
                                  "deleted_keys": sorted(o.key for o in marked.deleted)}), flush=True)
    return 0


def threads_run(world: World, *, mode: str, listing: str, now: datetime) -> dict[str, Any]:
    import psutil  # noqa: PLC0415

    spec = {"repo": REPO, "endpoint": world.server.endpoint, "options": world.options(), "mode": mode,
            "listing": listing, "now": now.isoformat()}
    proc = subprocess.Popen([sys.executable, __file__, "--child", json.dumps(spec)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=ROOT)
    me = psutil.Process(proc.pid)
    result, lines, idle, imported = None, [], 0.0, 0.0
    with Sampler(lambda: [me], lambda _p: "process") as sampler:
        for line in proc.stdout:
            if line.startswith(("READY", "DEFERRED")):
                sampler.sample()
                if line.startswith("READY"):
                    imported = sampler.peaks.get("process", 0.0)
                else:
                    idle = sampler.peaks.get("process", 0.0)
                proc.stdin.write("go\n")
                proc.stdin.flush()
            elif line.startswith("RESULT "):
                result = json.loads(line[7:])
            else:
                lines.append(line.rstrip("\n"))
        rc = proc.wait()
    check(rc == 0 and result is not None, f"threads: the child exited {rc}:\n" + "\n".join(lines[-30:]))
    return {**result, "peak_mib": sampler.peaks.get("process", 0.0), "idle_mib": idle,
            "idle_before_deferred_mib": imported, "samples": sampler.samples}


# --- Spark: spark-submit, as the worker does ------------------------------------------------------------------------
class Clusters:
    """The Spark masters by name: local[N] as is; standalone-N a real master with N one-core workers on
    127.0.0.1, started on first use and kept until ``close``."""

    def __init__(self, worker_memory: str) -> None:
        self.worker_memory = worker_memory
        self._up: dict[str, tuple] = {}

    def master(self, name: str) -> str:
        if name.startswith("local"):
            return name
        if name not in self._up:
            from tests.spark.cluster import SparkMaster, SparkWorker  # noqa: PLC0415

            count = int(name.rsplit("-", 1)[1])
            master = SparkMaster().start()
            workers = []
            try:
                for _ in range(count):
                    workers.append(SparkWorker(master, cores=1, memory=self.worker_memory).start())
            except BaseException:
                for w in workers:
                    w.cleanup()
                master.cleanup()
                raise
            self._up[name] = (master, workers)
        return self._up[name][0].url

    def stop(self, name: str) -> None:
        master, workers = self._up.pop(name, (None, []))
        for w in workers:
            w.cleanup()
        if master is not None:
            master.cleanup()

    def close(self) -> None:
        for name in list(self._up):
            self.stop(name)


def event_log_figures(folder: Path) -> dict[str, Any]:
    """What the application's event log says about its tasks (Spark's listener events, one JSON per line)."""
    tasks, result_sizes, peak_exec, heap, python_rss, jvm_rss = 0, [], [], [], [], []
    jobs = executors = 0
    logs = [p for p in folder.iterdir() if p.is_file()]
    check(len(logs) == 1, f"expected one event log in {folder}, found {[p.name for p in logs]}")
    with logs[0].open() as lines:
        for line in lines:
            event = json.loads(line)
            kind = event.get("Event")
            if kind == "SparkListenerJobStart":
                jobs += 1
            elif kind == "SparkListenerExecutorAdded":
                executors += 1
            elif kind == "SparkListenerTaskEnd":
                tasks += 1
                metrics = event.get("Task Metrics") or {}
                result_sizes.append(int(metrics.get("Result Size", 0)))
                peak_exec.append(int(metrics.get("Peak Execution Memory", 0)))
                peaks = event.get("Task Executor Metrics") or {}
                heap.append(int(peaks.get("JVMHeapMemory", 0)))
                python_rss.append(int(peaks.get("ProcessTreePythonRSSMemory", 0)))
                jvm_rss.append(int(peaks.get("ProcessTreeJVMRSSMemory", 0)))
    return {"bytes_to_driver": sum(result_sizes), "jobs": jobs, "tasks": tasks, "executors_added": executors,
            "executor": {"max_task_result_bytes": max(result_sizes, default=0),
                         "max_task_peak_execution_memory_bytes": max(peak_exec, default=0),
                         "max_jvm_heap_mib": round(max(heap, default=0) / MIB, 1),
                         "max_python_rss_mib": round(max(python_rss, default=0) / MIB, 1),
                         "max_jvm_rss_mib": round(max(jvm_rss, default=0) / MIB, 1)}}


def spark_run(world: World, clusters: Clusters, cluster: str, a: argparse.Namespace, *, listing: str,
              now: datetime) -> dict[str, Any]:
    from spark_jobs.engine.request import RunRequest  # noqa: PLC0415
    from tests.gc_engine import Collector  # noqa: PLC0415
    from tests.spark.cluster import spark_env  # noqa: PLC0415
    from workers.gc.submit import run_gc  # noqa: PLC0415
    from workers.shared.settings import LakeFSConnection, SparkSettings  # noqa: PLC0415

    master = clusters.master(cluster)
    with tempfile.TemporaryDirectory(prefix="scale-bench-events-") as events:
        conf = {"spark.eventLog.enabled": "true", "spark.eventLog.dir": Path(events).as_uri(),
                "spark.eventLog.compress": "false",
                "spark.executor.processTreeMetrics.enabled": "true",
                "spark.executor.metrics.pollingInterval": "250ms",
                "spark.driver.memory": a.driver_memory}
        if not cluster.startswith("local"):
            conf |= {"spark.executor.memory": a.executor_memory, "spark.executor.cores": "1"}
        spark = SparkSettings(master=master, range_num_partitions=a.partitions, address_num_partitions=a.partitions,
                              conf=conf, submit_timeout_seconds=3 * 3600)
        connection = LakeFSConnection(endpoint_url=world.server.endpoint, access_key_id=ADMIN_ACCESS_KEY,
                                      secret_access_key=ADMIN_SECRET_KEY)
        storage = Collector(world.server.endpoint, world.options()).storage
        request = RunRequest(REPO, "dry-run", now=now, min_age=timedelta(0), listing=listing, runner="spark")
        with Sampler(spark_submit_tree, spark_role,
                     sums={"driver": ("jvm", "python_driver"),
                           "tree": ("launcher", "jvm", "python_driver", "driver_forks", "workers")}) as s:
            started = time.monotonic()
            summary = run_gc(spark=spark, lakefs=connection, request=request, storage=storage, env=spark_env())
            wall = time.monotonic() - started
        figures = event_log_figures(Path(events))
    return {"seconds": wall, "summary": summary.as_dict(), "deleted_keys": planned_keys(summary, storage),
            "peaks": s.peaks, "samples": s.samples, **figures}


def planned_keys(summary, storage) -> list[str]:
    """The keys a (dry-run) plan lists, as the run stored them in the namespace."""
    from spark_jobs.core import report as core  # noqa: PLC0415
    from spark_jobs.engine.stores import StorageConfig, open_namespace  # noqa: PLC0415

    ns = open_namespace(StorageConfig(summary.storage_namespace, summary.local_root, storage.options_json))
    keys, _sizes = core.read_deleted(ns.read(core.deleted_key(summary.run_id)))
    return sorted(keys)


# --- one size on one store ------------------------------------------------------------------------------------------
def record(base: dict[str, Any], r: dict[str, Any]) -> dict[str, Any]:
    s = r["summary"]
    return {**base, "wall_s": round(r["seconds"], 3),
            "engine_s": round(sum(v for k, v in s["seconds"].items() if k != "total"), 3),
            "phases_s": s["seconds"], "ranges": s["ranges"], "kept_objects": s["kept_objects"],
            "planned": s["num_deleted_objects"], "listing": {k: v for k, v in (s.get("listing") or {}).items()
                                                             if isinstance(v, (int, float, str, bool))}}


def check_plan(r: dict[str, Any], garbage: set[str], what: str, kind: str, *,
               same_as: dict[str, set[str]] | None = None) -> None:
    """The run planned exactly the day's garbage; with cleaning policies (``same_as``: the first plan of each mode,
    filled in) only garbage, and what every other run planned (keep_versions keeps a deleted path's
    last versions: which of the day's garbage stays is the policies' to say, the same for every runner)."""
    s = r["summary"]
    check(s["success"], f"{what}: the run failed: {s.get('error')}")
    got = (s.get("listing") or {}).get("kind")
    check(got == kind,
          f"{what}: listing kind {got!r}, expected {kind!r} ({s.get('listing')})")
    deleted = set(r["deleted_keys"])
    if same_as is not None:
        first = same_as.setdefault("plan", deleted)  # a daily run plans what a full one does
        check(deleted <= garbage and deleted == first,
              f"{what}: planned {len(deleted)} deletions: {len(deleted - garbage)} not garbage (e.g. "
              f"{sorted(deleted - garbage)[:3]}), {len(deleted ^ first)} differ from the first run's")
        return
    check(deleted == garbage, f"{what}: planned {len(deleted)} deletions for {len(garbage)} garbage objects; "
                              f"{len(deleted - garbage)} are not garbage (e.g. {sorted(deleted - garbage)[:3]}), "
                              f"{len(garbage - deleted)} missed (e.g. {sorted(garbage - deleted)[:3]})")


def bench_size(world: World, clusters: Clusters, day, size: int, a: argparse.Namespace, base: dict[str, Any],
               save: Callable[[dict[str, Any]], None]) -> None:
    tag = f"{world.kind} {size:,}"
    if a.cleaning:  # cleaning policies on the repository, as `gc policy set` stores them
        world.lakefs.call("metadata", world.lakefs.internal.set_repository_metadata, REPO,
                          lakefs_sdk.RepositoryMetadataSet(metadata={METADATA_KEY: a.cleaning.read_text()}))
        base = base | {"cleaning": a.cleaning.stem}
    setup = threads_run(world, mode="full", listing="full", now=day.now())
    check(setup["summary"]["success"], f"{tag} setup: {setup['summary'].get('error')}")
    print(f"  {tag} setup (real, full, threads): {setup['seconds']:.1f} s, swept {setup['summary']['swept']}",
          flush=True)
    made = day.one_day()
    garbage = made["garbage"]
    print(f"  {tag} a day: {len(garbage)} garbage objects ({made['seconds']:.0f} s)", flush=True)
    modes = {"full": "full", "daily": "auto"}
    plans: dict[str, set[str]] | None = {} if a.cleaning else None  # the first plan, with cleaning policies
    for mode in a.modes:
        kind = "full" if mode == "full" else "incremental"
        for runner in a.runners:
            for cluster in (["in-process"] if runner == "threads" else a.clusters):
                what = f"{tag} {mode} {runner} {cluster}"
                head = {**base, "runner": runner, "cluster": cluster, "store": world.kind, "objects": size,
                        "mode": mode, "garbage": len(garbage)}
                if runner == "threads":
                    r = threads_run(world, mode="dry-run", listing=modes[mode], now=day.now())
                    check_plan(r, garbage, what, kind, same_as=plans)
                    out = record(head, r) | {
                        "peak_mib": round(r["peak_mib"], 1), "idle_mib": round(r["idle_mib"], 1),
                        "idle_before_deferred_mib": round(r["idle_before_deferred_mib"], 1),
                        "peak_bytes_per_object": round(r["peak_mib"] * MIB / size),
                        "growth_bytes_per_object": round((r["peak_mib"] - r["idle_mib"]) * MIB / size)}
                    print(f"  {what}: {out['wall_s']:.1f} s, peak {out['peak_mib']:.0f} MiB "
                          f"({out['peak_bytes_per_object']} B/object)", flush=True)
                else:
                    r = spark_run(world, clusters, cluster, a, listing=modes[mode], now=day.now())
                    check_plan(r, garbage, what, kind, same_as=plans)
                    p = r["peaks"]
                    out = record(head, r) | {
                        "driver_peak_mib": round(p.get("driver", 0.0), 1),
                        "driver_jvm_peak_mib": round(p.get("jvm", 0.0), 1),
                        "driver_python_peak_mib": round(p.get("python_driver", 0.0), 1),
                        "workers_peak_mib": round(p.get("workers", 0.0), 1),
                        "submit_tree_peak_mib": round(p.get("tree", 0.0), 1),
                        "bytes_to_driver": r["bytes_to_driver"],
                        "bytes_to_driver_per_object": round(r["bytes_to_driver"] / size, 1),
                        "executor": r["executor"], "jobs": r["jobs"], "tasks": r["tasks"],
                        "spark": {"partitions": a.partitions, "driver_memory": a.driver_memory,
                                  "executor_memory": None if cluster.startswith("local") else a.executor_memory}}
                    check(r["samples"] > 0, f"{what}: spark-submit's processes were never sampled")
                    # (a daily run's small steps run on the driver's threads, with no Spark job at all)
                    check(r["tasks"] > 0 or mode == "daily", f"{what}: the event log shows no finished task")
                    print(f"  {what}: {out['wall_s']:.1f} s (engine {out['engine_s']:.1f} s), driver peak "
                          f"{out['driver_peak_mib']:.0f} MiB (JVM {out['driver_jvm_peak_mib']:.0f}, Python "
                          f"{out['driver_python_peak_mib']:.0f}), {out['bytes_to_driver']:,} bytes to the driver "
                          f"in {out['tasks']} tasks, executor Python peak {r['executor']['max_python_rss_mib']} MiB",
                          flush=True)
                save(out)
        for cluster in a.clusters:  # a cluster's idle JVMs are not left to weigh on the next size's generation
            clusters.stop(cluster)


# --- the parent -----------------------------------------------------------------------------------------------------
def merge_rows(earlier: list[dict[str, Any]], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The results file after a run: its earlier rows, each replaced by this run's row of the same store, size,
    mode, runner and cluster (a run of some sizes or clusters keeps the others' figures, each with its git)."""
    def key(r: dict[str, Any]) -> tuple:
        return r["store"], r["objects"], r["mode"], r["runner"], r["cluster"], r.get("cleaning", "")

    merged = {key(r): r for r in earlier} | {key(r): r for r in rows}
    return sorted(merged.values(), key=lambda r: (r["store"] != "local", r["store"], r["objects"], r["mode"],
                                                  r["runner"] != "threads", r["cluster"]))


def lines_of(rows: list[dict[str, Any]]) -> list[str]:
    out = ["| store | objects | mode | runner | cluster | wall s | engine s | peak MiB (threads) / driver peak MiB "
           "(Spark: JVM + Python) | B per object (threads) | bytes to driver | max task result | executor Python "
           "peak MiB | git |", "|---|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        mode = r["mode"] + (f" ({r['cleaning']})" if r.get("cleaning") else "")
        head = (f"| {r['store']} | {r['objects']:,} | {mode} | {r['runner']} | {r['cluster']} | "
                f"{r['wall_s']:.1f} | {r['engine_s']:.1f} | ")
        if r["runner"] == "spark":
            out.append(head + f"{r['driver_peak_mib']:.0f} ({r['driver_jvm_peak_mib']:.0f} + "
                              f"{r['driver_python_peak_mib']:.0f}) | | {r['bytes_to_driver']:,} | "
                              f"{r['executor']['max_task_result_bytes']:,} | {r['executor']['max_python_rss_mib']} | "
                              f"{r['git']} |")
        else:
            out.append(head + f"{r['peak_mib']:.0f} | {r['peak_bytes_per_object']:,} | | | | {r['git']} |")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--stores", default="local,s3")
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--s3-sizes", default=None, help="sizes on versitygw (default: --sizes); it lists about "
                                                          "1,000 objects/s here, so 1M takes a quarter of an hour "
                                                          "per full run")
    parser.add_argument("--runners", default="threads,spark")
    parser.add_argument("--clusters", default="local[2],standalone-1,standalone-2")
    parser.add_argument("--modes", default="full,daily")
    parser.add_argument("--partitions", type=int, default=8, help="range and address partitions of a Spark run")
    parser.add_argument("--driver-memory", default="2g")
    parser.add_argument("--executor-memory", default="1g", help="standalone executors (each worker: this + 512m)")
    parser.add_argument("--day-commits", type=int, default=3, help="commits of the simulated day (each overwriting "
                                                                   "20 and deleting 5 paths; plus 10 uploads)")
    parser.add_argument("--quick", action="store_true", help="2,000 objects on local disk, threads and "
                                                             "standalone-1: the checks only, writes nothing")
    parser.add_argument("--cleaning", type=Path, default=None, help="a cleaning policy document (JSON, as `gc policy "
                                                                    "set` takes) set on the repository; its rows "
                                                                    "name it (bench/gc/cleaning-scale.json keeps "
                                                                    "the garbage the rules make)")
    parser.add_argument("--output", type=Path, default=None, help="default bench/results/scale.json")
    args = parser.parse_args()
    if args.child:
        return child(json.loads(args.child))
    if args.quick:
        parser.set_defaults(**QUICK)
        args = parser.parse_args()
    output = args.output or (None if args.quick else ROOT / "bench" / "results" / "scale.json")
    args.stores, args.runners, args.clusters, args.modes = (
        [x for x in v.split(",") if x] for v in (args.stores, args.runners, args.clusters, args.modes))
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if args.cleaning:  # refused here, before an hour of setup, if it is not a document `gc policy set` takes
        try:
            parse_cleaning_policies(json.loads(args.cleaning.read_text()))
        except (OSError, ValueError) as exc:
            print(f"--cleaning {args.cleaning}: {exc}", file=sys.stderr)
            return 2
    s3_sizes = [int(s) for s in args.s3_sizes.split(",") if s] if args.s3_sizes else sizes
    for cluster in args.clusters:
        check(cluster.startswith("local[") or cluster in ("standalone-1", "standalone-2", "standalone-3"),
              f"--clusters: {cluster!r} is neither local[N] nor standalone-N")
    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                         text=True).stdout.strip()
    base = {"git": git, "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")}
    info = machine(("pyspark", "lakefs-sdk", "s3fs", "pyarrow", "psutil"))
    rows: list[dict[str, Any]] = []
    partial = output.with_suffix(".partial.json") if output else None

    def save(row: dict[str, Any]) -> None:
        rows.append(row | {"machine": {k: info.get(k) for k in ("nproc", "cpu_model", "git_modified_outside_bench")}})
        if partial:
            partial.write_text(json.dumps(rows, indent=1) + "\n")

    from daily_bench import Day  # noqa: PLC0415 - it imports this module's grow

    started = time.monotonic()
    try:
        for kind in args.stores:
            with ExitStack() as stack:
                world = World(kind)
                stack.callback(world.close)
                clusters = Clusters(worker_memory=f"{int(args.executor_memory.rstrip('g')) + 1}g")
                stack.callback(clusters.close)
                namespace = world.store.namespace(REPO)
                store_sizes = s3_sizes if kind == "s3" else sizes
                total = len(store_sizes) + 1  # simulated days, the last one today
                writer = BulkMetadataOnly(staged_base(world.store, namespace), world.server.endpoint,
                                          ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY, files_in=(world.store, namespace),
                                          spawn_above=300 if args.quick else 2000, files_age=86400 * (total + 3))
                day = Day(world, namespace, SimpleNamespace(pattern="random", commits=args.day_commits,
                                                            overwrites=20, deletes=5, uploads=10), total)
                for size, made in grow(world, namespace, store_sizes, writer, uuid.uuid4().hex[:6],
                                       newest=COMMITS_DATED):
                    day.size = size
                    bench_size(world, clusters, day, size, args, base | {"generate_s": round(made["seconds"], 1)},
                               save)
    except CheckFailed as exc:
        print(f"FAIL: {exc}", file=sys.stderr)
        return 1
    print("\n".join(lines_of(rows)))
    print(f"scale_bench: all checks hold ({time.monotonic() - started:.0f} s)")
    if output:
        output.parent.mkdir(parents=True, exist_ok=True)
        # this run's rows replace those of the same store, size, mode, runner and cluster; the others stay
        merged = merge_rows(json.loads(output.read_text()) if output.exists() else [], rows)
        output.write_text(json.dumps(merged, indent=1) + "\n")
        partial.unlink(missing_ok=True)
        output.with_suffix(".md").write_text("\n".join([
            f"# bench/gc scale (issue 37) — last run {base['date']} (git {git}); each row names its own git", "",
            "Dry runs on the state a real full run left, after one simulated day; wall s = the whole run as its "
            "caller waits (Spark: spark-submit, JVM start included); driver peak = spark-submit's JVM + the Python "
            "driver at one instant (local[2]: its executors live in that JVM too). Rows of different gits come from "
            "different runs, on whatever load the machine had then: compare wall times within one git only. See "
            "bench/gc/scale_bench.py.", "", *lines_of(merged), ""]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
