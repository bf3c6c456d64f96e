"""bench/lifecycle: branch lifecycle evaluation (what `branch-lifecycle preview` does) against bare branch listing.

    .venv/bin/python bench/lifecycle.py [--max-branches 10000 --repos 10 --rounds 7 --profile --output PATH]
    .venv/bin/python bench/lifecycle.py --quick    (the smoke test `make test` runs: 60 branches in 2 repositories,
                                                    one round, every check, nothing written)
    make bench-lifecycle

What runs, all on 127.0.0.1, everything stopped at the end:

* one redis-server and one real lakeFS (tests/services.py: RedisServer, LakeFSServer, local KV and blockstore);
* ``--repos`` repositories, each with three stored policies (``feature-*``, ``tmp-*``, ``ci-*``; the same
  ``workers.branch_lifecycle.store.set_policies`` the policy API uses) and branches created from ``main`` with
  ``lakefs.branches.create_branch`` by a pool of 4 threads. Names mix ``feature-``/``tmp-``/``ci-`` (matching a
  policy) with ``release-``/``user-``/``exp-`` (matching none); 85 % get a creation time in the clock, 60 % of
  those also a last write, with times spread over the past 60 days, so evaluation takes every path (expired,
  thresholds not crossed, no matching policy, no creation time, default branch).

The branches are created incrementally; at each size (1,000, 2,500, 5,000, 10,000 total by default, capped by
``--max-branches``) two things are timed over all repositories, with the same ``LakeFS`` client and page size:

* preview: ``workers.branch_lifecycle.deletions.plan(lakefs, clock, repo, now)`` for every repository (get repository, read the
  stored policies, page through the branches, one Redis pipeline of HGETALLs, evaluate);
* bare list: ``list(lakefs.branch_heads(repo))`` for every repository, i.e. exactly the listing plan() does
  (``list_branches`` pages of amount=1000, JSON decoded without SDK models), and nothing else; this is the
  tracked baseline;
* SDK list (reference only): ``list(lakefs.paginate("list branches", lakefs.branches.list_branches, repo))``, the
  same pages decoded into lakefs_sdk ``Ref`` models, which plan() used before it switched to ``branch_heads``.

After creating branches the bench waits until lakeFS is idle; after one untimed warm-up of each, ``--rounds``
rounds alternate the order (P B S, S B P, ...), each run starting after a ``gc.collect()``; the figures are medians.
Besides wall time, each run records the CPU time of this process, of lakeFS and of redis-server.
The tracked figure is preview/bare (goal <= 1.2). A per-step breakdown of plan() (same steps, timed one by one) is
recorded at every size; with ``--profile`` (or automatically when the ratio at the largest size is above the goal)
plan() over all repositories is run under cProfile and the top functions go to bench/results/lifecycle-profile.txt.

Checks (any failure exits 1 and does not overwrite the results): every plan() returns one decision per listed
branch, both listings see exactly the branches created plus ``main``, and the decisions cover each reason.
The clock times the bench records are relative to the run's start, so the decisions do not depend on the date.

Writes bench/results/lifecycle.json (every round, medians, breakdown, machine info) and bench/results/lifecycle.md
(``--output`` puts them elsewhere, e.g. for a quick run that should not replace the recorded figures).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import os
import pstats
import random
import statistics
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Self

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import lakefs_sdk
import redis

from bench import machine
from tests.services import ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY, LakeFSServer, RedisServer
from workers.branch_lifecycle.deletions import plan
from workers.branch_lifecycle.evaluation import BranchState, evaluate
from workers.branch_lifecycle.policies import parse_policies
from workers.branch_lifecycle.store import get_policies, set_policies
from workers.idle_clock.store import ClockStore
from workers.shared.lakefs.client import LakeFS, make_lakefs_for

RESULTS = ROOT / "bench" / "results"
GOAL = 1.2
QUICK = {"max_branches": 60, "repos": 2, "rounds": 1, "no_write": True}
DEFAULT_SIZES = (1_000, 2_500, 5_000, 10_000)
CREATE_THREADS = 4
PAGE_SIZE = 1000  # LakeFS.paginate's default, used by plan() and by the bare listing alike
PACKAGES = ("lakefs-sdk", "redis", "hiredis", "pydantic", "urllib3", "wcmatch")
POLICIES = {"policies": [
    {"id": "feature", "patterns": ["feature-*"], "max_age": "30d", "max_idle_age": "7d"},
    {"id": "tmp", "patterns": ["tmp-*"], "max_age": "1d"},
    {"id": "ci", "patterns": ["ci-*"], "max_idle_age": "2d"},
]}
# Out of 20 branches: 9 feature-, 3 tmp-, 3 ci- (a policy matches), 2 release-, 2 user-, 1 exp- (none does).
PREFIXES = ["feature"] * 9 + ["tmp"] * 3 + ["ci"] * 3 + ["release"] * 2 + ["user"] * 2 + ["exp"]
USERS = ["ana", "bo", "chen", "dara", "eli", "fay", "gus", "hana"]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def branch_name(i: int) -> str:
    prefix = PREFIXES[i % len(PREFIXES)]
    if prefix in ("feature", "user"):
        return f"{prefix}-{USERS[i % len(USERS)]}-{i:05d}"
    return f"{prefix}-{i:05d}"


# --- setup -------------------------------------------------------------------------------------------------


def create_repositories(lakefs: LakeFS, count: int) -> list[str]:
    policies = parse_policies(POLICIES, "main")
    repos = []
    for r in range(count):
        name = f"bench-lc-{r:02d}"
        lakefs.call("create repository", lakefs.repositories.create_repository,
                    lakefs_sdk.RepositoryCreation(name=name, storage_namespace=f"local://{name}",
                                                  default_branch="main"))
        set_policies(lakefs, name, policies)
        repos.append(name)
    return repos


def grow(lakefs: LakeFS, clock: ClockStore, repos: list[str], start: int, stop: int, now: datetime,
         rng: random.Random) -> float:
    """Create global branch numbers [start, stop), spread round-robin over the repositories; returns seconds."""
    jobs = [(repos[i % len(repos)], branch_name(i)) for i in range(start, stop)]

    def create(job: tuple[str, str]) -> None:
        repo, name = job
        lakefs.call(f"create branch {name}", lakefs.branches.create_branch, repo,
                    lakefs_sdk.BranchCreation(name=name, source="main"))

    t0 = time.perf_counter()
    with ThreadPoolExecutor(CREATE_THREADS) as pool:
        for n, _ in enumerate(pool.map(create, jobs), 1):
            if n % 1000 == 0:
                log(f"  created {start + n} branches")
    for repo, name in jobs:
        roll = rng.random()
        if roll < 0.15:
            continue  # untracked: no creation time (reason no-creation-time)
        created = now - timedelta(seconds=rng.uniform(0, 60 * 86_400))
        clock.record_created(repo, name, created)
        if rng.random() < 0.6:
            clock.record_write(repo, name, created + (now - created) * rng.random())
    return time.perf_counter() - t0


# --- measurements ------------------------------------------------------------------------------------------


def proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Meter:
    """Wall time, this process's CPU time, and the CPU time lakeFS and redis-server used, around one run."""

    def __init__(self, lakefs_pid: int, redis_pid: int) -> None:
        self.pids = {"lakefs": lakefs_pid, "redis": redis_pid}

    def __enter__(self) -> Self:
        gc.collect()  # every run starts from the same heap; collections during the run still count
        self._servers = {k: proc_cpu(p) for k, p in self.pids.items()}
        self._cpu = time.process_time()
        self._wall = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self._wall
        self.cpu = {"client": time.process_time() - self._cpu,
                    **{k: proc_cpu(p) - self._servers[k] for k, p in self.pids.items()}}


def settle(lakefs_pid: int, timeout: float = 30.0) -> float:
    """Wait until lakeFS is idle (background KV work after the writes) so that it does not skew the timings."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        before = proc_cpu(lakefs_pid)
        time.sleep(0.5)
        if proc_cpu(lakefs_pid) - before < 0.02:
            break
    return time.monotonic() - t0


def run_preview(lakefs: LakeFS, clock: ClockStore, repos: list[str], meter: Meter) -> tuple[Counter, int]:
    reasons: Counter = Counter()
    decisions = 0
    with meter:
        plans = [plan(lakefs, clock, repo, now=datetime.now(UTC)) for repo in repos]
    for p in plans:
        if len(p.decisions) != len(p.states):
            raise RuntimeError(f"{p.repository_id}: {len(p.decisions)} decisions for {len(p.states)} branches")
        decisions += len(p.decisions)
        reasons.update(d.reason for d in p.decisions)
    return reasons, decisions


def run_bare(lakefs: LakeFS, repos: list[str], meter: Meter) -> int:
    with meter:
        listed = [list(lakefs.branch_heads(repo)) for repo in repos]
    return sum(len(x) for x in listed)


def run_sdk(lakefs: LakeFS, repos: list[str], meter: Meter) -> int:
    with meter:
        listed = [list(lakefs.paginate("list branches", lakefs.branches.list_branches, repo, amount=PAGE_SIZE))
                  for repo in repos]
    return sum(len(x) for x in listed)


def run_breakdown(lakefs: LakeFS, clock: ClockStore, repos: list[str]) -> dict[str, float]:
    """plan()'s steps for every repository, each timed on its own (summed over repositories), in seconds."""
    steps: Counter = Counter()

    def timed(step: str, fn, *args, **kwargs):
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        steps[step] += time.perf_counter() - t0
        return out

    gc.collect()
    for repo in repos:
        now = datetime.now(UTC)
        before = sum(steps.values())
        meta = timed("get_repository (HTTP)", lakefs.call, "get repository", lakefs.repositories.get_repository,
                     repo)
        policies = timed("get_policies (HTTP + parse)", get_policies, lakefs, repo).policies
        heads = timed("branch_heads (HTTP + JSON)", lambda r: dict(lakefs.branch_heads(r)), repo)
        clocks = timed("clock.activity_many (one HMGET + parse)", clock.activity_many, repo, heads)
        states = timed("BranchState construction", lambda h, c: {
            b: BranchState(b, head, c[b].created_at, c[b].last_write_at) for b, head in h.items()}, heads, clocks)
        timed("evaluate (pure)", evaluate, states.values(), meta.default_branch, policies, now=now)
        # plan() then looks again at each branch found due, as the reconciler would (lakeFS calls per due branch):
        # what a whole plan(), timed right after, costs beyond the steps above.
        own = sum(steps.values()) - before
        t0 = time.perf_counter()
        plan(lakefs, clock, repo, now=now)
        steps["rest of plan() (a look at each due branch)"] += max(time.perf_counter() - t0 - own, 0.0)
    return dict(steps)


def profile_preview(lakefs: LakeFS, clock: ClockStore, repos: list[str], path: Path) -> list[dict[str, Any]]:
    prof = cProfile.Profile()
    prof.enable()
    for repo in repos:
        plan(lakefs, clock, repo, now=datetime.now(UTC))
    prof.disable()
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("cumulative").print_stats(40)
    stats.sort_stats("tottime").print_stats(30)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(out.getvalue())
    top = []
    for (file, line, func), (_cc, nc, tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        top.append({"function": f"{Path(file).name}:{line}({func})", "calls": nc, "tottime_s": round(tt, 4),
                    "cumtime_s": round(ct, 4)})
    return sorted(top, key=lambda x: -x["tottime_s"])[:25]


def measure_size(lakefs: LakeFS, clock: ClockStore, repos: list[str], total: int, rounds: int,
                 meter: Meter) -> dict[str, Any]:
    expected = total + len(repos)  # + main in each repository
    # Warm-up: connections, lakeFS caches, Python code paths.
    run_preview(lakefs, clock, repos, meter)
    run_bare(lakefs, repos, meter)
    run_sdk(lakefs, repos, meter)
    previews, bares, sdks, per_round = [], [], [], []
    cpu: dict[str, list[dict[str, float]]] = {"preview": [], "bare": [], "sdk": []}
    reasons: Counter = Counter()
    for r in range(rounds):
        order = ("preview", "bare", "sdk") if r % 2 == 0 else ("sdk", "bare", "preview")
        row: dict[str, Any] = {"order": list(order)}
        for kind in order:
            if kind == "preview":
                reasons, decided = run_preview(lakefs, clock, repos, meter)
                if decided != expected:
                    raise RuntimeError(f"preview decided {decided} branches, expected {expected}")
                previews.append(meter.wall)
                row["preview_s"] = round(meter.wall, 4)
            elif kind == "bare":
                listed = run_bare(lakefs, repos, meter)
                if listed != expected:
                    raise RuntimeError(f"bare listing saw {listed} branches, expected {expected}")
                bares.append(meter.wall)
                row["bare_list_s"] = round(meter.wall, 4)
            else:
                listed = run_sdk(lakefs, repos, meter)
                if listed != expected:
                    raise RuntimeError(f"SDK listing saw {listed} branches, expected {expected}")
                sdks.append(meter.wall)
                row["sdk_list_s"] = round(meter.wall, 4)
            cpu[kind].append(meter.cpu)
            row[f"{kind}_cpu_s"] = {k: round(v, 3) for k, v in meter.cpu.items()}
        row["ratio"] = round(row["preview_s"] / row["bare_list_s"], 3)
        per_round.append(row)
        log(f"  round {r + 1}: preview {row['preview_s'] * 1000:.0f} ms, bare list {row['bare_list_s'] * 1000:.0f} "
            f"ms (SDK list {row['sdk_list_s'] * 1000:.0f} ms), ratio {row['ratio']:.2f}")
    breakdowns = [run_breakdown(lakefs, clock, repos) for _ in range(rounds)]
    breakdown = {k: round(statistics.median(b[k] for b in breakdowns) * 1000, 2) for k in breakdowns[0]}
    preview, bare, sdk = statistics.median(previews), statistics.median(bares), statistics.median(sdks)
    return {
        "branches": total,
        "branches_listed": expected,
        "pages_per_repository": -(-(expected // len(repos)) // PAGE_SIZE),
        "preview_s": round(preview, 4),
        "bare_list_s": round(bare, 4),
        "sdk_list_s": round(sdk, 4),
        "ratio": round(preview / bare, 3),
        "ratio_vs_sdk_list": round(preview / sdk, 3),
        "median_of_round_ratios": round(statistics.median(r["ratio"] for r in per_round), 3),
        "preview_us_per_branch": round(preview / expected * 1e6, 1),
        "bare_list_us_per_branch": round(bare / expected * 1e6, 1),
        "extra_ms": round((preview - bare) * 1000, 1),
        "cpu_ms": {kind: {k: round(statistics.median(c[k] for c in runs) * 1000, 1) for k in runs[0]}
                   for kind, runs in cpu.items()},
        "rounds": per_round,
        "breakdown_ms": breakdown,
        "reasons": dict(sorted(reasons.items())),
    }


# --- reporting ---------------------------------------------------------------------------------------------


def machine_info(lakefs_version: str) -> dict[str, Any]:
    return machine.machine_info(PACKAGES, lakefs=lakefs_version)


def markdown(result: dict[str, Any]) -> str:
    m, cfg = result["machine"], result["config"]
    lines = [
        f"# bench/lifecycle — {result['date']}",
        "",
        (f"`{cfg['command']}` — {cfg['repositories']} repositories, {cfg['rounds']} alternating rounds per size "
         f"(medians), page size {PAGE_SIZE}; lakeFS {m['lakefs']}, Python {m['python']}, {m['nproc']} CPUs "
         f"({m['cpu_model']})."),
        "",
        ("| branches | preview (plan) ms | bare list ms | **preview / bare** | extra ms | preview µs/branch |"
         " list µs/branch | SDK-model list ms | preview / SDK list |"),
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in result["sizes"]:
        lines.append(f"| {s['branches']:,} | {s['preview_s'] * 1000:.0f} | {s['bare_list_s'] * 1000:.0f} | "
                     f"**{s['ratio']:.2f}** | {s['extra_ms']:.0f} | {s['preview_us_per_branch']:.0f} | "
                     f"{s['bare_list_us_per_branch']:.0f} | {s['sdk_list_s'] * 1000:.0f} | "
                     f"{s['ratio_vs_sdk_list']:.2f} |")
    lines += ["", "CPU time per run (ms, median of rounds): this Python process, lakeFS, redis-server:", "",
              "| branches | client preview | client bare | lakeFS preview | lakeFS bare | redis preview |",
              "|---:|---:|---:|---:|---:|---:|"]
    for s in result["sizes"]:
        c = s["cpu_ms"]
        lines.append(f"| {s['branches']:,} | {c['preview']['client']:.0f} | {c['bare']['client']:.0f} | "
                     f"{c['preview']['lakefs']:.0f} | {c['bare']['lakefs']:.0f} | {c['preview']['redis']:.0f} |")
    steps = list(result["sizes"][0]["breakdown_ms"])
    lines += ["", "plan() step by step (ms, summed over repositories, median of rounds):", "",
              "| branches | " + " | ".join(steps) + " |", "|---:|" + "---:|" * len(steps)]
    for s in result["sizes"]:
        lines.append(f"| {s['branches']:,} | " + " | ".join(f"{s['breakdown_ms'][k]:.1f}" for k in steps) + " |")
    last = result["sizes"][-1]
    lines += ["", f"Decisions at {last['branches']:,} branches: "
              + ", ".join(f"{k} {v}" for k, v in last["reasons"].items()) + "."]
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="smoke test: 60 branches in 2 repositories, one round, every check, nothing written (what "
                         "`make test` runs); overrides --max-branches, --repos, --rounds")
    ap.add_argument("--max-branches", type=int, default=DEFAULT_SIZES[-1],
                    help="largest total branch count measured (sizes above it are dropped; it is measured too)")
    ap.add_argument("--repos", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--output", type=Path, default=RESULTS / "lifecycle.json",
                    help="results file; the .md (and -profile.txt) go next to it")
    ap.add_argument("--profile", action="store_true", help="cProfile plan() at the largest size in any case")
    ap.add_argument("--no-write", action="store_true", help="print only; write no results file")
    args = ap.parse_args(argv)
    if args.quick:
        for name, value in QUICK.items():
            setattr(args, name, value)
    if args.max_branches < args.repos or args.rounds < 1 or args.repos < 1:
        ap.error("need --repos >= 1, --rounds >= 1 and --max-branches >= --repos")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = sorted({s for s in DEFAULT_SIZES if s < args.max_branches} | {args.max_branches})
    command = ".venv/bin/python bench/lifecycle.py" + (" " + " ".join(argv if argv is not None else sys.argv[1:])
                                                        if (argv if argv is not None else sys.argv[1:]) else "")
    started = time.monotonic()
    rng = random.Random(args.seed)
    services: list[Any] = []
    try:
        log("starting redis-server and lakeFS")
        redis_server = RedisServer().start()
        services.append(redis_server)
        lakefs_server = LakeFSServer().start()
        services.append(lakefs_server)
        lakefs_version = Path(lakefs_server.proc.args[0]).name if lakefs_server.proc else "?"
        lakefs = make_lakefs_for(lakefs_server.endpoint, ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY)
        creator = make_lakefs_for(lakefs_server.endpoint, ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY)
        client = redis.Redis.from_url(redis_server.url)
        clock = ClockStore(client, "lakefs-janitor")
        meter = Meter(lakefs_server.proc.pid, redis_server.proc.pid)
        repos = create_repositories(lakefs, args.repos)
        log(f"{len(repos)} repositories with {len(POLICIES['policies'])} policies each; sizes {sizes}")
        results, created, setup_s = [], 0, 0.0
        for size in sizes:
            log(f"growing to {size:,} branches")
            setup_s += grow(creator, clock, repos, created, size, datetime.now(UTC), rng)
            created = size
            waited = settle(lakefs_server.proc.pid)
            log(f"measuring at {size:,} branches ({args.rounds} rounds; lakeFS idle after {waited:.1f} s)")
            r = measure_size(lakefs, clock, repos, size, args.rounds, meter)
            results.append(r)
            log(f"  {size:,}: preview {r['preview_s'] * 1000:.0f} ms, bare list {r['bare_list_s'] * 1000:.0f} ms, "
                f"ratio {r['ratio']:.2f}; CPU ms {r['cpu_ms']}; breakdown (ms) {r['breakdown_ms']}")
        missing = {"expired", "thresholds-not-crossed", "no-matching-policy", "no-creation-time",
                   "default-branch"} - set(results[-1]["reasons"])
        if missing:
            raise RuntimeError(f"evaluation never took these paths: {sorted(missing)}")
        profile = None
        if (args.profile or results[-1]["ratio"] > GOAL) and not args.no_write:
            log("profiling plan() at the largest size (cProfile)")
            profile = profile_preview(lakefs, clock, repos, args.output.with_name(args.output.stem + "-profile.txt"))
        machine = machine_info(lakefs_version)
        lakefs.close()
        creator.close()
        client.close()
    finally:
        for service in reversed(services):
            service.cleanup()
    result = {
        "benchmark": "bench/lifecycle",
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "goal": f"preview / bare list <= {GOAL}",
        "config": {"command": command, "repositories": args.repos, "rounds": args.rounds, "sizes": sizes,
                   "page_size": PAGE_SIZE, "create_threads": CREATE_THREADS, "seed": args.seed,
                   "policies": POLICIES["policies"], "name_prefixes_per_20": dict(Counter(PREFIXES))},
        "sizes": results,
        "ratio_at_largest": results[-1]["ratio"],
        "within_goal": results[-1]["ratio"] <= GOAL,
        "branch_setup_s": round(setup_s, 1),
        "total_runtime_s": round(time.monotonic() - started, 1),
        "profile_top_tottime": profile,
        "machine": machine,
    }
    print(markdown(result))
    if args.no_write:
        log(f"done in {result['total_runtime_s']} s (nothing written)")
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    args.output.with_suffix(".md").write_text(markdown(result))
    log(f"wrote {args.output} and {args.output.with_suffix('.md')} in {result['total_runtime_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
