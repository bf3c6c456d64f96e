"""The collector killed at any moment and run beside concurrent writers, on a real lakeFS, a real Redis and the
real CLI: nothing that must survive is lost, and every re-run converges. On lakeFS's local store, and on each cloud
store's real server (versitygw, Azurite, fake-gcs-server) behind a FaultProxy, on both runners: a share of every
request answered 429/503, stalled, dropped or its answer lost, the store gone at a random request, a run killed
(the CLI's thread runner), and writers beside the runs.

``LAKEFS_JANITOR_FAULT_SEED`` fixes the seed (default: random, printed on failure); ``LAKEFS_JANITOR_FAULT_KILLS``
(default 2 per kill point) and ``LAKEFS_JANITOR_FAULT_ROUNDS`` (default 14 GC runs beside the writers; on the cloud
stores a quarter of it) run more. Each test prints a ``RELIABILITY`` line: the figures of README's reliability table.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import lakefs_sdk
import pytest

from spark_jobs.engine.runtime.context import GCError
from tests.gc_engine import RUNNERS, Collector, runner_of
from tests.integration.conftest import commit
from tests.integration.gc.test_gc_stores import store_world
from tests.integration.gc.test_gc_threads import rules
from tests.services import ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY, FaultProxy, RedisServer, janitor_env, throttle_answer
from workers.gc.history import GCRuns
from workers.gc.run import Busy, GCRequest, execute
from workers.gc.store_options import storage_options
from workers.shared.lakefs.client import make_lakefs_for
from workers.shared.lakefs.errors import LakeFSError
from workers.shared.settings import GCSettings, LakeFSConnection

SEED = int(os.environ.get("LAKEFS_JANITOR_FAULT_SEED", str(random.randrange(1 << 30))))
KILLS = int(os.environ.get("LAKEFS_JANITOR_FAULT_KILLS", "2"))
ROUNDS = int(os.environ.get("LAKEFS_JANITOR_FAULT_ROUNDS", "14"))
DAY = 86400
CLI = [sys.executable, "-m", "workers.cli"]


def content(tag: str) -> bytes:
    return f"{tag} {uuid.uuid4().hex}".encode()


def read(lakefs, repo: str, ref: str, path: str) -> bytes | int:
    try:
        return lakefs.call("get", lakefs.objects.get_object, repo, ref, path)
    except LakeFSError as exc:
        return exc.status or 0


def relative(repo: str, address: str) -> str:
    """The key under the namespace's folder (lakeFS names local objects by their full path)."""
    return address.split(f"/{repo}/", 1)[1]


def data_keys(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and p.relative_to(root).parts[0] != "_lakefs"}


# ---------------------------------------------------------------------------------------------- killed runs


@dataclass
class Lake:
    repo: str
    must_survive: dict[tuple[str, str], bytes]  # (ref, path) -> bytes written
    garbage: set[str]  # keys an unbroken run deletes


def build(lakefs, repo: str, rng: random.Random, paths: int = 150) -> Lake:
    """Three versions of each path: v1 in a 30-day-old commit (garbage once main's HEAD 7 days ago is the
    20-day-old one), v2 there, v3 at HEAD; a few staged overwrites on top."""
    survive: dict[tuple[str, str], bytes] = {}
    v1: dict[str, bytes] = {}
    for i in range(paths):
        v1[f"t/p{i}"] = content("v1")
        lakefs.upload(repo, "main", f"t/p{i}", data=v1[f"t/p{i}"])
    first = commit(lakefs, repo, "main", "v1", date=int(time.time()) - 30 * DAY)
    garbage = {relative(repo, lakefs.call("stat", lakefs.objects.stat_object, repo, first.id, p).physical_address)
               for p in v1}
    for version, age in (("v2", 20), ("v3", 0)):
        written = {f"t/p{i}": content(version) for i in range(paths)}
        for path, data in written.items():
            lakefs.upload(repo, "main", path, data=data)
        made = commit(lakefs, repo, "main", version, date=int(time.time()) - age * DAY if age else None)
        survive.update({(made.id, p): d for p, d in written.items()})
    for i in rng.sample(range(paths), 10):
        data = content("staged")
        lakefs.upload(repo, "main", f"t/p{i}", data=data)
        survive[("main", f"t/p{i}")] = data
    rules(lakefs, repo, default=7)
    return Lake(repo, survive, garbage)


def lost(lakefs, lake: Lake) -> list[str]:
    return [f"{ref[:12]}:{path} -> {got!r:.40}" for (ref, path), data in lake.must_survive.items()
            if (got := read(lakefs, lake.repo, ref, path)) != data]


def wait_for(proc: subprocess.Popen, point: str, root: Path, rng: random.Random, initial: int) -> bool:
    """Block until the run reaches ``point``; False if it ended first."""
    started = time.monotonic()
    walk_until = started + rng.uniform(0.3, 2.5)
    plans = root / "_lakefs" / "retention" / "gc" / "unified"
    while proc.poll() is None:
        if point == "walk" and time.monotonic() >= walk_until:
            return True
        if point == "plan-write" and plans.exists() and any(plans.iterdir()):
            return True
        if point == "mid-sweep" and len(data_keys(root)) < initial:
            return True
        time.sleep(0.001 if point != "walk" else 0.01)
    return False


@pytest.mark.parametrize(("point", "listing"), [("walk", "full"), ("plan-write", "full"), ("mid-sweep", "full"),
                                                ("walk", "incremental"), ("mid-sweep", "incremental")])
def test_a_run_killed_at_any_moment_loses_nothing_and_the_next_run_converges(lakefs, lakefs_server, repo, env,
                                                                            redis_client, point, listing):
    rng = random.Random(f"{SEED}-{point}")
    root = lakefs_server.dir / "block" / repo
    lake = build(lakefs, repo, rng)
    runs = GCRuns(redis_client, "lakefs-janitor")
    if listing == "incremental":
        # a complete run while every commit is retained leaves its state; then v1 expires, and the runs killed
        # are incremental ones (each killed one leaves that state as it was)
        rules(lakefs, repo, default=100)
        first = subprocess.run([*CLI, "gc", "run", f"lakefs://{repo}", "--min-age", "0s", "--runner", "threads"],
                               env=env, capture_output=True, text=True, timeout=300)
        assert first.returncode == 0 and "listing: full" in first.stdout, first.stdout + first.stderr
        rules(lakefs, repo, default=7)
    killed = reached = 0
    for attempt in range(KILLS):
        initial = data_keys(root)
        proc = subprocess.Popen([*CLI, "gc", "run", f"lakefs://{repo}", "--min-age", "0s", "--runner", "threads",
                                 "--json"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        hit = wait_for(proc, point, root, rng, len(initial))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        killed += 1
        reached += hit
        assert lost(lakefs, lake) == [], f"seed {SEED}, killed at {point} (attempt {attempt})"
        gone = initial - data_keys(root)
        assert gone <= lake.garbage, f"seed {SEED}: deleted what is not garbage: {sorted(gone - lake.garbage)[:5]}"
        if not data_keys(root) & lake.garbage:  # the killed run got to the end: nothing left to kill a run over
            break
    # The next run, at once (the dead run's lease is taken over on this host), completes.
    result = subprocess.run([*CLI, "gc", "run", f"lakefs://{repo}", "--min-age", "0s", "--runner", "threads",
                             "--json"], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"seed {SEED}: re-run after a kill at {point}: {result.stdout}{result.stderr}"
    if listing == "incremental":  # (a full series' killed run may have completed, and left a state)
        assert json.loads(result.stdout)["listing"]["kind"] == "incremental", result.stdout
    assert lost(lakefs, lake) == []
    assert not (data_keys(root) & lake.garbage), f"seed {SEED}: the re-run left garbage"
    history = runs.history(repo)
    assert history[0]["success"] is True
    if any(e.get("reason") == "died" for e in history):
        assert "stopped renewing its lease" in next(e for e in history if e.get("reason") == "died")["error"]
    print(f"RELIABILITY killed-{point} ({listing} runs): runs {killed + 1}, kills {killed} (point reached {reached}), read back "
          f"{len(lake.must_survive)}, lost 0, failed re-runs 0")


def test_redis_going_away_mid_run_stops_it_clearly_and_the_next_run_converges(lakefs, lakefs_server, repo):
    own = RedisServer().start()
    try:
        env = janitor_env(lakefs_server, own.url)
        root = lakefs_server.dir / "block" / repo
        lake = build(lakefs, repo, random.Random(SEED), paths=60)
        proc = subprocess.Popen([*CLI, "gc", "run", f"lakefs://{repo}", "--min-age", "0s", "--runner", "threads"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        hit = wait_for(proc, "plan-write", root, random.Random(SEED), len(data_keys(root)))
        if hit:  # frozen as its plan is written, Redis taken away, resumed: the sweep's first check fails
            proc.send_signal(signal.SIGSTOP)
        own.stop()
        if hit:
            proc.send_signal(signal.SIGCONT)
        out, err = proc.communicate(timeout=120)
        if hit:
            assert proc.returncode == 1, (out, err)
        assert "Traceback" not in err and (proc.returncode == 0 or "Redis" in err), (out, err)
        if hit:
            assert "stopped before deleting more" in err, err
        assert lost(lakefs, lake) == [], f"seed {SEED}"
        own.start()
        again = subprocess.run([*CLI, "gc", "run", f"lakefs://{repo}", "--min-age", "0s", "--runner", "threads"],
                               env=env, capture_output=True, text=True, timeout=300)
        assert again.returncode == 0, again.stdout + again.stderr
        assert lost(lakefs, lake) == [] and not (data_keys(root) & lake.garbage)
        print(f"RELIABILITY redis-down: runs 2, faults 1 (Redis stopped at the plan write), read back "
              f"{len(lake.must_survive)}, lost 0, failed re-runs 0 (first run: exit {proc.returncode}, "
              f"{err.strip().splitlines()[-1] if err.strip() else 'no message'})")
    finally:
        own.cleanup()


def test_a_partly_written_plan_is_never_swept(lakefs, lakefs_server, repo, env, cli):
    lake = build(lakefs, repo, random.Random(SEED), paths=20)
    root = lakefs_server.dir / "block" / repo
    planned = json.loads(cli("gc", "plan", f"lakefs://{repo}", "--min-age", "0s", "--json").output)
    run_dir = root / "_lakefs" / "retention" / "gc" / "unified" / planned["run_id"]
    summary = run_dir / "summary.json"
    summary.write_bytes(summary.read_bytes()[: len(summary.read_bytes()) // 2])  # killed while writing it
    out = cli("gc", "run", f"lakefs://{repo}", "--plan", planned["run_id"], expect_exit=1).output
    assert "summary.json" in out and "Traceback" not in out
    summary.unlink()  # killed before writing it
    out = cli("gc", "run", f"lakefs://{repo}", "--plan", planned["run_id"], expect_exit=1).output
    assert "no GC plan" in out
    assert lost(lakefs, lake) == [] and lake.garbage <= data_keys(root)


# ---------------------------------------------------------------------------------------- concurrent writers


@dataclass
class Written:
    """Everything the writers did, as they saw it."""

    by_path: dict[str, set[bytes]] = field(default_factory=dict)  # every version ever written of a path
    head: dict[tuple[str, str], bytes] = field(default_factory=dict)  # (branch, path) -> staged bytes, pending
    commits: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Writer(threading.Thread):
    def __init__(self, endpoint: str, repo: str, rng: random.Random, written: Written, stop: threading.Event,
                 name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.lakefs = make_lakefs_for(endpoint, ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY)
        self.repo, self.rng, self.w, self.stop = repo, rng, written, stop
        self.branches = [f"{name}-b{i}" for i in range(3)]
        self.ops = 0
        self.errors: list[str] = []

    def call(self, what, fn, *args, **kw):
        return self.lakefs.call(what, fn, self.repo, *args, **kw)

    def run(self) -> None:
        for b in self.branches:
            self.call("branch", self.lakefs.branches.create_branch, lakefs_sdk.BranchCreation(name=b, source="main"))
        while not self.stop.is_set():
            b = self.rng.choice(self.branches)
            op = self.rng.choice(["upload", "upload", "upload", "commit", "commit", "merge", "revert", "reset",
                                  "recreate", "stage-then-commit"])
            try:
                getattr(self, f"op_{op.replace('-', '_')}")(b)
                self.ops += 1
            except LakeFSError as exc:
                if exc.status not in (400, 404, 409, 412):  # conflicts and nothing-to-commit are normal here
                    self.errors.append(f"{op} {b}: {exc}")
            time.sleep(self.rng.uniform(0, 0.05))

    def upload(self, b: str, path: str) -> None:
        data = content(f"{b}/{path}")
        with self.w.lock:
            self.w.by_path.setdefault(path, set()).add(data)
        self.lakefs.upload(self.repo, b, path, data=data)

    def op_upload(self, b):
        self.upload(b, f"d/{self.name}/f{self.rng.randint(0, 8)}")

    def _commit(self, b):
        c = self.call("commit", self.lakefs.commits.commit, b, lakefs_sdk.CommitCreation(message="w"))
        with self.w.lock:
            self.w.commits.add(c.id)

    def op_commit(self, b):
        self._commit(b)

    def op_stage_then_commit(self, b):
        self.upload(b, f"d/{self.name}/late{self.rng.randint(0, 3)}")
        time.sleep(self.rng.uniform(0.2, 2.5))  # across a GC's mark, often
        self._commit(b)

    def op_merge(self, b):
        other = self.rng.choice([x for x in self.branches if x != b] + ["main"])
        r = self.call("merge", self.lakefs.refs.merge_into_branch, other, b)
        with self.w.lock:
            self.w.commits.add(r.reference)

    def op_revert(self, b):
        head = self.call("branch", self.lakefs.branches.get_branch, b).commit_id
        self.call("revert", self.lakefs.branches.revert_branch, b, lakefs_sdk.RevertCreation(ref=head,
                                                                                             parent_number=0))

    def op_reset(self, b):
        log = self.call("log", self.lakefs.refs.log_commits, b, amount=10).results
        if len(log) > 1:
            self.call("reset", self.lakefs.experimental.hard_reset_branch, b, self.rng.choice(log[1:]).id)

    def op_recreate(self, b):
        self.call("delete", self.lakefs.branches.delete_branch, b)
        self.call("branch", self.lakefs.branches.create_branch, lakefs_sdk.BranchCreation(
            name=b, source=self.rng.choice(["main", *[x for x in self.branches if x != b]])))


def read_back(lakefs, repo: str, written: Written) -> tuple[int, list[str]]:
    """Every object at every branch HEAD (with its staging) and in every commit the writers made, read through
    lakeFS: how many were read, and those that are gone or not what was written."""
    checked, missing = 0, []
    refs = {b.id: b.commit_id for b in lakefs.call("branches", lakefs.branches.list_branches, repo,
                                                   amount=1000).results}
    for ref in [*refs, *sorted(written.commits)]:
        for obj in lakefs.call("list", lakefs.objects.list_objects, repo, ref, amount=1000).results:
            got = read(lakefs, repo, ref, obj.path)
            checked += 1
            if obj.path.startswith("d/") and got not in written.by_path.get(obj.path, set()) or not isinstance(got, bytes):
                missing.append(f"{ref[:12]}:{obj.path} -> {got!r:.40}")
    return checked, missing


def test_runs_beside_concurrent_writers_lose_nothing(lakefs, lakefs_server, repo, redis_client, redis_server):
    rng = random.Random(SEED)
    for i in range(5):
        lakefs.upload(repo, "main", f"base/{i}", data=content("base"))
    commit(lakefs, repo, "main", "base")
    rules(lakefs, repo, default=7)
    written, stop = Written(), threading.Event()
    writers = [Writer(lakefs_server.endpoint, repo, random.Random(rng.random()), written, stop, f"w{i}")
               for i in range(2)]
    for w in writers:
        w.start()
    connection = LakeFSConnection(endpoint_url=lakefs_server.endpoint, access_key_id=ADMIN_ACCESS_KEY,
                                  secret_access_key=ADMIN_SECRET_KEY)
    runs = GCRuns(redis_client, "lakefs-janitor", redis_server.url)
    deleted = completed = 0
    try:
        for _ in range(ROUNDS):
            time.sleep(rng.uniform(0.2, 1.5))
            try:
                s = execute(GCSettings(min_age="2s", lease_seconds=10, threads=4), GCRequest(repo, runner="threads"),
                            connection=connection, runs=runs)
            except Busy:
                continue
            deleted += s.swept
            completed += 1
    finally:
        stop.set()
        for w in writers:
            w.join(30)
    errors = [e for w in writers for e in w.errors]
    assert errors == [], f"seed {SEED}: {errors[:5]}"
    # One more run on the quiet lake, then everything that must survive reads back.
    execute(GCSettings(min_age="2s", lease_seconds=10), GCRequest(repo, runner="threads"), connection=connection,
            runs=runs)
    checked, missing = read_back(lakefs, repo, written)
    assert missing == [], f"seed {SEED}: {len(missing)} objects lost, e.g. {missing[:5]}"
    ops = sum(w.ops for w in writers)
    assert completed >= ROUNDS // 2 and ops > 20, (completed, ops)
    print(f"RELIABILITY concurrent-writers: runs {completed + 1}, faults: {ops} writer operations during the runs, "
          f"read back {checked}, lost 0, failed re-runs 0 (deleted {deleted})")


def test_unexpected_content_is_skipped_or_refused_never_a_crash(lakefs, lakefs_server, repo, cli):
    """Foreign files under _lakefs/ and beside the data, an empty range file, a plan of an older format: skipped
    or refused with a reason, never a traceback, never a deletion outside the data the plan names."""
    lake = build(lakefs, repo, random.Random(SEED), paths=20)
    root = lakefs_server.dir / "block" / repo
    foreign = {root / "_lakefs" / "notes.txt": b"ours", root / "_lakefs" / "retention" / "gc" / "unified" / "junk":
               b"{not json", root / "_lakefs" / "retention" / "gc" / "unified" / "r1" / "summary.json": b"",
               root / "README.operator": b"left by hand"}
    for path, data in foreign.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    planned = json.loads(cli("gc", "plan", f"lakefs://{repo}", "--min-age", "0s", "--json").output)
    # a file beside the data is, like lakeFS's own GC has it, an object no commit reaches: planned, by name
    assert planned["num_deleted_objects"] == len(lake.garbage) + 1
    summary = root / "_lakefs" / "retention" / "gc" / "unified" / planned["run_id"] / "summary.json"
    record = json.loads(summary.read_text())
    summary.write_text(json.dumps({**record, "format": record["format"] - 1}))  # a plan an older janitor wrote
    out = cli("gc", "run", f"lakefs://{repo}", "--plan", planned["run_id"], expect_exit=1).output
    assert "format" in out and "Traceback" not in out
    ranges = [f for f in (root / "_lakefs").iterdir() if f.is_file() and len(f.name) == 64]
    saved = {f: f.read_bytes() for f in ranges}
    for f in ranges:
        f.write_bytes(b"")  # empty range and metarange files
    out = cli("gc", "run", f"lakefs://{repo}", "--min-age", "0s", expect_exit=1).output
    assert "corrupt-metadata" in out and "Traceback" not in out
    assert lake.garbage <= data_keys(root)  # nothing deleted on a mark that could not read what is kept
    for f, data in saved.items():
        f.write_bytes(data)
    cli("gc", "run", f"lakefs://{repo}", "--min-age", "0s")
    assert lost(lakefs, lake) == [] and not (data_keys(root) & lake.garbage)
    assert all(path.read_bytes() == data for path, data in foreign.items() if "_lakefs" in str(path))
    assert not (root / "README.operator").exists()


# ------------------------------------------------------------------------ every cloud store, both runners

CLOUDS = ["s3", "azure", "gcs"]
# What the store does to a share of all requests while a run lists, reads, writes and deletes
MIXED = ("answer", "stall", "drop", "lost-answer")


@pytest.fixture(scope="module", params=CLOUDS)
def cloud_world(request):
    """A cloud store's real server and a lakeFS on it, for the module, per store."""
    yield from store_world(request.param)


class CloudLake:
    """``build``'s repository on a cloud store, seen through the store's own client."""

    def __init__(self, world, rng: random.Random, paths: int) -> None:
        self.store, self.server, self.lakefs = world
        repo = f"f-{uuid.uuid4().hex[:10]}"
        self.namespace = self.store.namespace(repo)
        self.lakefs.call("create", self.lakefs.repositories.create_repository, lakefs_sdk.RepositoryCreation(
            name=repo, storage_namespace=self.namespace, default_branch="main"))
        self.lake = build(self.lakefs, repo, rng, paths=paths)
        self.repo = repo

    def data_keys(self) -> set[str]:
        root = self.store.fsspec_path(self.namespace) + "/"
        return {p[len(root):] for p in self.store.filesystem().find(root) if not p[len(root):].startswith("_lakefs/")}

    def collector(self, runner, name: str, endpoint: str | None = None) -> Collector:
        """The engine through ``endpoint`` (a proxy; default: the store), with the store options the settings
        give (``GC__STORE_TIMEOUT_SECONDS`` 1 s: a stalled request is given up on quickly)."""
        prefix = "LAKEFS_JANITOR_GC__"
        fields = {k[len(prefix):].lower(): v for k, v in self.store.janitor_env(endpoint).items()
                  if k.startswith(prefix)}
        options = storage_options(GCSettings(store_timeout_seconds=1, **fields))[self.store.kind]
        return Collector(self.server.endpoint, {self.store.kind: options}, runner=runner, runner_name=name)

    def check(self, before: set[str], what: str) -> set[str]:
        """Nothing that must survive lost, nothing deleted but garbage; what is left."""
        assert lost(self.lakefs, self.lake) == [], f"seed {SEED}, {what}: lost"
        now = self.data_keys()
        assert before - now <= self.lake.garbage, f"seed {SEED}, {what}: deleted what is not garbage: " \
                                                  f"{sorted(before - now - self.lake.garbage)[:5]}"
        return now


# The steps whose store errors a run reports as the step's own reason, whatever the store did: the sweep reading
# its plan and its list of objects (engine/state/report.py), re-checking the branches (as when lakeFS fails it) and
# deleting (engine/sweep/sweep.py)
PHASE_REASONS = ("no-plan", "failed-plan", "recheck", "storage-delete")


def faulty_run(gc: Collector, repo: str, min_age: timedelta = timedelta(0)) -> tuple[str, str]:
    """A run that may fail on the store, but only with a store's reason (or its phase's, PHASE_REASONS, nothing
    deleted that is not garbage): (its reason, or "complete"; its outcome in a few words)."""
    try:
        summary, _ = gc.run(repo, min_age=min_age)
    except GCError as exc:
        assert exc.reason.startswith("storage") or exc.reason in PHASE_REASONS, f"seed {SEED}: {exc.reason}: {exc}"
        said = "unreachable" if "the store is unreachable" in str(exc) else str(exc)[:80]
        return exc.reason, f"failed ({exc.reason}: {said})"
    assert summary.success, f"seed {SEED}: {repo}: {summary}"
    return "complete", f"complete ({summary.swept} deleted, {summary.backoffs} back-offs)"


@pytest.mark.parametrize("runner", RUNNERS)
def test_on_a_cloud_store_faults_outages_kills_and_writers_lose_nothing(cloud_world, runner, request,
                                                                       redis_server):
    store = cloud_world[0]
    kind = store.kind
    rng = random.Random(f"{SEED}-{kind}-{runner}")
    chosen, name = runner_of(runner, request)
    cloud = CloudLake(cloud_world, rng, paths=30)
    before = cloud.data_keys()
    assert cloud.lake.garbage <= before
    outcomes = []

    # how many requests a run makes, from a dry run through the proxy (no faults): where the store may go away
    proxy = FaultProxy(store.endpoint, kind, match=lambda m, t: False).start()
    try:
        cloud.collector(chosen, name, proxy.url).run(cloud.repo, dry_run=True)
    finally:
        proxy.cleanup()
    assert cloud.data_keys() == before

    # 1. the store gone at a random request of a run
    at = rng.randint(1, proxy.requests + 10)
    seen = iter(range(1 << 30))
    proxy = FaultProxy(store.endpoint, kind, first=1 << 30, gone=True, match=lambda m, t: next(seen) + 1 >= at)
    proxy.start()
    try:
        started = time.monotonic()
        reason, outcome = faulty_run(cloud.collector(chosen, name, proxy.url), cloud.repo)
        if proxy.went:  # gone before the run ended: it fails, as a store that is unavailable
            assert reason in ("storage-unavailable", *PHASE_REASONS) and "unreachable" in outcome, \
                f"seed {SEED}: {outcome}"
        outcomes.append(f"gone at request {at}: {outcome} in {time.monotonic() - started:.0f} s")
    finally:
        proxy.cleanup()
    left = cloud.check(before, "the store gone")

    # 2. the CLI's run killed at a random moment (the Spark runner's kills: tests/spark/test_gc_orphans.py)
    if name == "threads":
        env = janitor_env(cloud.server, redis_server.url, **store.janitor_env())
        proc = subprocess.Popen([*CLI, "gc", "run", f"lakefs://{cloud.repo}", "--min-age", "0s", "--runner",
                                 "threads"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(1.0, 6.0))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        outcomes.append(f"killed (exit {proc.returncode}, {len(left & cloud.lake.garbage)} garbage left before)")
        left = cloud.check(left, "a killed run")

    # 3. every 7th request, and a tenth of the others, answered 429/503, stalled past the time-out, dropped, or
    # carried out with its answer lost
    proxy = FaultProxy(store.endpoint, kind, every=7, share=0.1, seed=rng.randrange(1 << 30),
                       match=lambda m, t: True, faults=MIXED, stall=2.0,
                       answer=[throttle_answer(kind, 429), throttle_answer(kind, 503)]).start()
    try:
        _, outcome = faulty_run(cloud.collector(chosen, name, proxy.url), cloud.repo)
        outcomes.append(f"faults {proxy.faults} in {proxy.requests} requests: {outcome}")
    finally:
        proxy.cleanup()
    assert proxy.throttled >= 1, f"seed {SEED}: no fault injected in {proxy.requests} requests"
    cloud.check(left, "a share of faults")

    # every re-run converges: the next one deletes what is left of the garbage, the one after nothing
    gc = cloud.collector(chosen, name)
    again, _ = gc.run(cloud.repo)
    assert again.success and not (cloud.data_keys() & cloud.lake.garbage), f"seed {SEED}: the re-run left garbage"
    assert cloud.data_keys() == before - cloud.lake.garbage
    assert lost(cloud.lakefs, cloud.lake) == []
    assert gc.run(cloud.repo)[0].num_deleted_objects == 0

    # 4. writers beside runs through a store that faults now and then (a repository of their own: a writer
    # resetting a branch to one of the history's expired commits would find its objects rightly collected)
    repo = f"w-{uuid.uuid4().hex[:10]}"
    cloud.lakefs.call("create", cloud.lakefs.repositories.create_repository, lakefs_sdk.RepositoryCreation(
        name=repo, storage_namespace=store.namespace(repo), default_branch="main"))
    for i in range(5):
        cloud.lakefs.upload(repo, "main", f"base/{i}", data=content("base"))
    commit(cloud.lakefs, repo, "main", "base")
    rules(cloud.lakefs, repo, default=7)
    written, stop = Written(), threading.Event()
    writers = [Writer(cloud.server.endpoint, repo, random.Random(rng.random()), written, stop, f"w{i}")
               for i in range(2)]
    proxy = FaultProxy(store.endpoint, kind, share=0.05, seed=rng.randrange(1 << 30), match=lambda m, t: True,
                       faults=MIXED, stall=2.0, answer=[throttle_answer(kind, 429), throttle_answer(kind, 503)])
    proxy.start()
    rounds = max(2, ROUNDS // 4)
    completed = 0
    try:
        for w in writers:
            w.start()
        gc = cloud.collector(chosen, name, proxy.url)
        for _ in range(rounds):
            time.sleep(rng.uniform(0.2, 1.5))
            reason, _ = faulty_run(gc, repo, min_age=timedelta(seconds=2))  # what they just staged is kept
            completed += reason == "complete"
    finally:
        stop.set()
        for w in writers:
            w.join(30)
        proxy.cleanup()
    assert [e for w in writers for e in w.errors] == [], f"seed {SEED}"
    last, _ = cloud.collector(chosen, name).run(repo, min_age=timedelta(seconds=2))
    assert last.success
    checked, missing = read_back(cloud.lakefs, repo, written)
    assert missing == [], f"seed {SEED}: {len(missing)} objects lost, e.g. {missing[:5]}"
    assert lost(cloud.lakefs, cloud.lake) == []
    ops = sum(w.ops for w in writers)
    print(f"RELIABILITY cloud-{kind}-{name}: seed {SEED}; {'; '.join(outcomes)}; writers: {ops} operations beside "
          f"{rounds} runs ({completed} complete, faults {proxy.faults}), read back {checked} + "
          f"{len(cloud.lake.must_survive)}, lost 0, failed re-runs 0")

