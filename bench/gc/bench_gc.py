"""bench/gc: the committed GC's mark and sweep, in-process and on Spark local, on a real lakeFS over S3 (moto).

    .venv/bin/python bench/gc/bench_gc.py [--objects 100000 --commits 1000 --changed 10 --rounds 3
                                           --sweep-objects 8000 --sweep-commits 20 --sweep-changed 100
                                           --random-objects 20000 --random-commits 100 --no-spark --output PATH]
    make bench-gc   (this, then bench/gc/sstable_bench.py)

Everything runs on 127.0.0.1 and is stopped at the end: a moto S3 server (its request recorder counts the
requests the GC sends) and lakeFS v1.84 with the S3 blockstore. Repositories come from bench/gc/generate.py
(objects staged by metadata, commits backdated one hour apart, ending an hour ago). Each GC run is timed end to
end as a caller sees it: in-process = ``spark_jobs.engine.engine.run`` on a thread pool in this process (lakeFS
calls including lakeFS's own prepare_commits/prepare_uncommitted, metadata reads from S3, listing, plan and
report writes); Spark = ``workers.gc.submit.run_gc`` on local[2] (zip, spark-submit, JVM start, executors,
reading the stored summary back). The mark phase alone (ranges + staged addresses) is reported from the summary.

1. Mark cost growth (dry-run mode: mark and plan, nothing deleted; retention 3650 days keeps every commit):
   one repository, timed first with 1 commit of ``--objects`` objects, then again after ``--commits`` more
   commits of ``--changed`` new files each (new date partitions, i.e. keys after all others: how tables grow).
   Tracked: time after / time before (goal <= 3: the cost follows unique ranges, not commits). For reference,
   a repository of ``--random-objects`` objects whose ``--random-commits`` commits each overwrite ``--changed``
   paths spread over the whole key space: every such commit rewrites the ranges it touches (lakeFS ranges hold
   ~50,000 entries by default), so there unique ranges - and the cost - grow with commits; the unique ranges
   and entries read are reported for both.
2. Sweep (full run, min age 0, retention 7 days, a history 40 to 20 days old): ``--sweep-objects`` objects with
   data, then ``--sweep-commits`` commits overwriting ``--sweep-changed`` of them, so exactly
   sweep-commits x sweep-changed objects are garbage. One fresh copy per engine. Tracked: end-to-end seconds
   in-process (goal < 5 s for <= 10k objects) and on Spark local[2]; S3 DeleteObjects requests per deleted
   object (goal <= 1/1000 + one partial batch), counted by moto's recorder.

Checks (a failure exits 1 and writes nothing): each run succeeds; the sweep deletes exactly the garbage objects,
every object the HEAD reaches is still in the bucket, and the GC sent no single-object DELETE.
Writes bench/results/gc.json and bench/results/gc.md (``--output`` elsewhere).
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

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import lakefs_sdk  # noqa: E402
import requests  # noqa: E402
from generate import Generated, HistoryShape, MetadataOnly, S3Objects, extend, generate  # noqa: E402

from spark_jobs.engine.engine import run  # noqa: E402
from spark_jobs.engine.lakefs_api import LakeFSApiConfig  # noqa: E402
from spark_jobs.engine.parallel import ThreadRunner  # noqa: E402
from tests.services import (  # noqa: E402
    ADMIN_ACCESS_KEY,
    ADMIN_SECRET_KEY,
    LakeFSServer,
    MotoS3Server,
)
from workers.gc.submit import run_gc  # noqa: E402
from workers.lakefs.client import make_lakefs_for  # noqa: E402
from workers.settings import LakeFSConnection, SparkSettings  # noqa: E402

BUCKET = "bench"


class RecordingMoto(MotoS3Server):
    """moto with its request recorder writing to our temp dir (switched on only around the runs we count)."""

    def start(self) -> RecordingMoto:
        self.recording = self.dir / "requests.jsonl"
        os.environ["MOTO_RECORDER_FILEPATH"] = str(self.recording)  # inherited by the child only
        try:
            return super().start()
        finally:
            os.environ.pop("MOTO_RECORDER_FILEPATH", None)

    def record(self, on: bool) -> None:
        if on:
            requests.post(f"{self.endpoint}/moto-api/recorder/reset-recording", timeout=10).raise_for_status()
        action = "start" if on else "stop"
        requests.post(f"{self.endpoint}/moto-api/recorder/{action}-recording", timeout=10).raise_for_status()

    def recorded(self) -> list[dict[str, Any]]:
        if not self.recording.exists():
            return []
        return [json.loads(line) for line in self.recording.read_text().splitlines() if line.strip()]


def count_requests(recorded: list[dict[str, Any]]) -> dict[str, int]:
    counts = {"delete_objects": 0, "delete_object": 0, "list": 0, "get": 0, "put": 0, "other": 0}
    for r in recorded:
        method, url = r["method"], r["url"]
        query = url.partition("?")[2]
        if method == "POST" and "delete" in query.split("&") or method == "POST" and "delete=" in query:
            counts["delete_objects"] += 1
        elif method == "DELETE":
            counts["delete_object"] += 1
        elif method == "GET" and ("list-type" in query or "prefix=" in query or "delimiter" in query):
            counts["list"] += 1
        elif method in ("GET", "HEAD"):
            counts["get"] += 1
        elif method == "PUT":
            counts["put"] += 1
        else:
            counts["other"] += 1
    return counts


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.s3 = RecordingMoto().start()
        self.s3.client().create_bucket(Bucket=BUCKET)
        self.lakefs_server = LakeFSServer(s3=self.s3).start()
        self.lakefs = make_lakefs_for(self.lakefs_server.endpoint, ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY)
        self.api_config = LakeFSApiConfig(f"{self.lakefs_server.endpoint}/api/v1", ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY)
        self.conn = LakeFSConnection(endpoint_url=self.lakefs_server.endpoint, access_key_id=ADMIN_ACCESS_KEY,
                                     secret_access_key=ADMIN_SECRET_KEY)
        self.storage_options = {"key": self.s3.access_key, "secret": self.s3.secret_key,
                                "client_kwargs": {"endpoint_url": self.s3.endpoint, "region_name": "us-east-1"}}
        # Spark local[2]: the machine has 2 cores, shared. Partition counts scaled to it (the seed's 50/200 make
        # 250 tiny tasks of ~10 ms each for a repository this size).
        self.spark = SparkSettings(master="local[2]", range_num_partitions=args.spark_partitions,
                                   address_num_partitions=args.spark_partitions)
        self.spark_env = {**{k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))},
                          "SPARK_LOCAL_IP": "127.0.0.1"}

    def close(self) -> None:
        self.lakefs_server.cleanup()
        self.s3.cleanup()

    def set_rules(self, repository_id: str, days: int) -> None:
        self.lakefs.repositories.set_gc_rules(repository_id, lakefs_sdk.GarbageCollectionRules(
            default_retention_days=days, branches=[]))

    def gc(self, repository_id: str, mode: str, engine: str, **kwargs: Any) -> tuple[float, dict[str, Any]]:
        """One GC run, timed end to end: in-process (engine.run on a thread pool, in this process) or Spark
        (workers.gc.submit.run_gc: zip, spark-submit, JVM, executors, reading the stored summary back)."""
        now = datetime.now(UTC) + timedelta(seconds=1)
        started = time.perf_counter()
        if engine == "inprocess":
            out = run(api_config=self.api_config, repository_id=repository_id, mode=mode, runner=ThreadRunner(8),
                      now=now, storage_options_json=json.dumps(self.storage_options), **kwargs)
        else:
            out = run_gc(spark=self.spark, lakefs=self.conn, repository_id=repository_id, mode=mode, now=now,
                         storage_options=self.storage_options, env=self.spark_env, **kwargs)
        return time.perf_counter() - started, out

    def engines(self) -> list[str]:
        return ["inprocess"] if self.args.no_spark else ["inprocess", "spark"]

    def time_mark(self, repository_id: str, engine: str, rounds: int) -> dict[str, Any]:
        times, phases, summary = [], [], {}
        for _ in range(rounds):
            elapsed, out = self.gc(repository_id, "dry-run", engine)
            summary = out.get("summary", {})
            times.append(elapsed)
            phases.append(summary.get("seconds", {}).get("mark", float("nan")))
        return {"seconds": times, "median": statistics.median(times), "mark_phase_seconds": phases,
                "mark_phase_median": statistics.median(phases), "summary": summary}

    # 1. mark cost growth
    def mark_growth(self) -> dict[str, Any]:
        a = self.args
        end = datetime.now(UTC) - timedelta(hours=1)
        repo = generate(self.lakefs, repository_id="mark-growth", storage_namespace=f"s3://{BUCKET}/mark-growth",
                        shape=HistoryShape(a.objects, 0), writer=MetadataOnly(f"s3://{BUCKET}/mark-growth"),
                        end=end - timedelta(hours=a.commits), progress=print)
        self.set_rules(repo.repository_id, 3650)
        result: dict[str, Any] = {"objects": a.objects, "commits": a.commits, "changed": a.changed}
        rounds = {"inprocess": a.rounds, "spark": max(1, a.rounds - 1)}
        for engine in self.engines():
            result[f"{engine}_1_commit"] = self.time_mark(repo.repository_id, engine, rounds[engine])
        extend(self.lakefs, repo, shape=HistoryShape(a.objects, a.commits, a.changed, "append"),
               writer=MetadataOnly(repo.storage_namespace), first=end - timedelta(hours=a.commits - 1),
               progress=print)
        for engine in self.engines():
            result[f"{engine}_n_commits"] = self.time_mark(repo.repository_id, engine, rounds[engine])
            result[f"{engine}_ratio"] = (result[f"{engine}_n_commits"]["median"]
                                         / result[f"{engine}_1_commit"]["median"])
            result[f"{engine}_mark_phase_ratio"] = (result[f"{engine}_n_commits"]["mark_phase_median"]
                                                    / result[f"{engine}_1_commit"]["mark_phase_median"])
        # Reference: overwrites spread over the key space.
        if a.random_commits:
            rnd = generate(self.lakefs, repository_id="mark-random", storage_namespace=f"s3://{BUCKET}/mark-random",
                           shape=HistoryShape(a.random_objects, 0), writer=MetadataOnly(f"s3://{BUCKET}/mark-random"),
                           end=end - timedelta(hours=a.random_commits), progress=print)
            self.set_rules(rnd.repository_id, 3650)
            result["random_1_commit"] = self.time_mark(rnd.repository_id, "inprocess", a.rounds)
            extend(self.lakefs, rnd, shape=HistoryShape(a.random_objects, a.random_commits, a.changed, "random"),
                   writer=MetadataOnly(rnd.storage_namespace), first=end - timedelta(hours=a.random_commits - 1),
                   progress=print)
            result["random_n_commits"] = self.time_mark(rnd.repository_id, "inprocess", a.rounds)
            result["random_ratio"] = result["random_n_commits"]["median"] / result["random_1_commit"]["median"]
            result["random_mark_phase_ratio"] = (result["random_n_commits"]["mark_phase_median"]
                                                 / result["random_1_commit"]["mark_phase_median"])
            result["random"] = {"objects": a.random_objects, "commits": a.random_commits}
        return result

    def mark_growth_local(self) -> dict[str, Any]:
        """The same mark-growth measurement on lakeFS's local blockstore, where a metadata file is a local read
        (no per-request latency): what the mark costs when fetching a file is cheap."""
        a = self.args
        server = LakeFSServer().start()
        saved = self.lakefs, self.api_config, self.conn, self.storage_options
        try:
            self.lakefs = make_lakefs_for(server.endpoint, ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY)
            self.api_config = LakeFSApiConfig(f"{server.endpoint}/api/v1", ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY)
            self.conn = LakeFSConnection(endpoint_url=server.endpoint, access_key_id=ADMIN_ACCESS_KEY,
                                         secret_access_key=ADMIN_SECRET_KEY)
            self.storage_options = {}
            end = datetime.now(UTC) - timedelta(hours=1)
            # staged objects on the local blockstore need full local:///<root>/<name>/... addresses
            writer = MetadataOnly(f"local://{server.dir}/block/mark-local")
            repo = generate(self.lakefs, repository_id="mark-local", storage_namespace="local://mark-local",
                            shape=HistoryShape(a.objects, 0), writer=writer, end=end - timedelta(hours=a.commits),
                            progress=print)
            self.set_rules(repo.repository_id, 3650)
            result: dict[str, Any] = {}
            rounds = {"inprocess": a.rounds, "spark": max(1, a.rounds - 1)}
            for engine in self.engines():
                result[f"{engine}_1_commit"] = self.time_mark(repo.repository_id, engine, rounds[engine])
            extend(self.lakefs, repo, shape=HistoryShape(a.objects, a.commits, a.changed, "append"), writer=writer,
                   first=end - timedelta(hours=a.commits - 1), progress=print)
            for engine in self.engines():
                result[f"{engine}_n_commits"] = self.time_mark(repo.repository_id, engine, rounds[engine])
                one, many = result[f"{engine}_1_commit"], result[f"{engine}_n_commits"]
                result[f"{engine}_ratio"] = many["median"] / one["median"]
                result[f"{engine}_mark_phase_ratio"] = many["mark_phase_median"] / one["mark_phase_median"]
            return result
        finally:
            self.lakefs.close()
            self.lakefs, self.api_config, self.conn, self.storage_options = saved
            server.cleanup()

    # 2. sweep
    def sweep_repo(self, name: str) -> Generated:
        a = self.args
        end = datetime.now(UTC) - timedelta(days=20)
        step = timedelta(days=20) / max(1, a.sweep_commits)
        ns = f"s3://{BUCKET}/{name}"
        repo = generate(self.lakefs, repository_id=name, storage_namespace=ns, writer=S3Objects(self.s3.client(), ns),
                        shape=HistoryShape(a.sweep_objects, a.sweep_commits, a.sweep_changed, "random"),
                        end=end, step=step, progress=print)
        self.set_rules(name, 7)
        return repo

    def bucket_keys(self, prefix: str) -> set[str]:
        keys: set[str] = set()
        for page in self.s3.client().get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
            keys.update(o["Key"] for o in page.get("Contents", []))
        return keys

    def live_keys(self, repo: Generated) -> set[str]:
        live = set()
        after = ""
        while True:
            page = self.lakefs.objects.list_objects(repo.repository_id, "main", after=after, amount=1000)
            live.update(o.physical_address.removeprefix(f"s3://{BUCKET}/") for o in page.results)
            if not page.pagination.has_more:
                return live
            after = page.pagination.next_offset

    def sweep(self) -> dict[str, Any]:
        a = self.args
        result: dict[str, Any] = {"objects": a.sweep_objects + a.sweep_commits * a.sweep_changed,
                                  "garbage": a.sweep_commits * a.sweep_changed}
        for engine in self.engines():
            repo = self.sweep_repo(f"sweep-{engine}")
            data_prefix = f"{repo.repository_id}/data/"
            before = self.bucket_keys(data_prefix)
            live = self.live_keys(repo)
            expected_garbage = before - live
            if len(expected_garbage) != result["garbage"]:
                raise AssertionError(f"generated {len(expected_garbage)} garbage objects, expected {result['garbage']}")
            self.s3.record(True)
            elapsed, out = self.gc(repo.repository_id, "full", engine, min_age=timedelta(0))
            summary = {"mark": out.get("summary"), "sweep": out.get("sweep")}
            self.s3.record(False)
            counts = count_requests(self.s3.recorded())
            after = self.bucket_keys(data_prefix)
            deleted = before - after
            if deleted != expected_garbage:
                raise AssertionError(f"{engine}: deleted {len(deleted)} objects, {len(deleted - expected_garbage)} "
                                     f"of them live; missed {len(expected_garbage - deleted)} garbage objects")
            if counts["delete_object"]:
                raise AssertionError(f"{engine}: {counts['delete_object']} single-object DELETE requests")
            result[engine] = {"seconds": elapsed, "deleted": len(deleted), "requests": counts,
                              "delete_requests_per_object": counts["delete_objects"] / max(1, len(deleted)),
                              "summary": summary}
        return result


def machine() -> dict[str, Any]:
    try:
        from machine import machine_info  # noqa: PLC0415 - bench/machine.py, shared by the benchmarks

        return machine_info(("pyspark", "lakefs-sdk", "moto", "boto3", "cramjam"))
    except Exception:  # noqa: BLE001 - informational only
        return {"cpus": os.cpu_count()}


def mark_lines(m: dict[str, Any]) -> list[str]:
    lines = ["",
             f"Mark growth: {m['objects']:,} objects, then +{m['commits']:,} commits x {m['changed']} new files "
             "(retention keeps every commit); dry run, end to end and mark phase, median seconds:", "",
             "| engine | 1 commit s | after the commits s | **ratio** (goal <= 3) | mark phase: 1 commit s | after s | ratio | ranges read |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for key, label in (("inprocess", "in-process"), ("spark", "Spark local[2]"), ("random", None)):
        if f"{key}_ratio" not in m:
            continue
        one, many = m[f"{key}_1_commit"], m[f"{key}_n_commits"]
        if label is None:
            label = (f"in-process, random overwrites ({m['random']['objects']:,} objects, "
                     f"+{m['random']['commits']} commits)")
        lines.append(f"| {label} | {one['median']:.2f} | {many['median']:.2f} | **{m[f'{key}_ratio']:.2f}** | "
                     f"{one['mark_phase_median']:.2f} | {many['mark_phase_median']:.2f} | "
                     f"{m[f'{key}_mark_phase_ratio']:.2f} | {one['summary'].get('ranges')} -> "
                     f"{many['summary'].get('ranges')} |")
    return lines


def write_results(results: dict[str, Any], output: Path) -> None:
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=2, default=str) + "\n")
    m, s = results["mark_growth"], results["sweep"]
    lines = [f"# bench/gc — {results['date']} (git {results['git']})"]
    if m:
        lines += mark_lines(m)
    ml = results.get("mark_growth_local") or {}
    if ml:
        lines += ["", "Mark growth on the local blockstore (metadata files read from local disk):", "",
                  "| engine | 1 commit s | after the commits s | **ratio** | mark phase 1 commit s | after s | ratio |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        for engine in ("inprocess", "spark"):
            if f"{engine}_ratio" in ml:
                one, many = ml[f"{engine}_1_commit"], ml[f"{engine}_n_commits"]
                lines.append(f"| {engine} | {one['median']:.2f} | {many['median']:.2f} | **{ml[f'{engine}_ratio']:.2f}** | "
                             f"{one['mark_phase_median']:.2f} | {many['mark_phase_median']:.2f} | "
                             f"{ml[f'{engine}_mark_phase_ratio']:.2f} |")
    if not s:
        output.with_suffix(".md").write_text("\n".join(lines) + "\n")
        return
    lines += ["", f"Sweep: {s['objects']:,} objects, {s['garbage']:,} garbage; full run (mark + sweep), min age 0, end to end:", "",
              "| engine | seconds | deleted | DeleteObjects requests | requests / object |", "|---|---:|---:|---:|---:|"]
    for engine in ("inprocess", "spark"):
        if engine in s:
            e = s[engine]
            lines.append(f"| {engine} | {e['seconds']:.2f} | {e['deleted']:,} | {e['requests']['delete_objects']} | "
                         f"{e['delete_requests_per_object']:.5f} |")
    output.with_suffix(".md").write_text("\n".join(lines) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=100_000)
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--changed", type=int, default=10)
    parser.add_argument("--random-objects", type=int, default=20_000)
    parser.add_argument("--random-commits", type=int, default=100)
    parser.add_argument("--sweep-objects", type=int, default=8000)
    parser.add_argument("--sweep-commits", type=int, default=20)
    parser.add_argument("--sweep-changed", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--spark-partitions", type=int, default=4)
    parser.add_argument("--no-spark", action="store_true")
    parser.add_argument("--skip-mark", action="store_true")
    parser.add_argument("--no-local", action="store_true", help="skip mark growth on the local blockstore")
    parser.add_argument("--skip-sweep", action="store_true")
    parser.add_argument("--output", type=Path, default=ROOT / "bench" / "results" / "gc.json")
    args = parser.parse_args()
    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    results: dict[str, Any] = {"date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "git": git.strip(),
                               "args": vars(args) | {"output": str(args.output)}, "machine": machine()}
    bench = Bench(args)
    try:
        results["mark_growth"] = {} if args.skip_mark else bench.mark_growth()
        print(json.dumps(results["mark_growth"], default=str)[:2000])
        results["mark_growth_local"] = {} if args.no_local else bench.mark_growth_local()
        results["sweep"] = {} if args.skip_sweep else bench.sweep()
    finally:
        bench.close()
    write_results(results, args.output)
    print(args.output.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
