"""Object lifecycle (issue 29): expiring many committed objects on one branch, on a real lakeFS — the run's time
split by phase, lakeFS requests per 1,000 expired objects by endpoint (listing pages apart), peak memory, and a
check that the branch holds exactly the objects that were not due.

    .venv/bin/python bench/object_lifecycle/bench.py --objects 100000      # ≈ 1 min on 2 cores
    .venv/bin/python bench/object_lifecycle/bench.py --objects 1000000     # ≈ 5 min (most of it writing the files)
    .venv/bin/python bench/object_lifecycle/bench.py --quick               # 2,000 objects, checks only, writes nothing
    # options: --expire-fraction 0.5 --out PATH.json (default bench/results/object-lifecycle-bench-<size>.json, and
    #          its .md) --no-write

What users run: objects with files behind them. lakeFS runs on its local blockstore with an import folder; the
bench writes N small files there (raw/<date>/part-*.parquet and results/<job>/<date>/part-*.parquet, half each),
dates each file's mtime with os.utime (a fraction --expire-fraction older than the rules' 30 days, the rest
younger) and imports the folder into `main` as one commit. lakeFS takes an imported object's mtime from its file:
the bench checks that on a sample before measuring (and stops if it does not hold).

The measured run is one real `run_repository` (not a dry run) in a fresh child process, so its peak RSS
(ru_maxrss) is the run's own plus the interpreter and imports, which are measured before the run starts. Every
HTTP request its lakeFS client sends goes through the client's urllib3 pool manager, wrapped to count it by
endpoint and time it (body read included): instrumentation, lakeFS is real. The run's phases are read from that
timeline: a phase lasts from its first request to the first request of the next phase, so the client's own work
(parsing the listing, evaluating the rules) counts in the phase it follows.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "bench" / "results"
REPO = "bench-object-lifecycle"
MAX_AGE_DAYS = 30
RULES = {"rules": [
    {"id": "raw-30d", "branches": ["main"], "paths": ["raw/**"], "max_age": f"{MAX_AGE_DAYS}d"},
    {"id": "results-30d", "branches": ["main"], "paths": ["results/**/*.parquet"], "max_age": f"{MAX_AGE_DAYS}d"},
]}
GOAL_PER_1000 = 2  # requests per 1,000 expired objects, the listing pages apart (issue 29)

# (kind, method, path pattern): first match wins; the lakeFS API paths the janitor's run uses.
KINDS = [
    ("list objects", "GET", r"/repositories/[^/]+/refs/[^/]+/objects/ls$"),
    ("delete objects (batch)", "POST", r"/repositories/[^/]+/branches/[^/]+/objects/delete$"),
    ("diff refs (read-back)", "GET", r"/repositories/[^/]+/refs/[^/]+/diff/[^/]+$"),
    ("diff branch (staged check)", "GET", r"/repositories/[^/]+/branches/[^/]+/diff$"),
    ("commit", "POST", r"/repositories/[^/]+/branches/[^/]+/commits$"),
    ("get commit", "GET", r"/repositories/[^/]+/commits/[^/]+$"),
    ("merge", "POST", r"/repositories/[^/]+/refs/[^/]+/merge/[^/]+$"),
    ("create branch", "POST", r"/repositories/[^/]+/branches$"),
    ("list branches", "GET", r"/repositories/[^/]+/branches$"),
    ("delete branch", "DELETE", r"/repositories/[^/]+/branches/[^/]+$"),
    ("get branch", "GET", r"/repositories/[^/]+/branches/[^/]+$"),
    ("branch protection rules", "GET", r"/repositories/[^/]+/settings/branch_protection$"),
    ("get repository", "GET", r"/repositories/[^/]+$"),
    ("repository metadata (rules)", "GET", r"/repositories/[^/]+/metadata$"),
]
# The phase a request belongs to (kinds not named: "bookkeeping").
PHASES = {"list objects": "list + evaluate", "delete objects (batch)": "delete (batches)", "commit": "commit",
          "merge": "merge", "diff refs (read-back)": "read-back diff", "create branch": "create short-lived branch",
          "delete branch": "delete short-lived branch"}
BOOKKEEPING = "bookkeeping (repository, rules, branches, protection, staged check, get commit, Redis)"


def kind_of(method: str, url: str) -> str:
    path = url.split("?", 1)[0]
    path = path[path.find("/api/v1") + len("/api/v1"):] if "/api/v1" in path else path
    for kind, m, pattern in KINDS:
        if method.upper() == m and re.search(pattern, path):
            return kind
    return f"other {method.upper()} {re.sub(r'/repositories/[^/]+', '/repositories/{repo}', path)}"


# --- the objects ---------------------------------------------------------------------------------------------


def is_old(i: int, fraction: float) -> bool:
    """Spread the expired objects evenly over both prefixes and every folder (a multiplicative hash of i)."""
    return (i * 2654435761 % 2**32) / 2**32 < fraction


def layout(i: int, fraction: float, now: float) -> tuple[str, float, int]:
    """(path, mtime, size) of object i: dated folders whose date is the file's own."""
    old = is_old(i, fraction)
    age_days = (MAX_AGE_DAYS + 2 + i % 300) if old else (i % (MAX_AGE_DAYS - 2))
    mtime = now - age_days * 86400 - (i % 24) * 3600
    day = datetime.fromtimestamp(mtime, UTC).strftime("%Y-%m-%d")
    path = f"raw/{day}/part-{i:07d}.parquet" if i % 2 == 0 else f"results/job-{i % 7}/{day}/part-{i:07d}.parquet"
    return path, mtime, 64 + i % 193


def write_files(source: Path, n: int, fraction: float, now: float) -> dict[str, tuple[int, bool]]:
    """The files in the import folder; returns path -> (size, due)."""
    made: set[Path] = set()
    expected: dict[str, tuple[int, bool]] = {}
    payload = os.urandom(256)
    for i in range(n):
        path, mtime, size = layout(i, fraction, now)
        f = source / path
        if f.parent not in made:
            f.parent.mkdir(parents=True, exist_ok=True)
            made.add(f.parent)
        fd = os.open(f, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, payload[:size])
        finally:
            os.close(fd)
        os.utime(f, (mtime, mtime))
        expected[path] = (size, mtime + MAX_AGE_DAYS * 86400 <= now)
    return expected


def import_files(lakefs, source: Path, n: int) -> None:
    import lakefs_sdk  # noqa: PLC0415

    started = lakefs.imports.import_start(REPO, "main", lakefs_sdk.ImportCreation(
        paths=[lakefs_sdk.ImportLocation(type="common_prefix", path=f"local://{source}/", destination="")],
        commit=lakefs_sdk.CommitCreation(message=f"import {n} objects")))
    while not (status := lakefs.imports.import_status(REPO, "main", started.id)).completed:
        if status.error:
            raise RuntimeError(f"import failed: {status.error}")
        time.sleep(0.5)
    if status.error:
        raise RuntimeError(f"import failed: {status.error}")


def check_mtimes(lakefs, source: Path, sample: int = 2000) -> dict:
    """lakeFS's mtime of the first ``sample`` objects of each prefix against their files' mtimes (whole seconds)."""
    checked = mismatched = 0
    for prefix in ("raw/", "results/"):
        for n, stat in enumerate(lakefs.paginate_json("list", lakefs.objects.list_objects_with_http_info, REPO,
                                                      "main", prefix=prefix)):
            if n >= sample:
                break
            checked += 1
            st = os.stat(source / stat["path"])
            if int(stat["mtime"]) != int(st.st_mtime) or stat["size_bytes"] != st.st_size:
                mismatched += 1
    return {"checked": checked, "mismatched": mismatched}


# --- the measured run (child process) ------------------------------------------------------------------------


CONCURRENT_PATH = "tables/written-during-the-run.txt"  # outside every rule: a writer's commit, not the janitor's


def child(endpoint: str, redis_url: str, concurrent_commit: bool) -> None:
    import redis  # noqa: PLC0415

    from tests.services import ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY  # noqa: PLC0415
    from workers.object_lifecycle.run import RunOptions, run_repository  # noqa: PLC0415
    from workers.object_lifecycle.store import ObjectLifecycleRecords  # noqa: PLC0415
    from workers.shared.lakefs.client import make_lakefs_for  # noqa: PLC0415

    lakefs = make_lakefs_for(endpoint, ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY, timeout=600)
    timeline: list[tuple[str, float, float]] = []  # (kind, start, end) relative to the run's start
    pool = lakefs.api.rest_client.pool_manager
    original = pool.request
    t0 = [0.0]

    def counting(method, url, *args, **kwargs):
        start = time.perf_counter()
        response = original(method, url, *args, **kwargs)
        _ = response.data  # the body too (a listing page is read here; urllib3 caches it for the SDK)
        timeline.append((kind_of(method, url), start - t0[0], time.perf_counter() - t0[0]))
        return response

    pool.request = counting
    client = redis.Redis.from_url(redis_url)
    redis_calls: list[tuple[str, float, float]] = []
    execute = client.execute_command

    def timed_redis(*args, **kwargs):
        start = time.perf_counter()
        try:
            return execute(*args, **kwargs)
        finally:
            redis_calls.append((str(args[0]), start - t0[0], time.perf_counter() - t0[0]))

    client.execute_command = timed_redis
    records = ObjectLifecycleRecords(client, "bench")
    # ru_maxrss would not do: exec keeps the parent's high-water mark (the bench's own, at fork). VmHWM is this
    # process's own mm; writing 5 to clear_refs resets it to the current RSS, so the peak below is the run's.
    rss_before = _status_kib("VmRSS")
    reset = _reset_hwm()
    cpu0 = time.process_time()
    t0[0] = time.perf_counter()
    between = None
    if concurrent_commit:  # another writer commits on main while the run works (its own client: not counted)
        import lakefs_sdk  # noqa: PLC0415

        writer = make_lakefs_for(endpoint, ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY, timeout=600)

        def between(step: str, branch_id: str) -> None:
            if step == "staged":  # after the re-check, before the merge: the branch moved, the run diffs what moved
                writer.upload(REPO, branch_id, CONCURRENT_PATH, data=b"a writer's commit during the run\n")
                writer.commits.commit(REPO, branch_id, lakefs_sdk.CommitCreation(message="a writer's commit"))
    report = run_repository(lakefs, records, REPO, now=datetime.now(UTC),
                            options=RunOptions(max_deletions=10**9, between=between))
    seconds = time.perf_counter() - t0[0]
    cpu = time.process_time() - cpu0
    print(json.dumps({"seconds": seconds, "cpu_seconds": cpu, "timeline": timeline, "redis": redis_calls,
                      "rss_before_kib": rss_before, "hwm_reset": reset, "peak_rss_kib": _status_kib("VmHWM"),
                      "rss_after_kib": _status_kib("VmRSS"), "report": report.document()}))


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise LookupError(field)


def _reset_hwm() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return _status_kib("VmHWM") <= _status_kib("VmRSS") + 1024


def phases(timeline: list[tuple[str, float, float]], total: float) -> dict[str, float]:
    """Seconds per phase: each run of consecutive requests of one phase lasts until the next phase's first request
    (the run's end for the last); what runs before the first request counts as bookkeeping."""
    out: dict[str, float] = defaultdict(float)
    segments: list[tuple[str, float]] = []
    for kind, start, _ in sorted(timeline, key=lambda r: r[1]):
        phase = PHASES.get(kind, BOOKKEEPING)
        if not segments or segments[-1][0] != phase:
            segments.append((phase, start))
    if segments:
        out[BOOKKEEPING] += segments[0][1]
    for (phase, start), nxt in zip(segments, [*segments[1:], ("end", total)], strict=True):
        out[phase] += nxt[1] - start
    return {k: round(v, 3) for k, v in out.items()}


# --- the benchmark -------------------------------------------------------------------------------------------


def delete_concurrency(lakefs, commit: str, paths: list[str], rounds: int, batches: int = 100) -> dict:
    """Not the janitor's code: the same batch deletions of the due paths (the first ``batches`` batches) on fresh
    branches of the evaluated commit, one request at a time (as run.py does) against 4 at a time, alternating;
    seconds per 1,000 paths. Whether lakeFS takes concurrent batches faster is what a change to run.py would buy."""
    import lakefs_sdk  # noqa: PLC0415

    chunks = [paths[i:i + 1000] for i in range(0, min(len(paths), batches * 1000), 1000)]
    seconds: dict[str, list[float]] = {"1 at a time": [], "4 at a time": []}
    for r in range(rounds):
        for workers in (1, 4) if r % 2 == 0 else (4, 1):
            branch = f"bench-ablation-{r}-{workers}"
            lakefs.branches.create_branch(REPO, lakefs_sdk.BranchCreation(name=branch, source=commit))

            def delete(chunk, branch=branch):
                lakefs.objects.delete_objects(REPO, branch, lakefs_sdk.PathList(paths=chunk))

            t = time.perf_counter()
            with ThreadPoolExecutor(workers) as pool:
                list(pool.map(delete, chunks))
            seconds[f"{workers} at a time"].append((time.perf_counter() - t) * 1000 / sum(map(len, chunks)))
            lakefs.branches.delete_branch(REPO, branch)
    medians = {k: round(sorted(v)[len(v) // 2], 4) for k, v in seconds.items()}
    return {"paths": sum(map(len, chunks)), "rounds": rounds, "seconds_per_1000_paths": seconds,
            "median_seconds_per_1000_paths": medians,
            "four_over_one": round(medians["4 at a time"] / medians["1 at a time"], 3)}


def run(n: int, fraction: float, rounds: int, concurrent_commit: bool = False) -> dict:
    import lakefs_sdk  # noqa: PLC0415

    from tests.services import ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY, LakeFSServer, RedisServer  # noqa: PLC0415
    from workers.object_lifecycle.expiry import TEMP_PREFIX  # noqa: PLC0415
    from workers.object_lifecycle.rules import parse_rules  # noqa: PLC0415
    from workers.object_lifecycle.store import set_rules  # noqa: PLC0415
    from workers.shared.lakefs.client import make_lakefs_for  # noqa: PLC0415

    server = LakeFSServer().start()
    redis_server = RedisServer().start()
    try:
        lakefs = make_lakefs_for(server.endpoint, ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY, timeout=600)
        lakefs.repositories.create_repository(lakefs_sdk.RepositoryCreation(
            name=REPO, storage_namespace=f"local://{REPO}", default_branch="main"))
        source = server.import_dir / REPO
        now = time.time()
        t = time.monotonic()
        expected = write_files(source, n, fraction, now)
        write_seconds = time.monotonic() - t
        t = time.monotonic()
        import_files(lakefs, source, n)
        import_seconds = time.monotonic() - t
        mtimes = check_mtimes(lakefs, source)
        if mtimes["mismatched"]:
            raise SystemExit(f"lakeFS did not keep the files' mtimes on import ({mtimes}): the ages would be wrong")
        set_rules(lakefs, REPO, parse_rules(RULES))
        due = sorted(p for p, (_, d) in expected.items() if d)
        kept = {p for p, (_, d) in expected.items() if not d} | ({CONCURRENT_PATH} if concurrent_commit else set())
        due_bytes = sum(expected[p][0] for p in due)

        import_commit = lakefs.branches.get_branch(REPO, "main").commit_id
        proc = subprocess.run([sys.executable, __file__, "--child", server.endpoint, redis_server.url,
                               "moved" if concurrent_commit else "still"],
                              capture_output=True, text=True, cwd=ROOT, check=False)
        if proc.returncode:
            raise SystemExit(f"the measured run failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
        result = json.loads(proc.stdout.strip().splitlines()[-1])

        # Checks: the branch holds exactly the objects that were not due; the report counts the due ones.
        left = {s["path"] for s in lakefs.paginate_json("list", lakefs.objects.list_objects_with_http_info, REPO,
                                                        "main")}
        branch = result["report"]["branches"][0]
        hidden = [b for b, _ in lakefs.branch_heads(REPO, show_hidden=True) if b.startswith(TEMP_PREFIX)]
        failures = []
        if left != kept:
            failures.append(f"main holds {len(left)} objects, expected the {len(kept)} not due: "
                            f"{len(left - kept)} extra (e.g. {sorted(left - kept)[:3]}), {len(kept - left)} missing "
                            f"(e.g. {sorted(kept - left)[:3]})")
        if (branch["result"], branch["due"], branch["objects"], branch["bytes"]) != ("expired", len(due), len(due),
                                                                                      due_bytes):
            failures.append(f"report: {branch['result']}, due {branch['due']}, expired {branch['objects']} objects "
                            f"{branch['bytes']} bytes; expected expired, {len(due)} objects, {due_bytes} bytes")
        if hidden:
            failures.append(f"short-lived branches left: {hidden}")
        if failures:
            raise SystemExit("CHECK FAILED:\n" + "\n".join(failures))

        ablation = delete_concurrency(lakefs, import_commit, due, rounds) if rounds else None
        timeline = result["timeline"]
        counts = Counter(k for k, _, _ in timeline)
        http = defaultdict(float)
        for k, s, e in timeline:
            http[k] += e - s
        listing = counts.get("list objects", 0)
        others = {k: v for k, v in counts.items() if k != "list objects"}
        # Both prefixes are selected, each listed on its own: the fewest pages is each prefix's objects / 1,000.
        minimum_pages = sum(math.ceil(c / 1000) for c in Counter(p.split("/")[0] for p in expected).values())
        per_branch = {k: v for k, v in others.items() if k not in ("delete objects (batch)", "diff refs (read-back)")}
        seconds = result["seconds"]
        return {
            "objects": n, "expired": len(due), "concurrent_commit": concurrent_commit, "expired_bytes": due_bytes, "expire_fraction": fraction,
            "rules": RULES["rules"],
            "setup_seconds": {"write_files": round(write_seconds, 1), "import": round(import_seconds, 1)},
            "mtime_check": mtimes,
            "run_seconds": round(seconds, 3), "run_cpu_seconds": round(result["cpu_seconds"], 3),
            "expired_per_second": round(len(due) / seconds),
            "phases_seconds": phases(timeline, seconds),
            "http_seconds_by_kind": {k: round(v, 3) for k, v in sorted(http.items())},
            "http_ms_median_p90_max": {k: _spread([e - s for kk, s, e in timeline if kk == k]) for k in sorted(http)},
            "redis": {"commands": dict(Counter(c for c, _, _ in result["redis"])),
                      "seconds": round(sum(e - s for _, s, e in result["redis"]), 3)},
            # every request but the listing pages and batches, and the Redis commands: where the gaps are
            "timeline_excerpt": [(k, round(s, 3), round(e, 3)) for k, s, e in sorted(
                [*timeline, *(("redis " + c, s, e) for c, s, e in result["redis"])], key=lambda r: r[1])
                if k not in ("list objects", "delete objects (batch)")],
            "requests_by_kind": dict(sorted(counts.items())),
            "listing_pages": listing,
            "listing_pages_minimum": minimum_pages,
            "requests_per_branch_constant": sum(per_branch.values()),
            "requests_excluding_listing": sum(others.values()),
            "requests_per_1000_expired_excluding_listing": round(sum(others.values()) * 1000 / len(due), 3),
            "requests_per_1000_expired_by_kind": {k: round(v * 1000 / len(due), 3) for k, v in sorted(others.items())},
            "goal_requests_per_1000_expired": GOAL_PER_1000,
            "goal_met": sum(others.values()) * 1000 / len(due) <= GOAL_PER_1000,
            "memory": {"how": "VmHWM of the child process that ran run_repository (a fresh interpreter), reset to "
                              "its RSS just before the run (/proc/self/clear_refs 5)" if result["hwm_reset"] else
                              "VmHWM of the child process (not reset: it includes the interpreter's start)",
                       "before_run_mib": round(result["rss_before_kib"] / 1024, 1),
                       "after_run_mib": round(result["rss_after_kib"] / 1024, 1),
                       "peak_mib": round(result["peak_rss_kib"] / 1024, 1),
                       "run_growth_mib": round((result["peak_rss_kib"] - result["rss_before_kib"]) / 1024, 1),
                       "growth_bytes_per_expired": round((result["peak_rss_kib"] - result["rss_before_kib"]) * 1024
                                                         / len(due))},
            "delete_concurrency_ablation": ablation,
            "checked": "main holds exactly the objects not due (listed and compared); the report's due, objects and "
                       "bytes equal the expected; no short-lived branch left",
            "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "git": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                  text=True, check=False).stdout.strip(),
            "machine": {"cpus": os.cpu_count(), "load_1m_at_end": round(os.getloadavg()[0], 2)},
        }
    finally:
        redis_server.cleanup()
        server.cleanup()


def _spread(seconds: list[float]) -> list[float]:
    ms = sorted(x * 1000 for x in seconds)
    return [round(ms[len(ms) // 2], 1), round(ms[int(len(ms) * 0.9)], 1), round(ms[-1], 1)]


def markdown(r: dict) -> str:
    lines = [f"# Object lifecycle: expiring {r['expired']:,} of {r['objects']:,} objects on one branch",
             "",
             f"{r['measured_at']}, git {r['git']}, {r['machine']['cpus']} CPUs (load {r['machine']['load_1m_at_end']}"
             " at the end), real lakeFS on its local blockstore, imported files with their mtimes; command: "
             f"`.venv/bin/python bench/object_lifecycle/bench.py --objects {r['objects']} --expire-fraction "
             f"{r['expire_fraction']}{' --concurrent-commit' if r.get('concurrent_commit') else ''}`"
             + (" (another writer commits on the branch after the run's re-check: the branch moved, so the run "
                "reads what moved meanwhile)" if r.get("concurrent_commit") else ""),
             "",
             f"* run: **{r['run_seconds']} s** ({r['expired_per_second']:,} expired objects/s; the janitor's own CPU "
             f"{r['run_cpu_seconds']} s); setup (not measured): writing the files {r['setup_seconds']['write_files']}"
             f" s, lakeFS import {r['setup_seconds']['import']} s",
             f"* requests per 1,000 expired objects, listing apart: **{r['requests_per_1000_expired_excluding_listing']}"
             f"** (goal ≤ {r['goal_requests_per_1000_expired']}: {'met' if r['goal_met'] else 'NOT met'}); listing "
             f"pages {r['listing_pages']} (the minimum for {r['objects']:,} listed objects: "
             f"{r['listing_pages_minimum']}); of the others, {r['requests_per_branch_constant']} are a constant per "
             "branch (repository, rules, branches, protection, staged check, create, commit, merge, delete)",
             f"* memory (VmHWM of the run's process, reset just before the run): {r['memory']['before_run_mib']} MiB "
             "before the run, "
             f"{r['memory']['peak_mib']} MiB peak: +{r['memory']['run_growth_mib']} MiB, "
             f"{r['memory']['growth_bytes_per_expired']} bytes per expired object",
             "",
             "| phase | seconds | share |", "|---|---|---|"]
    for k, v in sorted(r["phases_seconds"].items(), key=lambda kv: -kv[1]):
        lines.append(f"| {k} | {v} | {v / r['run_seconds']:.0%} |")
    lines += ["", "| request | count | per 1,000 expired | HTTP seconds | ms median / p90 / max |",
              "|---|---|---|---|---|"]
    for k, v in sorted(r["requests_by_kind"].items(), key=lambda kv: -kv[1]):
        per = r["requests_per_1000_expired_by_kind"].get(k, "(listing)")
        spread = " / ".join(str(x) for x in r["http_ms_median_p90_max"][k])
        lines.append(f"| {k} | {v} | {per} | {r['http_seconds_by_kind'].get(k)} | {spread} |")
    lines += ["", f"Redis: {sum(r['redis']['commands'].values())} commands, {r['redis']['seconds']} s."]
    if a := r.get("delete_concurrency_ablation"):
        m = a["median_seconds_per_1000_paths"]
        lines += ["", f"Batch deletes one at a time (as run.py sends them) against 4 at a time, the same "
                  f"{a['paths']:,} due paths on fresh branches of the evaluated commit, {a['rounds']} alternating "
                  f"rounds (medians): {m['1 at a time']} s and {m['4 at a time']} s per 1,000 paths; 4 / 1 = "
                  f"**{a['four_over_one']}**."]
    lines += ["", f"Checked: {r['checked']}.", ""]
    return "\n".join(lines)


def main() -> int:
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], sys.argv[4] == "moved")
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=100_000)
    parser.add_argument("--expire-fraction", type=float, default=0.5)
    parser.add_argument("--quick", action="store_true", help="2,000 objects, the checks; writes nothing")
    parser.add_argument("--out", type=Path, default=None, help="results JSON (its .md beside it)")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--concurrent-commit", action="store_true",
                        help="another writer commits an object outside the rules on the branch after the run's "
                             "re-check (RunOptions.between, step 'staged'): the branch moved, the run diffs what moved")
    parser.add_argument("--ablation-rounds", type=int, default=4,
                        help="rounds of the batch-delete concurrency comparison after the run (0: none; quick: 0)")
    args = parser.parse_args()
    if not 0 < args.expire_fraction < 1:
        parser.error("--expire-fraction must be between 0 and 1")
    from tests.services import stop_on_sigterm  # noqa: PLC0415

    stop_on_sigterm()
    n = 2000 if args.quick else args.objects
    result = run(n, args.expire_fraction, 0 if args.quick else args.ablation_rounds, args.concurrent_commit)
    print(json.dumps(result, indent=2))
    if args.quick or args.no_write:
        return 0
    size = f"{n // 1_000_000}m" if n % 1_000_000 == 0 else f"{n // 1000}k" if n % 1000 == 0 else str(n)
    out = args.out or RESULTS / f"object-lifecycle-bench-{size}{'-moved' if args.concurrent_commit else ''}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    out.with_suffix(".md").write_text(markdown(result))
    print(f"wrote {out} and {out.with_suffix('.md')}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
