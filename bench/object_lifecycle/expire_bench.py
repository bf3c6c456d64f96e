"""Object lifecycle: expiring many objects on one branch, on a real lakeFS (local blockstore, files behind every
object) — time, lakeFS requests per 1,000 expired objects by kind, listing pages, peak memory.

    .venv/bin/python bench/object_lifecycle/expire_bench.py --objects 100000 [--out bench/results/object-lifecycle-100k.json]
    .venv/bin/python bench/object_lifecycle/expire_bench.py --quick      # 2,000 objects, a minute at most

The objects are files in lakeFS's import folder, imported into `main` (lakeFS takes each object's mtime from its
file), half under raw/ dated 60 days ago (the rule expires them: `raw/**`, 30d), half under results/ and recent.
The measured run is a real `run_repository` in a child process (its peak RSS is the run's own); every HTTP request
its lakeFS client sends is counted by kind (the client's urllib3 pool, wrapped: instrumentation, lakeFS is real).
Checked afterwards: main holds exactly the objects that were not due, and the report counts the expired ones.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import resource
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import lakefs_sdk  # noqa: E402
import redis  # noqa: E402

from tests.services import ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY, LakeFSServer, RedisServer, stop_on_sigterm  # noqa: E402
from workers.lakefs.client import make_lakefs_for  # noqa: E402
from workers.object_lifecycle.rules import parse_rules  # noqa: E402
from workers.object_lifecycle.run import RunOptions, run_repository  # noqa: E402
from workers.object_lifecycle.store import ObjectLifecycleRecords, set_rules  # noqa: E402

RULES = {"rules": [{"id": "raw-30d", "branches": ["main"], "paths": ["raw/**"], "max_age": "30d"}]}
KINDS = [  # (kind, method, url pattern), first match wins
    ("list objects", "GET", r"/refs/[^/]+/objects/ls"),
    ("delete objects", "POST", r"/branches/[^/]+/objects/delete"),
    ("diff (read-back)", "GET", r"/refs/[^/]+/diff/"),
    ("commit", "POST", r"/branches/[^/]+/commits"),
    ("merge", "POST", r"/refs/[^/]+/merge/"),
    ("create branch", "POST", r"/branches$"),
    ("delete branch", "DELETE", r"/branches/[^/]+$"),
]


def kind_of(method: str, url: str) -> str:
    path = url.split("?", 1)[0]
    for kind, m, pattern in KINDS:
        if method == m and re.search(pattern, path):
            return kind
    return "other (branch, repository, rules, protection, staged check, commit)"


def populate(server: LakeFSServer, lakefs, repo: str, n: int) -> int:
    """n files in the import folder, imported into main; returns how many are due (raw/, 60 days old)."""
    source = server.import_dir / repo
    old = time.time() - 60 * 86400
    due = 0
    for i in range(n):
        top = "raw" if i % 2 == 0 else "results"
        folder = source / top / f"2026-{i % 12 + 1:02d}-{i % 28 + 1:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        f = folder / f"part-{i:07d}.parquet"
        f.write_bytes(b"p" * (64 + i % 64))
        if top == "raw":
            os.utime(f, (old, old))
            due += 1
    started = lakefs.imports.import_start(repo, "main", lakefs_sdk.ImportCreation(
        paths=[lakefs_sdk.ImportLocation(type="common_prefix", path=f"local://{source}/", destination="")],
        commit=lakefs_sdk.CommitCreation(message=f"import {n} objects")))
    while not (status := lakefs.imports.import_status(repo, "main", started.id)).completed:
        if status.error:
            raise RuntimeError(f"import failed: {status.error}")
        time.sleep(0.5)
    return due


def measured_run(endpoint: str, redis_url: str, repo: str, out) -> None:
    """The child: one real run, its requests counted, its peak RSS read."""
    lakefs = make_lakefs_for(endpoint, ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY, timeout=300)
    counts: Counter[str] = Counter()
    waited: Counter[str] = Counter()  # seconds spent waiting for lakeFS's answers, by kind
    pool = lakefs.api.rest_client.pool_manager
    original = pool.request

    def counting(method, url, *args, **kwargs):
        kind = kind_of(method, url)
        counts[kind] += 1
        began = time.monotonic()
        try:
            return original(method, url, *args, **kwargs)
        finally:
            waited[kind] += time.monotonic() - began

    pool.request = counting
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    records = ObjectLifecycleRecords(redis.Redis.from_url(redis_url), "bench")
    started = time.monotonic()
    report = run_repository(lakefs, records, repo, now=datetime.now(UTC),
                            options=RunOptions(max_deletions=10**9))
    seconds = time.monotonic() - started
    out.send({"seconds": seconds, "requests": dict(counts), "waited": {k: round(v, 2) for k, v in waited.items()}, "peak_rss_kib": resource.getrusage(
        resource.RUSAGE_SELF).ru_maxrss, "rss_before_kib": base_rss, "report": report.document()})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=100_000)
    parser.add_argument("--quick", action="store_true", help="2,000 objects")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    n = 2000 if args.quick else args.objects
    stop_on_sigterm()
    server = LakeFSServer().start()
    redis_server = RedisServer().start()
    try:
        lakefs = make_lakefs_for(server.endpoint, ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY, timeout=300)
        repo = "bench-ol"
        lakefs.repositories.create_repository(lakefs_sdk.RepositoryCreation(
            name=repo, storage_namespace=f"local://{repo}", default_branch="main"))
        t0 = time.monotonic()
        due = populate(server, lakefs, repo, n)
        populate_seconds = time.monotonic() - t0
        set_rules(lakefs, repo, parse_rules(RULES))
        here, there = multiprocessing.get_context("fork").Pipe()
        child = multiprocessing.get_context("fork").Process(
            target=measured_run, args=(server.endpoint, redis_server.url, repo, there))
        child.start()
        result = here.recv()
        child.join()
        branch = result["report"]["branches"][0]
        left = sum(1 for _ in lakefs.paginate_json("list", lakefs.objects.list_objects_with_http_info, repo, "main"))
        if branch["result"] != "expired" or branch["objects"] != due or left != n - due:
            print(f"CHECK FAILED: {branch['result']}, expired {branch['objects']} of {due}, left {left} of "
                  f"{n - due}", file=sys.stderr)
            return 1
        requests = result["requests"]
        listing = requests.get("list objects", 0)
        per_1000 = {k: round(v * 1000 / due, 3) for k, v in requests.items() if k != "list objects"}
        figures = {
            "objects": n, "expired": due, "populate_seconds": round(populate_seconds, 1),
            "run_seconds": round(result["seconds"], 2),
            "expired_per_second": round(due / result["seconds"]),
            "requests": requests, "listing_pages": listing,
            "seconds_waiting_for_lakefs_by_kind": result["waited"],
            "seconds_in_the_janitor": round(result["seconds"] - sum(result["waited"].values()), 2),
            "requests_per_1000_expired_excluding_listing": round(
                sum(v for k, v in requests.items() if k != "list objects") * 1000 / due, 3),
            "requests_per_1000_expired_by_kind": per_1000,
            "goal_requests_per_1000": 2,
            "peak_rss_mib": round(result["peak_rss_kib"] / 1024, 1),
            "rss_before_run_mib": round(result["rss_before_kib"] / 1024, 1),
            "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": {"cpus": os.cpu_count()},
        }
        text = json.dumps(figures, indent=2)
        print(text)
        if args.out:
            args.out.write_text(text + "\n")
        return 0
    finally:
        redis_server.cleanup()
        server.cleanup()


if __name__ == "__main__":
    sys.exit(main())
