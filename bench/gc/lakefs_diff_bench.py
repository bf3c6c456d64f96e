"""bench/gc/lakefs_diff_bench: what lakeFS itself takes to say what a day changed, at 100k and 1M objects.

    .venv/bin/python bench/gc/lakefs_diff_bench.py [--sizes 100000,1000000] [--pattern random|tail] [--rounds 4]

The floor for any collector that works from lakeFS's metadata: a day of changes at random paths rewrites every
range it touches (lakeFS writes a new version of each), so whoever finds those changes (our incremental run, or
lakeFS's own diff between the day's first and last commit) reads those ranges. This bench makes the daily bench's
lake (bench/gc/daily_bench.py: objects with files behind them, 10 commits a day of 30 overwrites and 10 deletes)
and times lakeFS's two-dot diff (``GET /repositories/{repo}/refs/{left}/diff/{right}?type=two_dot``, every page)
between the day's first and last HEAD, and between the last commit and its parent; medians of ``--rounds``.
Writes bench/results/lakefs-diff.json and .md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

from common import ROOT, World  # noqa: E402
from daily_bench import COMMITS_DATED, Day  # noqa: E402
from generate import BulkMetadataOnly, staged_base  # noqa: E402
from scale_bench import REPO, grow  # noqa: E402

from tests.services import ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY  # noqa: E402


def diff_seconds(endpoint: str, left: str, right: str) -> tuple[float, int]:
    import requests  # noqa: PLC0415

    started, paths, after = time.perf_counter(), 0, ""
    with requests.Session() as session:
        session.auth = (ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY)
        while True:
            page = session.get(f"{endpoint}/api/v1/repositories/{REPO}/refs/{left}/diff/{right}",
                               params={"type": "two_dot", "amount": 1000, "after": after}, timeout=600)
            page.raise_for_status()
            body = page.json()
            paths += len(body["results"])
            if not body["pagination"]["has_more"]:
                return time.perf_counter() - started, paths
            after = body["pagination"]["next_offset"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--pattern", choices=["random", "tail"], default="random")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--output", type=Path, default=ROOT / "bench" / "results" / "lakefs-diff.json")
    a = parser.parse_args()
    world = World("local")
    results: dict = {"date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "pattern": a.pattern, "sizes": {}}
    try:
        namespace = world.store.namespace(REPO)
        writer = BulkMetadataOnly(staged_base(world.store, namespace), world.server.endpoint, ADMIN_ACCESS_KEY,
                                  ADMIN_SECRET_KEY, files_in=(world.store, namespace), spawn_above=2000,
                                  files_age=86400 * 10)
        day = Day(world, namespace, argparse.Namespace(pattern=a.pattern, commits=10, overwrites=30, deletes=10,
                                                       uploads=20), 5)
        endpoint = world.server.endpoint.rstrip("/")
        branch = world.lakefs.branches

        def head() -> str:
            return branch.get_branch(REPO, "main").commit_id

        for size, _ in grow(world, namespace, [int(s) for s in a.sizes.split(",")], writer, uuid.uuid4().hex[:6],
                            newest=COMMITS_DATED):
            day.size = size
            first = head()
            day.one_day()
            last = head()
            parent = world.lakefs.commits.get_commit(REPO, last).parents[0]
            day_runs = [diff_seconds(endpoint, first, last) for _ in range(a.rounds)]
            one_runs = [diff_seconds(endpoint, parent, last) for _ in range(a.rounds)]
            results["sizes"][size] = {
                "day_diff_seconds": statistics.median(s for s, _ in day_runs), "day_paths": day_runs[0][1],
                "commit_diff_seconds": statistics.median(s for s, _ in one_runs), "commit_paths": one_runs[0][1],
                "rounds": {"day": [s for s, _ in day_runs], "commit": [s for s, _ in one_runs]}}
            print(size, results["sizes"][size], flush=True)
    finally:
        world.close()
    lines = [f"# lakeFS's own diff ({results['date']}, pattern {a.pattern}, medians of {a.rounds})", "",
             "| objects | a day's diff (10 commits) s | paths | one commit's diff s | paths |", "|---:|---:|---:|---:|---:|"]
    for size, r in results["sizes"].items():
        lines.append(f"| {size:,} | {r['day_diff_seconds']:.3f} | {r['day_paths']} | {r['commit_diff_seconds']:.3f} | "
                     f"{r['commit_paths']} |")
    print("\n".join(lines))
    a.output.parent.mkdir(parents=True, exist_ok=True)
    a.output.write_text(json.dumps(results, indent=2) + "\n")
    a.output.with_suffix(".md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
