"""GC benchmark, the one engine on the thread runner (in process), on a real lakeFS over S3 (versitygw) on loopback.

    .venv/bin/python bench/gc/inprocess_bench.py [--objects 20000] [--commits 200] [--changed 10]
        [--e2e-objects 10000] [--store s3|local|azure|gcs] [--quick]

Measures, in one run (figures are ratios; absolute times depend on this machine):
* mark cost growth: a repository of N objects in one commit vs the same N objects plus C commits changing K files
  each, all retained (dry run; the staged objects have no data, so the mark reads only lakeFS metadata). Goal:
  <= 3x, because the cost follows distinct ranges, not commits.
* cleaning policies on the random-writes repository against its GC-rules-only mark.
* end to end (mark + sweep) on a repository of <= 10k objects with real data in the store and garbage to delete
  (goal < 5 s), and delete requests per deleted object (goal <= 1/1,000 + e).
Checks (a failure exits 1, nothing written): the dry runs plan nothing; keep_commits retains fewer commits than the
GC rules alone; the end-to-end run deletes exactly the garbage and every object the HEAD reaches stays.
Results: bench/results/gc-inprocess.md (and printed); ``--quick`` (small sizes, checks only) writes nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from common import ROOT, World, machine  # noqa: E402
from generate import HistoryShape, MetadataOnly, StoreObjects, generate, staged_base  # noqa: E402

from spark_jobs.core.cleaning import parse_cleaning_policies  # noqa: E402
from workers.gc.cleaning_store import clear_cleaning, set_cleaning  # noqa: E402

RESULTS = ROOT / "bench" / "results"
QUICK = {"objects": 300, "commits": 12, "changed": 5, "e2e_objects": 200}


def timed_mark(gc, repo) -> tuple[float, dict]:
    started = time.monotonic()
    marked = gc.mark(repo, dry_run=True)
    elapsed = time.monotonic() - started
    if marked.summary.num_deleted_objects:
        raise SystemExit(f"FAIL: a dry run over metadata-only objects planned {marked.summary.num_deleted_objects}")
    return elapsed, {"retained": marked.summary.retained_commits, "ranges": marked.summary.ranges,
                     "phases": dict(marked.summary.seconds)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--objects", type=int, default=20_000)
    ap.add_argument("--commits", type=int, default=200)
    ap.add_argument("--changed", type=int, default=10)
    ap.add_argument("--e2e-objects", type=int, default=10_000)
    ap.add_argument("--store", default="s3", choices=["local", "s3", "azure", "gcs"])
    ap.add_argument("--quick", action="store_true", help="small sizes, the checks only; writes nothing")
    args = ap.parse_args()
    if args.quick:
        for key, value in QUICK.items():
            setattr(args, key, value)
    world = World(args.store)
    out: dict = {"store": args.store, "machine": machine(("lakefs-sdk", "cramjam", "s3fs"))}
    try:
        lakefs = world.lakefs
        gc = world.collector("threads")
        end = datetime.now(UTC) - timedelta(hours=1)

        def made(name, shape, step=timedelta(hours=1)):
            ns = world.store.namespace(name)
            generate(lakefs, repository_id=name, storage_namespace=ns, writer=MetadataOnly(staged_base(world.store, ns)),
                     shape=shape, end=end, step=step)
            world.rules(name, 30)

        made("one-commit", HistoryShape(args.objects, 0))
        made("many-commits", HistoryShape(args.objects, args.commits, args.changed), timedelta(minutes=1))
        made("many-appends", HistoryShape(args.objects, args.commits, args.changed, "append"), timedelta(minutes=1))
        gc.mark("one-commit", dry_run=True)  # warm-up, untimed
        t_one, info_one = timed_mark(gc, "one-commit")
        t_many, info_many = timed_mark(gc, "many-commits")
        t_app, info_app = timed_mark(gc, "many-appends")
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
            t_policy, info_policy = timed_mark(gc, "many-commits")
            out["policies"][label] = {"seconds": round(t_policy, 2), "ratio": round(t_policy / t_many, 2),
                                      "retained": info_policy["retained"], "phases": info_policy["phases"]}
        clear_cleaning(lakefs, "many-commits")

        keep = out["policies"]["keep_commits 10 + keep_for 30m + savepoints (override_gc_rules)"]["retained"]
        if not keep < info_many["retained"]:
            raise SystemExit(f"FAIL: keep_commits 10 retained {keep} commits, the GC rules alone {info_many['retained']}")

        ns = world.store.namespace("e2e")
        generate(lakefs, repository_id="e2e", storage_namespace=ns, writer=StoreObjects(world.store, ns),
                 shape=HistoryShape(args.e2e_objects, 20, max(1, args.e2e_objects // 100)), end=end,
                 step=timedelta(days=1))
        world.rules("e2e", 3)
        before, live = world.data_keys(ns), world.live_keys("e2e", ns)
        started = time.monotonic()
        summary, marked = gc.run("e2e", min_age=timedelta(0))
        seconds = time.monotonic() - started
        after = world.data_keys(ns)
        # the commits inside the 3-day window keep some older versions: the garbage is a subset of the dead
        if not live <= after or summary.swept != len(before - after) or not summary.swept:
            raise SystemExit(f"FAIL: end to end deleted {len(before - after)} objects ({summary.swept} recorded), "
                             f"{len((before - after) & live)} of them live")
        out["end_to_end"] = {"objects": args.e2e_objects, "deleted": summary.swept, "seconds": round(seconds, 2),
                             "delete_requests": summary.delete_requests,
                             "requests_per_deleted_object": round(summary.delete_requests / max(summary.swept, 1), 5),
                             "phases": marked.summary.seconds | {"sweep": summary.seconds.get("sweep")}}
    finally:
        world.close()
    print(f"inprocess_bench: all checks hold ({args.store})")
    if args.quick:
        print(json.dumps({k: v for k, v in out.items() if k != "machine"}, indent=1))
        return 0
    RESULTS.mkdir(exist_ok=True)
    text = json.dumps(out, indent=2)
    (RESULTS / "gc-inprocess.json").write_text(text + "\n")
    g, e = out["mark_growth"], out["end_to_end"]
    md = [f"# GC, the one engine on the thread runner, {world.store.kind} ({datetime.now(UTC):%Y-%m-%d})", "",
          f"* mark growth: {g['objects']:,} objects, 1 commit: {g['one_commit_s']} s; plus {g['commits']} commits × "
          f"{g['changed']} changed files at random paths: {g['many_commits_s']} s, **ratio {g['ratio']}**; the same "
          f"commits appending new paths (time-partitioned data): {g['append_s']} s, **ratio {g['append_ratio']}** "
          "(goal ≤ 3)",
          f"* end to end on {e['objects']:,} objects with data (20 commits × 1 % changed, 3-day retention): "
          f"**{e['seconds']} s** (goal < 5 s), {e['deleted']:,} deleted with {e['delete_requests']} delete "
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
