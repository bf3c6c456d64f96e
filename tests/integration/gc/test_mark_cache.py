"""The mark cache on a real lakeFS, on both runners: successive GC runs on one repository whose history changes
between runs (commits, merges, resets to old commits, deleted and new branches, changed GC rules and cleaning
policies with paths: and keep_versions). After each run, the cached run's plan equals a --no-cache mark's on the
same state at the same ``now``, and what the branches and retained commits reach is still there.

GC_CACHE_TEST_ROUNDS (default 4) sets the rounds per runner; GC_CACHE_TEST_SEED replays one seed (printed on
failure)."""

from __future__ import annotations

import json
import os
import random
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from spark_jobs.core.cache_segments import described, packed, unpacked
from spark_jobs.core.cleaning import parse_cleaning_policies
from spark_jobs.core.mark_cache import DEAD_SHARE, MAX_SEGMENTS, Memory, encode
from spark_jobs.core.report import describe_cache, plan_fingerprint
from spark_jobs.engine.reach import mark_cache, mark_source
from spark_jobs.engine.reach.mark_cache import PREFIX, load, save
from spark_jobs.engine.stores import StorageConfig, open_namespace
from tests.integration.conftest import commit, create_branch, upload
from tests.integration.gc.test_gc_against_lakefs import key_of, rules
from workers.gc.cleaning_store import clear_cleaning, set_cleaning
from workers.shared.lakefs.errors import LakeFSError

DAY = 86400
PATHS = [f"tables/{t}/{i}" for t in ("events", "users") for i in range(3)] + ["tmp/a", "tmp/b", "top"]
POLICIES = [
    [],
    [{"id": "versions", "patterns": ["main"], "keep_versions": 2}],
    [{"id": "events", "patterns": ["*"], "paths": ["tables/events/**"], "keep_commits": 3}],
    [{"id": "tmp", "patterns": ["main"], "paths": ["tmp/**"], "keep_commits": 1, "override_gc_rules": True},
     {"id": "users", "patterns": ["*"], "paths": ["tables/users/**"], "keep_versions": 2}],
    [{"id": "dev", "patterns": ["b*"], "keep_commits": 2}],
]


class History:
    """One repository's history, changed a little between GC runs."""

    def __init__(self, lakefs, repo: str, rng: random.Random) -> None:
        self.lakefs, self.repo, self.rng = lakefs, repo, rng
        self.day = 25  # commits are dated this many days ago, later ones more recent
        self.commits: list[str] = []

    def call(self, what: str, fn, *args) -> object | None:
        try:
            return self.lakefs.call(what, fn, *args)
        except LakeFSError:  # e.g. nothing to merge or commit: the history just does not change there
            return None

    def heads(self) -> dict[str, str]:
        return dict(self.lakefs.branch_heads(self.repo))

    def branches(self) -> list[str]:
        return list(self.heads())

    def commit_on(self, branch: str) -> None:
        for path in self.rng.sample(PATHS, self.rng.randint(1, 3)):
            upload(self.lakefs, self.repo, branch, path, f"{path} {self.day} {self.rng.random()}".encode())
        if self.rng.random() < 0.3:
            self.call("delete", self.lakefs.objects.delete_object, self.repo, branch, self.rng.choice(PATHS))
        self.day = max(0, self.day - self.rng.randint(0, 2))
        try:
            self.commits.append(commit(self.lakefs, self.repo, branch, f"day {self.day}",
                                       date=int(time.time()) - self.day * DAY - self.rng.randint(0, 3000)).id)
        except LakeFSError:
            pass

    def change(self) -> str:
        """One random change; what it was."""
        branches, rng = self.branches(), self.rng
        op = rng.choice(["commit", "commit", "commit", "branch", "merge", "reset", "delete", "rules", "policies"])
        if op == "branch" and len(branches) < 4:
            create_branch(self.lakefs, self.repo, f"b{rng.randint(0, 999)}", rng.choice(self.commits or ["main"]))
        elif op == "merge" and len(branches) > 1:
            self.call("merge", self.lakefs.refs.merge_into_branch, self.repo, rng.choice(branches[1:]), "main")
        elif op == "reset" and self.commits:
            self.call("reset", self.lakefs.experimental.hard_reset_branch, self.repo, rng.choice(branches),
                      rng.choice(self.commits))
        elif op == "delete" and len(branches) > 1:
            self.call("delete branch", self.lakefs.branches.delete_branch, self.repo,
                      rng.choice([b for b in branches if b != "main"]))
        elif op == "rules":
            rules(self.lakefs, self.repo, rng.choice([1, 5, 20]), main=rng.choice([2, 10, 40]))
        elif op == "policies":
            policies = rng.choice(POLICIES)
            if policies:
                set_cleaning(self.lakefs, self.repo, parse_cleaning_policies({"policies": policies}))
            else:
                clear_cleaning(self.lakefs, self.repo)
            op += f" {[p['id'] for p in policies]}"
        else:
            self.commit_on(rng.choice(branches))
            op = "commit"
        return op


def present(local_root: str, repo: str, key: str) -> bool:
    return (Path(local_root) / repo / key).exists()


def reached_keys(lakefs, repo: str, refs) -> set[str]:
    return {k for ref in refs for o in lakefs.paginate("list", lakefs.objects.list_objects, repo, ref)
            if (k := key_of(o.physical_address, repo)) is not None}


def run_rounds(any_runner_gc, lakefs, repo: str, local_root: str, seed: int, rounds: int) -> list[dict]:
    rng = random.Random(seed)
    history = History(lakefs, repo, rng)
    rules(lakefs, repo, 5, main=10)
    for path in PATHS:
        upload(lakefs, repo, "main", path, path.encode())
    history.commit_on("main")
    for _ in range(6):
        history.commit_on("main")
    stats = []
    cached = False  # whether a run wrote the mark cache yet
    for round_ in range(rounds):
        changes = [history.change() for _ in range(rng.randint(1, 4))] if round_ else ["initial"]
        # what lakeFS lists per commit, and which of it still exists before the run (a reset or a branch may
        # bring back a commit an earlier run expired: its objects are legitimately gone)
        listed = {c: reached_keys(lakefs, repo, [c]) for c in set(history.commits) | set(history.heads().values())}
        before = {k for keys in listed.values() for k in keys if present(local_root, repo, k)}
        now = datetime.now(UTC)
        reference = replace(any_runner_gc, cache=False).mark(repo, now=now, min_age=timedelta(0), listing="full")
        summary, marked = any_runner_gc.run(repo, now=now, min_age=timedelta(0), listing="full")  # the whole mark
        where = f"seed {seed}, round {round_} after {changes}: {summary.cache}"
        assert summary.success, where
        assert reference.summary.cache == {"state": "off"}, where
        assert plan_fingerprint(marked.summary, [o.key for o in marked.deleted]) == plan_fingerprint(
            reference.summary, [o.key for o in reference.deleted]), where
        # (the Spark runner makes the plan of a run without path policies and keep_versions as datasets on its
        # executors, the mark cache unused: then only its plan is compared)
        datasets = "plan" in summary.listing
        assert datasets or summary.cache["state"] == ("used" if cached else "empty") and \
            summary.cache["written"], where
        if not datasets:
            assert summary.cache["stale_entries" if cached else "ranges_cached"] == 0, where
            assert summary.cache["write"] in (("compacted", "appended", "unchanged") if cached else
                                              ("compacted",)), where
            check_bounded(repo, local_root, summary.cache, where)
            cached = True
        # The run deleted nothing a branch reaches, nor (without path policies, which retain per path) anything a
        # retained commit reaches
        refs = set(history.heads().values()) | (
            set(marked.retained) if not any(p.paths for p in marked.graph.cleaning) else set())
        reached = {k for c in refs for k in listed.get(c) or reached_keys(lakefs, repo, [c])}
        missing = {k for k in reached & before if not present(local_root, repo, k)}
        assert not missing, where
        stats.append(summary.cache)
    # Once more on the state the last run left, at its `now`: everything the mark needs comes from the cache
    marked = any_runner_gc.mark(repo, now=now, min_age=timedelta(0), listing="full")
    reference = replace(any_runner_gc, cache=False).mark(repo, now=now, min_age=timedelta(0), listing="full")
    assert plan_fingerprint(marked.summary, [o.key for o in marked.deleted]) == plan_fingerprint(
        reference.summary, [o.key for o in reference.deleted]), f"seed {seed}, unchanged"
    cache = marked.summary.cache
    if "plan" not in marked.summary.listing:
        assert cache["ranges_read"] == cache["metaranges_read"] == 0 and \
            cache["ranges_cached"] >= len(marked.ranges), f"seed {seed}, unchanged: {cache}"
        assert cache["write"] == "unchanged", f"seed {seed}, unchanged: {cache}"  # nothing new: nothing written
    return [*stats, cache]


def check_bounded(repo: str, local_root: str, cache: dict, where: str) -> None:
    """The stored cache describes what the run used and, of files no run uses any more, at most DEAD_SHARE of
    what it holds, in at most MAX_SEGMENTS segments: it does not grow without bound."""
    used = sum(cache[f"{kind}_{how}"] for kind in ("ranges", "metaranges") for how in ("cached", "read"))
    stored = load(open_namespace(StorageConfig(f"local://{repo}", local_root)), repository_id=repo,
                  namespace=f"local://{repo}")
    assert stored.stats["state"] == "used" and 1 <= len(stored.segments) <= MAX_SEGMENTS, (where, stored.stats)
    assert used <= stored.stored_files <= used / (1 - DEAD_SHARE), (where, used, stored.stored_files)


def test_cached_runs_plan_what_uncached_marks_plan(any_runner_gc, lakefs, repo, local_root, monkeypatch):
    seed = int(os.environ.get("GC_CACHE_TEST_SEED") or random.randrange(10**6))
    rounds = int(os.environ.get("GC_CACHE_TEST_ROUNDS") or 4)
    # unseen files go to the runner above this many, below it to the driver's threads: both ways, on both runners
    driver_reads = random.Random(seed).choice((0, 2, mark_source.DRIVER_READS))
    monkeypatch.setattr(mark_source, "DRIVER_READS", driver_reads)
    print(f"mark cache test: seed {seed} ({any_runner_gc.runner_name}), {rounds} rounds, driver reads up to "
          f"{driver_reads} files")
    stats = run_rounds(any_runner_gc, lakefs, repo, local_root, seed, rounds)
    print("ranges cached/read per run:", [(s.get("ranges_cached"), s.get("ranges_read")) for s in stats])


def _cache_files(local_root: str, repo: str) -> Path:
    return Path(local_root) / repo / PREFIX


def _rewrite(namespace, local_root: str, repo: str, change) -> None:
    """Apply ``change(memory)`` to the stored cache and store it again, validly (pointer and hashes match)."""
    loaded = load(namespace, repository_id=repo, namespace=f"local://{repo}")
    assert loaded.stats["state"] == "used", loaded.stats
    change(loaded.memory)
    assert save(namespace, loaded.memory, replace(loaded, segments=[]), repository_id=repo,
                namespace=f"local://{repo}", run_id="test") == "compacted"


def _segment(root: Path, index: int | None = None) -> tuple[Path, dict[str, bytes]]:
    """A stored segment (the last by default: the one a daily run appended) and its four files."""
    doc = json.loads((root / "current.json").read_text())
    index = len(doc["segments"]) - 1 if index is None else index
    path = root / f"slot-{doc['slot']}" / f"seg-{index}.parquets"
    return path, unpacked(path.read_bytes(), doc["segments"][index], what=path.name)


def _corruptions(local_root: str, repo: str) -> dict:
    root = _cache_files(local_root, repo)

    def truncate():
        f, _ = _segment(root)
        f.write_bytes(f.read_bytes()[:-40])

    def garbage():
        f, files = _segment(root)
        data = bytearray(f.read_bytes())
        middle = len(files["spans.parquet"]) + len(files["metaranges.parquet"]) + len(files["ranges.parquet"]) // 2
        data[middle:middle + 16] = b"\xff" * 16  # in ranges.parquet
        f.write_bytes(bytes(data))

    def pointer_doc(**changes):
        doc = json.loads((root / "current.json").read_text())
        (root / "current.json").write_text(json.dumps({**doc, **changes}))

    def wrong_schema():  # a valid parquet file, named with its right hash, of other columns
        f, files = _segment(root)
        files["metaranges.parquet"] = encode(Memory())["ranges.parquet"]
        f.write_bytes(packed(files))
        doc = json.loads((root / "current.json").read_text())
        doc["segments"][-1] = described(files)
        (root / "current.json").write_text(json.dumps(doc))

    return {"truncated": truncate, "garbage bytes": garbage, "older format": lambda: pointer_doc(format=0),
            "foreign": lambda: pointer_doc(repository_id="another"), "garbage pointer":
            lambda: (root / "current.json").write_bytes(b"\x00not json"), "wrong schema": wrong_schema}


def test_a_corrupt_cache_is_ignored_and_the_plan_unchanged(gc, lakefs, repo, local_root, namespace):
    History(lakefs, repo, random.Random(7)).commit_on("main")
    for _ in range(5):
        History(lakefs, repo, random.Random(_)).commit_on("main")
    rules(lakefs, repo, 1)
    now = datetime.now(UTC)
    reference = replace(gc, cache=False).mark(repo, now=now, min_age=timedelta(0))
    expected = plan_fingerprint(reference.summary, [o.key for o in reference.deleted])

    def fingerprint_and_cache():
        marked = gc.mark(repo, now=now, min_age=timedelta(0))
        return plan_fingerprint(marked.summary, [o.key for o in marked.deleted]), marked.summary.cache

    assert fingerprint_and_cache()[0] == expected  # writes the cache
    for name, corrupt in _corruptions(local_root, repo).items():
        corrupt()
        fingerprint, cache = fingerprint_and_cache()
        assert fingerprint == expected and cache["state"] == "ignored" and cache["written"], (name, cache)
        assert cache["ranges_cached"] == 0 and cache["ranges_read"] >= 1, (name, cache)
        fingerprint, cache = fingerprint_and_cache()  # rebuilt
        assert fingerprint == expected and cache["state"] == "used" and cache["ranges_read"] == 0, (name, cache)


def test_an_entry_its_file_no_longer_matches_is_not_trusted(gc, lakefs, repo, local_root, namespace):
    """A range the cache remembers emptied, and remembered at another size than lakeFS's file has: that entry is
    dropped and its file read again (trusting it would delete what the range keeps)."""
    for i in range(4):
        History(lakefs, repo, random.Random(i)).commit_on("main")
    rules(lakefs, repo, 1)
    now = datetime.now(UTC)
    reference = replace(gc, cache=False).mark(repo, now=now, min_age=timedelta(0))
    gc.mark(repo, now=now, min_age=timedelta(0))

    def empty_one(memory):
        range_id = sorted(memory.ranges)[0]
        memory.ranges[range_id] = (memory.ranges[range_id][0] + 1, ())

    _rewrite(namespace, local_root, repo, empty_one)
    marked = gc.mark(repo, now=now, min_age=timedelta(0))
    assert marked.summary.cache["stale_entries"] == 1 and marked.summary.cache["ranges_read"] == 1
    assert {o.key for o in marked.deleted} == {o.key for o in reference.deleted}


def test_the_cache_is_never_swept_and_drops_what_is_not_reached(gc, lakefs, repo, local_root, namespace):
    history = History(lakefs, repo, random.Random(3))
    for _ in range(4):
        history.commit_on("main")
    rules(lakefs, repo, 100)
    gc.run(repo, min_age=timedelta(0), listing="full")  # the whole mark, whose cache this is about
    first = load(namespace, repository_id=repo, namespace=f"local://{repo}").memory
    rules(lakefs, repo, 1)  # only HEAD's ranges are reached now
    summary, marked = gc.run(repo, min_age=timedelta(0), listing="full")
    second = load(namespace, repository_id=repo, namespace=f"local://{repo}").memory
    assert set(second.ranges) == set(marked.ranges) < set(first.ranges)
    assert not [o for o in marked.listed if o.key.startswith("_lakefs")]
    assert (_cache_files(local_root, repo) / "current.json").exists() and summary.success


def test_daily_runs_append_what_they_read_and_compact_at_the_segment_limit(gc, lakefs, repo, local_root):
    """Each run that reads new files appends a segment of just those (its write grows with what changed, not with
    the history); a run that reads nothing writes nothing; at MAX_SEGMENTS the cache is written whole again, into
    the other slot. The plan stays the uncached mark's throughout."""
    history = History(lakefs, repo, random.Random(11))
    rules(lakefs, repo, 100)  # every commit retained: nothing becomes unused, only the segment limit compacts
    history.commit_on("main")
    root = _cache_files(local_root, repo)
    seen = []
    for _ in range(MAX_SEGMENTS + 2):
        now = datetime.now(UTC)
        marked = gc.mark(repo, now=now)
        cache = marked.summary.cache
        doc = json.loads((root / "current.json").read_text())
        seen.append((cache["write"], doc["slot"], len(doc["segments"])))
        rows = pq.read_table(pa.BufferReader(_segment(root)[1]["ranges.parquet"])).num_rows
        assert rows == (cache["ranges_read"] if cache["write"] == "appended" else len(marked.ranges)), (seen, cache)
        reference = replace(gc, cache=False).mark(repo, now=now)
        assert plan_fingerprint(marked.summary, [o.key for o in marked.deleted]) == plan_fingerprint(
            reference.summary, [o.key for o in reference.deleted]), seen
        written = (root / "current.json").read_bytes()
        again = gc.mark(repo, now=now).summary.cache
        assert again["write"] == "unchanged" and again["ranges_read"] == 0, again
        assert (root / "current.json").read_bytes() == written
        before = len(history.commits)
        while len(history.commits) == before:
            history.commit_on("main")
    first = seen[0][1]
    other = "b" if first == "a" else "a"
    assert seen == [("compacted", first, 1), *[("appended", first, n) for n in range(2, MAX_SEGMENTS + 1)],
                    ("compacted", other, 1), ("appended", other, 2)], seen


def test_the_run_reads_the_cache_it_preloaded_and_survives_a_failed_write(gc, lakefs, repo, local_root, monkeypatch):
    """The cache read while lakeFS answers is the one the mark uses (no second read); a cache write that fails,
    whatever the error, costs the next run its reads, never this run's plan."""
    gc = replace(gc, local_root=local_root)  # the namespace reachable before lakeFS is asked: preloaded
    for i in range(3):
        History(lakefs, repo, random.Random(i)).commit_on("main")
    rules(lakefs, repo, 1)
    now = datetime.now(UTC)
    reference = replace(gc, cache=False).mark(repo, now=now)
    gc.mark(repo, now=now)  # writes the cache
    started = []
    real_init = mark_cache.Preload.__init__

    def counted(self, *args, **kwargs):
        started.append(1)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(mark_cache.Preload, "__init__", counted)
    marked = gc.mark(repo, now=now)
    assert len(started) == 1 and marked.summary.cache["state"] == "used", (started, marked.summary.cache)
    for error in (OSError("disk full"), RuntimeError("a bug"), KeyError("x")):
        def failing(*args, error=error, **kwargs):
            raise error

        monkeypatch.setattr(mark_cache, "save", failing)
        with_new = History(lakefs, repo, random.Random(len(error.args[0])))
        with_new.commit_on("main")
        now = datetime.now(UTC)
        marked = gc.mark(repo, now=now)
        reference = replace(gc, cache=False).mark(repo, now=now)
        assert marked.summary.success and marked.summary.cache["written"] is False, marked.summary.cache
        assert "was not written" in describe_cache(marked.summary.cache)
        assert plan_fingerprint(marked.summary, [o.key for o in marked.deleted]) == plan_fingerprint(
            reference.summary, [o.key for o in reference.deleted])


def test_the_cli_says_what_came_from_the_cache(cli, lakefs, repo):
    for i in range(3):
        History(lakefs, repo, random.Random(i)).commit_on("main")
    rules(lakefs, repo, 1)
    first = cli("gc", "run", f"lakefs://{repo}", "--min-age", "0s", "--full").output
    assert "(no cache yet)" in first and "metaranges read" in first, first
    second = cli("gc", "run", f"lakefs://{repo}", "--min-age", "0s", "--full").output
    assert "mark cache: 1 ranges and 1 metaranges from the cache, 0 ranges and 0 metaranges read" in second, second
    off = cli("gc", "run", f"lakefs://{repo}", "--min-age", "0s", "--no-cache").output
    assert "mark cache: off (--no-cache)" in off, off
    runs = json.loads(cli("gc", "show", f"lakefs://{repo}", "--json").output)
    assert [r["cache"]["state"] for r in runs[:3]] == ["off", "used", "empty"]
    assert "1/1" in cli("gc", "show", f"lakefs://{repo}").output
    run_id = runs[1]["run_id"]
    assert "ranges and 1 metaranges from the cache" in cli("gc", "show", f"lakefs://{repo}", run_id).output
    assert "do not apply" in cli("gc", "run", f"lakefs://{repo}", "--plan", run_id, "--no-cache",
                                 expect_exit=2).output
