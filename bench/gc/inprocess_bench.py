"""GC benchmark, in-process engine, on a real lakeFS over S3 (moto) on loopback.

    .venv/bin/python bench/gc/inprocess_bench.py [--objects 20000] [--commits 200] [--changed 10]

Measures, in one run (figures are ratios; absolute times depend on this machine):
* mark cost growth: a repository of N objects in one commit vs the same N objects plus C commits changing K files
  each, all retained (mark-only, metadata writer: the mark reads only lakeFS metadata). Goal: ≤ 3×, because the
  cost follows distinct ranges, not commits.
* end to end (mark + sweep) on a repository of ≤ 10k objects with real data in S3 and garbage to delete
  (goal < 5 s), and DeleteObjects requests per deleted object (goal ≤ 1/1,000 + ε).
Results: bench/results/gc-inprocess.md (and printed).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import lakefs_sdk

from bench import machine
from bench.gc.generate import HistoryShape, MetadataOnly, S3Objects, generate
from spark_jobs.core.cleaning import parse_cleaning_policies
from tests.services import ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY, LakeFSServer, MotoS3Server
from workers.gc.cleaning_store import clear_cleaning, set_cleaning
from workers.gc.run import mark, run
from workers.gc.storage import S3Namespace
from workers.lakefs.client import make_lakefs_for

RESULTS = ROOT / "bench" / "results"


def rules(lakefs, repo, days: int) -> None:
    lakefs.call("rules", lakefs.repositories.set_gc_rules, repo,
                lakefs_sdk.GarbageCollectionRules(default_retention_days=days, branches=[]))


def timed_mark(lakefs, ns, repo) -> tuple[float, dict]:
    started = time.monotonic()
    marked = mark(lakefs, ns, repo, now=datetime.now(UTC), min_age=timedelta(0), dry_run=True)
    return time.monotonic() - started, {"retained": len(marked.retained), "ranges": marked.ranges,
                                        "phases": {k: round(v, 3) for k, v in marked.seconds.items()}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--objects", type=int, default=20_000)
    ap.add_argument("--commits", type=int, default=200)
    ap.add_argument("--changed", type=int, default=10)
    ap.add_argument("--e2e-objects", type=int, default=10_000)
    args = ap.parse_args()
    s3 = MotoS3Server().start()
    server = None
    out: dict = {"machine": machine.machine_info(("lakefs-sdk", "cramjam", "pyarrow", "boto3"))}
    try:
        s3.client().create_bucket(Bucket="bench")
        server = LakeFSServer(s3=s3).start()
        lakefs = make_lakefs_for(server.endpoint, ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY)
        end = datetime.now(UTC) - timedelta(hours=1)

        def ns(name):
            return S3Namespace(f"s3://bench/{name}", s3.client)

        one = generate(lakefs, repository_id="one-commit", storage_namespace="s3://bench/one-commit",
                       writer=MetadataOnly("s3://bench/one-commit"), shape=HistoryShape(args.objects, 0), end=end)
        many = generate(lakefs, repository_id="many-commits", storage_namespace="s3://bench/many-commits",
                        writer=MetadataOnly("s3://bench/many-commits"),
                        shape=HistoryShape(args.objects, args.commits, args.changed), end=end,
                        step=timedelta(minutes=1))
        appended = generate(lakefs, repository_id="many-appends", storage_namespace="s3://bench/many-appends",
                            writer=MetadataOnly("s3://bench/many-appends"),
                            shape=HistoryShape(args.objects, args.commits, args.changed, "append"), end=end,
                            step=timedelta(minutes=1))
        for repo in (one, many, appended):
            rules(lakefs, repo.repository_id, 30)
        t_one, info_one = timed_mark(lakefs, ns("one-commit"), "one-commit")
        t_many, info_many = timed_mark(lakefs, ns("many-commits"), "many-commits")
        t_app, info_app = timed_mark(lakefs, ns("many-appends"), "many-appends")
        out["mark_growth"] = {"objects": args.objects, "commits": args.commits, "changed": args.changed,
                              "one_commit_s": round(t_one, 2), "many_commits_s": round(t_many, 2),
                              "ratio": round(t_many / t_one, 2), "append_s": round(t_app, 2),
                              "append_ratio": round(t_app / t_one, 2), "one": info_one, "many": info_many,
                              "append": info_app}

        # Cleaning policies on the same repository (random writes), each against the GC-rules-only mark above:
        # what reading whole first-parent lines (keep_commits, keep_for), the tags (savepoints) and every
        # commit's entries (keep_versions) adds.
        policy_runs = {
            "keep_commits 10 + keep_for 30m + savepoints (override_gc_rules)": [
                {"id": "hudi", "patterns": ["main"], "keep_commits": 10, "keep_for": "30m",
                 "savepoints": ["release-*"], "override_gc_rules": True}],
            "keep_versions 2": [{"id": "versions", "patterns": ["main"], "keep_versions": 2}],
        }
        out["policies"] = {"gc_rules_only_s": round(t_many, 2), "gc_rules_only_retained": info_many["retained"]}
        for label, doc in policy_runs.items():
            set_cleaning(lakefs, "many-commits", parse_cleaning_policies({"policies": doc}))
            t_policy, info_policy = timed_mark(lakefs, ns("many-commits"), "many-commits")
            out["policies"][label] = {"seconds": round(t_policy, 2), "ratio": round(t_policy / t_many, 2),
                                      "retained": info_policy["retained"], "phases": info_policy["phases"]}
        clear_cleaning(lakefs, "many-commits")

        generate(lakefs, repository_id="e2e", storage_namespace="s3://bench/e2e",
                       writer=S3Objects(s3.client(), "s3://bench/e2e"),
                       shape=HistoryShape(args.e2e_objects, 20, 100), end=end, step=timedelta(days=1))
        rules(lakefs, "e2e", 3)
        space = ns("e2e")
        started = time.monotonic()
        summary, marked = run(lakefs, space, "e2e", min_age=timedelta(0))
        seconds = time.monotonic() - started
        out["end_to_end"] = {"objects": args.e2e_objects, "deleted": summary.swept, "seconds": round(seconds, 2),
                             "delete_requests": space.delete_requests,
                             "requests_per_deleted_object": round(space.delete_requests / max(summary.swept, 1), 5),
                             "phases": {k: round(v, 3) for k, v in marked.seconds.items()}}
    finally:
        if server:
            server.cleanup()
        s3.cleanup()
    RESULTS.mkdir(exist_ok=True)
    text = json.dumps(out, indent=2)
    (RESULTS / "gc-inprocess.json").write_text(text + "\n")
    g, e = out["mark_growth"], out["end_to_end"]
    md = [f"# GC, in-process engine ({datetime.now(UTC):%Y-%m-%d})", "",
          f"* mark growth: {g['objects']:,} objects, 1 commit: {g['one_commit_s']} s; plus {g['commits']} commits × "
          f"{g['changed']} changed files at random paths: {g['many_commits_s']} s, **ratio {g['ratio']}**; the same "
          f"commits appending new paths (time-partitioned data): {g['append_s']} s, **ratio {g['append_ratio']}** "
          "(goal ≤ 3)",
          f"* end to end on {e['objects']:,} objects (20 commits × 100 changed, 3-day retention): "
          f"**{e['seconds']} s** (goal < 5 s), {e['deleted']:,} deleted with {e['delete_requests']} DeleteObjects "
          f"requests: **{e['requests_per_deleted_object']} requests per object** (goal ≤ 0.001 + ε)",
          *(f"* policy run on the random-writes repository, {label}: {r['seconds']} s, **{r['ratio']}× the GC-rules-"
            f"only mark**, {r['retained']} commits retained (GC rules alone: {out['policies']['gc_rules_only_retained']})"
            for label, r in out["policies"].items() if isinstance(r, dict)),
          "", "```json", text, "```", ""]
    (RESULTS / "gc-inprocess.md").write_text("\n".join(md))
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
