"""Incremental runs against the full listing they replace (issue 28), on a real lakeFS over local disk and versitygw
(the real S3 server), on both runners.

A lake whose history lies in old slices (objects written into lakeFS-named partitions of 30 days ago, dated 20 days
ago, then linked) lives through simulated days of overwrites, deletes, merges, resets, reverts, branches created from
old commits and deleted, uploads never committed, deletion caps and deletions that fail. Every day a full dry run
(listing everything) and the incremental run plan at the same instant: the plans are equal; after the incremental
run's sweep, a full dry run finds only what the run was told not to or could not delete, and counts nothing the
incremental rule missed; no run deletes what a branch reaches when it runs. At the end nothing is left. (On Spark
the full dry runs are the thread runner's on most days: see the test.)
"""

from __future__ import annotations

import json
import random
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import lakefs_sdk
import pytest

from spark_jobs.core import incremental as core_incremental
from spark_jobs.core import kept_index
from spark_jobs.core.cleaning import METADATA_KEY
from spark_jobs.core.incremental import decode, encode
from spark_jobs.core.report import index_part_key
from spark_jobs.core.slices import slice_name
from spark_jobs.engine.reach import lean_mark
from spark_jobs.engine.runtime import parallel
from spark_jobs.engine.runtime.context import GCError
from spark_jobs.engine.runtime.range_cache import RangeCacheSettings
from spark_jobs.engine.state import index_lookup
from spark_jobs.engine.state.incremental import STATE_KEY
from tests.gc_engine import RUNNERS
from tests.integration.gc.test_gc_stores import collector, data_keys, store_world
from workers.shared.lakefs.errors import LakeFSError

DAY = 86400


@pytest.fixture(scope="module", params=["local", "s3"])
def world(request) -> Iterator:
    yield from store_world(request.param)


def backing_file(store, namespace: str, key: str) -> Path:
    """The file behind an object (both stores keep objects as plain files)."""
    path = store.fsspec_path(namespace, key)
    return Path(path) if store.kind == "local" else store.dir / "data" / path


class Lake:
    """A repository whose history was written before the first GC run, in slices an incremental run never lists
    again; what the days after it write lands in lakeFS's current slice."""

    def __init__(self, world, rng: random.Random) -> None:
        self.store, _, self.lakefs = world
        self.rng = rng
        self.repo = f"i-{uuid.uuid4().hex[:10]}"
        self.namespace = self.store.namespace(self.repo)
        self.lakefs.call("create repository", self.lakefs.repositories.create_repository,
                         lakefs_sdk.RepositoryCreation(name=self.repo, storage_namespace=self.namespace,
                                                       default_branch="main"))
        self.lakefs.call("rules", self.lakefs.repositories.set_gc_rules, self.repo,
                         lakefs_sdk.GarbageCollectionRules(default_retention_days=3, branches=[]))
        self.fs = self.store.filesystem()
        self.base = ("local://" + self.store.fsspec_path(self.namespace) if self.store.kind == "local"
                     else self.namespace.rstrip("/"))
        self.paths = [f"tables/t{i % 4}/part-{i:03d}.parquet" for i in range(24)]
        self.branches = ["main"]
        self.commits: list[str] = []
        self.day = 0
        # scoped: main's last commit of the past is a day old (lakeFS's rules keep it, the path policies do not),
        # and a few paths of each scope are rewritten every day
        self.scoped = False

    def old_object(self, branch: str, path: str, hours: int) -> str:
        """An object of the lake's past: in a slice lakeFS opened 30 days ago (+ ``hours``), written 20 days ago,
        then staged at ``path``."""
        opened = datetime.now(UTC) - timedelta(days=30) + timedelta(hours=hours)
        key = f"data/{slice_name(opened, uuid.uuid4().bytes)}/{uuid.uuid4().hex}"
        target = self.store.fsspec_path(self.namespace, key)
        if self.store.kind == "local":
            self.fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
        data = f"old {path} {uuid.uuid4().hex}".encode()
        self.fs.pipe_file(target, data)
        self.store.backdate(key, self.namespace, 20 * DAY)
        self.lakefs.call("stage", self.lakefs.internal.stage_object, self.repo, branch, path,
                         lakefs_sdk.ObjectStageCreation(physical_address=f"{self.base}/{key}",
                                                        checksum=uuid.uuid4().hex, size_bytes=len(data)))
        return key

    def commit(self, branch: str, days_ago: float) -> None:
        try:
            made = self.lakefs.call("commit", self.lakefs.commits.commit, self.repo, branch, lakefs_sdk.CommitCreation(
                message=f"day {self.day}", var_date=int(time.time() - days_ago * DAY)))
            self.commits.append(made.id)
        except LakeFSError:
            pass  # nothing to commit

    def history(self) -> None:
        """Before the first run: main's paths in old slices over two commits, a branch with its own old objects,
        and old objects staged and never committed."""
        for i, path in enumerate(self.paths):
            self.old_object("main", path, i)
        self.commit("main", 20)
        for i, path in enumerate(self.rng.sample(self.paths, 8)):
            self.old_object("main", path, 30 + i)
        self.commit("main", 1 if self.scoped else 15)
        if not self.scoped:  # (scoped: no branch keeps main's past, so keep_versions alone keeps old versions)
            self.create_branch("b1", "main")
            for i, path in enumerate(self.rng.sample(self.paths, 5)):
                self.old_object("b1", path, 40 + i)
            self.commit("b1", 12)
        for i, path in enumerate(self.rng.sample(self.paths, 4)):
            self.old_object("main", path, 50 + i)  # staged only

    def create_branch(self, name: str, source: str) -> None:
        self.lakefs.call("branch", self.lakefs.branches.create_branch, self.repo,
                         lakefs_sdk.BranchCreation(name=name, source=source))
        self.branches.append(name)

    def upload(self, branch: str, path: str) -> None:
        self.lakefs.upload(self.repo, branch, path, data=f"{path} day {self.day} {uuid.uuid4().hex}".encode())

    def one_day(self, days_ago: float) -> None:
        """A day's random work; commits dated ``days_ago``."""
        self.day += 1
        rng = self.rng
        if self.day == 1:  # every branch moves on: its old HEAD's ranges die, the lake's past becomes garbage
            # and main's staged objects of the past are thrown away (staged with full addresses, which lakeFS's
            # list of uncommitted objects leaves out: no run keeps them, the first one collected them already)
            self.lakefs.call("reset", self.lakefs.branches.reset_branch, self.repo, "main",
                             lakefs_sdk.ResetCreation(type="reset"))
            for branch in list(self.branches):
                for path in rng.sample(self.paths, 3):
                    self.upload(branch, path)
                self.commit(branch, days_ago)
        if self.scoped:  # the same few paths of each scope rewritten every day, on the branch that keeps versions
            for path in ("tables/t0/part-000.parquet", "tables/t1/part-001.parquet", "tables/t1/part-005.parquet",
                         "tables/t2/part-002.parquet"):
                self.upload("main", path)
            self.commit("main", days_ago)
        for _ in range(rng.randint(2, 4)):
            branch = rng.choice(self.branches)
            op = rng.random()
            if op < 0.35:
                for path in rng.sample(self.paths, rng.randint(1, 4)):
                    self.upload(branch, path)
                self.commit(branch, days_ago)
            elif op < 0.45:
                self.lakefs.call("delete", self.lakefs.objects.delete_objects, self.repo, branch,
                                 lakefs_sdk.PathList(paths=rng.sample(self.paths, 2)))
                self.commit(branch, days_ago)
            elif op < 0.55 and len(self.branches) < 5 and self.commits:
                # a branch on an old commit: what it reaches is kept again
                self.create_branch(f"b{self.day}-{rng.randint(0, 999)}", rng.choice(self.commits))
            elif op < 0.62 and len(self.branches) > 2:
                doomed = rng.choice([b for b in self.branches if b != "main"])
                self.lakefs.call("delete branch", self.lakefs.branches.delete_branch, self.repo, doomed)
                self.branches.remove(doomed)
            elif op < 0.7 and branch != "main":
                try:
                    self.lakefs.call("merge", self.lakefs.refs.merge_into_branch, self.repo, branch, "main")
                except LakeFSError:
                    pass
            elif op < 0.78:
                # staged work thrown away: uploads never committed, the old staged objects among them
                self.upload(branch, rng.choice(self.paths))
                self.lakefs.call("reset", self.lakefs.branches.reset_branch, self.repo, branch,
                                 lakefs_sdk.ResetCreation(type="reset"))
            elif op < 0.86 and self.commits:
                try:
                    self.lakefs.call("revert", self.lakefs.branches.revert_branch, self.repo, "main",
                                     lakefs_sdk.RevertCreation(ref=rng.choice(self.commits), parent_number=1))
                except LakeFSError:
                    pass
            else:
                path = rng.choice(self.paths)
                self.upload(branch, path)
                self.upload(branch, path)  # the first version: garbage never committed

    def keys(self) -> set[str]:
        return data_keys(self.store, self.namespace)

    def reachable(self) -> set[str]:
        """The keys every branch's objects (staged ones included) point at, through lakeFS's listing."""
        keys = set()
        for branch in self.branches:
            for obj in self.lakefs.paginate("list", self.lakefs.objects.list_objects, self.repo, branch):
                address = obj.physical_address
                keys.add(address[len(self.base) + 1:] if address.startswith(self.base + "/") else address)
        return keys


class Undeletable:
    """Objects the store cannot delete (the file made immutable), until the block ends."""

    def __init__(self, lake: Lake, keys: list[str]) -> None:
        self.files = [backing_file(lake.store, lake.namespace, k) for k in keys]

    def __enter__(self) -> Undeletable:
        for f in self.files:
            subprocess.run(["chattr", "+i", str(f)], check=True, capture_output=True)
        return self

    def __exit__(self, *_exc) -> None:
        for f in self.files:
            subprocess.run(["chattr", "-i", str(f)], check=True, capture_output=True)


def planned(marked) -> set[str]:
    return {o.key for o in marked.deleted}


# Path policies and keep_versions: an entry's fate is then its (range, scope) unit's, and keep_versions keeps keys
# no unit names; such runs take the whole mark (no kept index), the others the lean one
POLICIES = {"none": None,
            "scoped": [{"id": "t0", "patterns": ["*"], "paths": ["tables/t0/**"], "keep_commits": 1,
                        "override_gc_rules": True},
                       {"id": "t1", "patterns": ["main", "b1"], "paths": ["tables/t1/**"], "keep_commits": 1,
                        "keep_versions": 2, "override_gc_rules": True}],
            # path policies alone (no keep_versions): the dataset plan takes the full runs (Spark's; the thread
            # runner's above its size threshold), its live (range, scope) pairs the state's units
            "paths": [{"id": "t0", "patterns": ["*"], "paths": ["tables/t0/**"], "keep_commits": 1,
                       "override_gc_rules": True},
                      {"id": "t1", "patterns": ["main", "b1"], "paths": ["tables/t1/**", "!tables/t1/part-001.*"],
                       "keep_for": "2d", "override_gc_rules": True}]}


@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize(("seed", "policies"), [(1, "none"), (2, "none"), (3, "scoped"), (4, "paths")])
def test_incremental_runs_plan_what_full_runs_plan(world, runner, seed, policies, request, monkeypatch, tmp_path):
    # with the range cache, as deployed: each day's dead ranges are the copies the day before kept
    gc = replace(collector(world, runner, request), range_cache=RangeCacheSettings(str(tmp_path / "ranges"), 64))
    if seed == 2:  # the kept index's base in several parts (executors write them on Spark), as a large lake has it
        monkeypatch.setattr(kept_index, "PART_KEYS", 3)
        # and every day's ranges compared, and its keys looked up in the index, by Spark's executors, as a day that
        # touches many ranges of a large lake has them (the thread runner does both on its own threads)
        monkeypatch.setattr(lean_mark, "DRIVER_RANGES", 0)
        monkeypatch.setattr(index_lookup, "DRIVER_KEYS", 0)
    lake = Lake(world, random.Random(seed))
    if POLICIES[policies]:
        lake.lakefs.call("metadata", lake.lakefs.internal.set_repository_metadata, lake.repo,
                         lakefs_sdk.RepositoryMetadataSet(metadata={METADATA_KEY: json.dumps(
                             {"policies": POLICIES[policies]})}))
    lake.scoped = policies in ("scoped", "paths")
    # with cleaning policies a runner that plans this repository as datasets (Spark, at any size; the thread runner
    # above its size threshold, here set to 0 for path policies with keep_versions) plans the daily runs as datasets
    # too: the dead units' keys and the carried ones asked for by executors (by the pool's threads on Arrow)
    if policies == "scoped" and runner == "threads":
        monkeypatch.setattr(parallel, "DATASETS_ABOVE_RANGES", 0)
    on_datasets = {"spark": "spark", "threads": "arrow"}[runner] \
        if policies == "paths" and runner == "spark" or policies == "scoped" else None
    lake.history()
    first, _ = gc.run(lake.repo)
    assert first.listing["kind"] == "full" and "no previous run" in first.listing["reason"], first.listing
    if seed == 2:
        parts = decode(lake.fs.cat_file(lake.store.fsspec_path(lake.namespace, STATE_KEY))).index_parts
        assert len(parts) >= 4, parts
    # Spark's runs a day: its incremental mark and the sweep. The full listing's plan the mark must equal is Spark's
    # on day 1, then the thread runner's (identical plans are the runners' contract, tests/spark/test_gc_engines.py);
    # the full dry run after the sweep (what is left, missed_by_incremental with keys carried over) is Spark's on the
    # day of a stuck deletion (3), else the thread runner's reading the state Spark's run left. A Spark run on a lake
    # this small is mostly its jobs' scheduling: this module was the CI's longest (43 min of 77 on 2026-11-30, its
    # Spark cases 35)
    oracle = gc if runner == "threads" else replace(collector(world, "threads", request), cache=False)
    days = 6
    totals = {"incremental": 0, "found_without_listing": 0, "capped": 0, "failed": 0, "asked_early": 0,
              "from_cache": 0}
    for day in range(1, days + 1):
        lake.one_day(days_ago=days - day + 0.5)
        now = datetime.now(UTC)
        _, full = (gc if day == 1 else oracle).run(lake.repo, dry_run=True, listing="full", now=now)
        if policies == "paths" and runner == "spark" and day == 1:  # path policies on the dataset plan
            assert full.summary.listing.get("plan") == "spark", full.summary.listing
        marked = gc.mark(lake.repo, now=now)
        listing = marked.summary.listing
        assert listing["kind"] == "incremental", listing
        assert listing.get("plan") == on_datasets, listing
        if policies == "none":  # the lean mark
            assert listing["kept_index"] > 0, listing
            if seed == 2 and listing["ranges_dead"] + listing["ranges_new"]:
                assert listing["compared_on"] == ("driver" if runner == "threads" else "runner"), listing
            if seed == 2 and listing["keys_looked_up"]:
                assert listing["looked_up_on"] == ("driver" if runner == "threads" else "runner"), listing
            # a day compared on the driver asks for the keys going down while it compares (AskedEarly): every key
            # it then needs was asked for early, and what it found is what the store holds (the plans are equal)
            if listing["compared_on"] == "driver":
                assert listing["asked_early"] >= listing["checked"] and listing["asked_early"] - listing[
                    "asked_early_unused"] == listing["checked"], listing
                totals["asked_early"] += listing["asked_early"]
            else:
                assert listing["asked_early"] == 0, listing
            assert listing["ranges_cache_dropped"] == 0, listing
            totals["from_cache"] += listing["ranges_from_cache"]
        else:
            assert "kept_index" not in listing, listing
        assert planned(marked) == planned(full), (day, "only incremental", planned(marked) - planned(full), "only full", planned(full) - planned(marked), listing)
        before, reachable = lake.keys(), lake.reachable()
        cap = 2 if day in (2, 4) else None
        stuck = sorted(planned(marked))[:1] if day == 3 else []
        with Undeletable(lake, stuck):
            try:
                gc.sweep(lake.repo, marked.summary.run_id, max_deletions=cap)
            except GCError as exc:
                assert stuck and exc.reason == "storage-delete", exc
        removed = before - lake.keys()
        assert removed <= planned(marked)
        assert not removed & reachable, f"day {day}: deleted what a branch reaches: {removed & reachable}"
        left = planned(marked) - removed
        if cap:
            assert len(removed) <= cap
        assert set(stuck) <= left
        _, after = (gc if day == 3 else oracle).run(lake.repo, dry_run=True, listing="full", now=now)
        assert planned(after) == left, (day, planned(after) ^ left)
        assert after.summary.listing["missed_by_incremental"] == 0, after.summary.listing
        totals["incremental"] += 1
        totals["found_without_listing"] += listing.get("found_without_listing", 0)
        totals["capped"] += len(left) - len(stuck)
        totals["failed"] += len(stuck)
    last, marked = gc.run(lake.repo)  # nothing capped or stuck any more: all of it goes
    assert last.listing["kind"] == "incremental" and last.success
    _, final = oracle.run(lake.repo, dry_run=True, listing="full")
    assert planned(final) == set() and final.summary.listing["missed_by_incremental"] == 0
    assert totals["found_without_listing"] > 0, "no day found an object without listing it: the " \
                                                                "test is too weak"
    if policies == "none" and (runner == "threads" or seed != 2):
        assert totals["asked_early"] > 0, "no day asked for a key early: the test is too weak"
    if policies == "none":  # a store on this machine's disk is read in place, any other through the cache
        assert (totals["from_cache"] > 0) == (lake.store.kind != "local"), totals
    print(f"RELIABILITY gc-incremental {lake.store.kind}/{runner} seed {seed} ({policies} policies): {days} days, plans equal to the full "
          f"listing's every day, {totals['found_without_listing']} objects found without listing, "
          f"{totals['capped']} capped and {totals['failed']} failed carried over, {totals['from_cache']} ranges from the "
          "range cache, missed 0, reachable lost 0")


def test_a_full_run_finds_what_a_skewed_clock_hid_and_counts_it(world, request):
    """An object written after a run into a slice the next incremental run does not list (a writer's clock days
    behind): the incremental runs do not see it, the next full run deletes it and says how many it found that way."""
    gc = collector(world, "threads", request)
    lake = Lake(world, random.Random(5))
    lake.history()
    gc.run(lake.repo)
    opened = datetime.now(UTC) - timedelta(days=10)
    skewed = f"data/{slice_name(opened, b'skew')}/{uuid.uuid4().hex}"
    target = lake.store.fsspec_path(lake.namespace, skewed)
    if lake.store.kind == "local":
        lake.fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
    lake.fs.pipe_file(target, b"written by a clock ten days behind, never linked")
    lake.store.backdate(skewed, lake.namespace, 10 * DAY)
    incremental, marked = gc.run(lake.repo)
    assert incremental.listing["kind"] == "incremental" and skewed not in planned(marked)
    assert skewed in lake.keys()  # noqa: SIM118 - a set of keys, not a dict
    full, marked = gc.run(lake.repo, listing="full")
    assert full.listing["kind"] == "full" and "--full" in full.listing["reason"]
    assert skewed in planned(marked) and skewed not in lake.keys()  # noqa: SIM118
    assert full.listing["missed_by_incremental"] == 1, full.listing


@pytest.mark.parametrize(("runner", "cache"), [("threads", True), ("threads", False), ("spark", True)])
def test_more_staged_keys_than_a_state_carries_make_the_next_run_full(world, runner, cache, request, monkeypatch):
    """A state carries the keys only staged entries keep up to a bound (100,000; 3 here, the lake stages 4 new
    objects on main through lakeFS and never commits them): past it the state carries none, says so, and the next
    run lists everything. Nothing staged is deleted on the way (the runs' cutoff is now: only the staged entries keep
    those objects), on the mark cache's object path (threads, cache), the Arrow datasets (threads, --no-cache) and
    Spark's."""
    gc = replace(collector(world, runner, request), cache=cache)
    lake = Lake(world, random.Random(7))
    lake.history()
    before = lake.reachable()
    for i in range(4):
        lake.upload("main", f"staged/only-{i}")
    reachable = lake.reachable() - before
    assert len(reachable) == 4
    state_file = lake.store.fsspec_path(lake.namespace, STATE_KEY)
    monkeypatch.setattr(core_incremental, "CARRIED_STAGED_MOST", 3)
    first, _ = gc.run(lake.repo)
    stored = decode(lake.fs.cat_file(state_file))
    assert first.listing["kind"] == "full" and stored.staged_over and not stored.staged, (first.listing, stored)
    assert reachable <= lake.keys()
    second, _ = gc.run(lake.repo)
    assert second.listing["kind"] == "full", second.listing
    assert "more than 3 keys that only staged entries keep" in second.listing["reason"], second.listing
    assert second.listing["missed_by_incremental"] == 0
    assert reachable <= lake.keys()
    monkeypatch.setattr(core_incremental, "CARRIED_STAGED_MOST", 100_000)
    third, _ = gc.run(lake.repo)  # still full (the second run's state carried none), and now it carries them
    stored = decode(lake.fs.cat_file(state_file))
    assert third.listing["kind"] == "full" and not stored.staged_over, stored
    # (with main's old objects staged before: those lakeFS lists as uncommitted are carried too)
    assert reachable <= stored.staged <= reachable | before, stored.staged
    fourth, _ = gc.run(lake.repo)
    assert fourth.listing["kind"] == "incremental", fourth.listing
    assert reachable <= lake.keys()


@pytest.mark.parametrize("runner", RUNNERS)
def test_a_day_with_more_staged_entries_than_the_lean_mark_holds_is_planned_as_datasets(world, runner, request,
                                                                                         monkeypatch):
    """The lean mark (a day bringing the previous run's kept index up to date) holds the staged keys on the driver;
    past a bound (100,000; 3 here, with 4 new objects staged on main) the day is planned as datasets, whose staged
    keys stay where the backend holds them (Spark's executors, Arrow tables), and says why; its plan is the full
    listing's and keeps every staged object. Under the bound again, the next day takes the lean mark."""
    gc = collector(world, runner, request)
    if runner == "threads":  # the thread runner plans this small lake as datasets too, as a large one
        monkeypatch.setattr(parallel, "DATASETS_ABOVE_RANGES", 0)
    lake = Lake(world, random.Random(11))
    lake.history()
    first, _ = gc.run(lake.repo)
    assert first.listing["kind"] == "full", first.listing
    on_datasets = {"spark": "spark", "threads": "arrow"}[runner]
    for day, most in ((1, 3), (2, 100_000)):
        monkeypatch.setattr(lean_mark, "STAGED_MOST", most)
        lake.one_day(days_ago=1 - day * 0.4)  # (it commits what was staged the day before)
        before = lake.reachable()
        for i in range(4):
            lake.upload("main", f"staged/day-{day}-{i}")
        staged = lake.reachable() - before
        assert len(staged) == 4
        now = datetime.now(UTC)
        _, full = gc.run(lake.repo, dry_run=True, listing="full", now=now)
        marked = gc.mark(lake.repo, now=now)
        listing = marked.summary.listing
        assert listing["kind"] == "incremental", listing
        if day == 1:
            assert listing.get("plan") == on_datasets and "kept_index" not in listing, str(listing)
            assert "more than 3 staged entries" in listing["kept_index_refused"], listing
        else:
            assert listing["kept_index"] > 0 and "plan" not in listing and "kept_index_refused" not in listing, listing
        assert planned(marked) == planned(full), (day, planned(marked) ^ planned(full))
        assert not planned(marked) & staged
        gc.sweep(lake.repo, marked.summary.run_id)
        assert staged <= lake.keys()


def test_when_the_state_cannot_be_trusted_the_run_lists_everything(world, request):
    gc = collector(world, "threads", request)
    lake = Lake(world, random.Random(6))
    lake.history()
    dry, _ = gc.run(lake.repo, dry_run=True)
    assert dry.listing["kind"] == "full"
    again, _ = gc.run(lake.repo)  # a dry run leaves no state
    assert "no previous run" in again.listing["reason"], again.listing
    ok, _ = gc.run(lake.repo)
    assert ok.listing["kind"] == "incremental" and ok.listing["previous_run"] == again.run_id
    assert "kept_index" in ok.listing  # the first run built the index, this one used it
    assert len(decode(lake.fs.cat_file(lake.store.fsspec_path(lake.namespace, STATE_KEY))).index_parts) == 1
    state_file = lake.store.fsspec_path(lake.namespace, STATE_KEY)
    stored = decode(lake.fs.cat_file(state_file))
    index_file = lake.store.fsspec_path(lake.namespace, index_part_key(stored.index_run, 0))
    lake.fs.pipe_file(index_file, lake.fs.cat_file(index_file)[:-7])  # a damaged index: the whole mark instead
    lake.upload("main", "after/truncate")  # a key to judge: a part of the index is read only when a key needs it
    without, _ = gc.run(lake.repo)
    assert without.listing["kind"] == "incremental" and "kept_index" not in without.listing
    assert "kept index" in without.listing["kept_index_refused"], without.listing
    stored = decode(lake.fs.cat_file(state_file))
    index_file = lake.store.fsspec_path(lake.namespace, index_part_key(stored.index_run, 0))
    raw = bytearray(lake.fs.cat_file(index_file))
    raw[-5] ^= 0xFF  # a bit flipped inside a block, the size unchanged: seen when the block is read
    lake.fs.pipe_file(index_file, bytes(raw))
    lake.upload("main", "after/flip")  # a key to judge, so the block is read
    flipped, _ = gc.run(lake.repo)
    assert flipped.listing["kind"] == "incremental" and "kept_index" not in flipped.listing
    assert "checksum" in flipped.listing["kept_index_refused"], flipped.listing
    whole = lake.fs.cat_file(state_file)
    lake.fs.pipe_file(state_file, whole[: len(whole) // 2])  # torn
    torn, _ = gc.run(lake.repo)
    assert torn.listing["kind"] == "full" and "not trusted" in torn.listing["reason"], torn.listing
    assert "missed_by_incremental" not in torn.listing  # nothing of a torn state is used
    due, _ = gc.run(lake.repo, full_listing_every=timedelta(seconds=0))
    assert due.listing["kind"] == "full" and "FULL_LISTING_EVERY" in due.listing["reason"], due.listing
    assert due.listing["missed_by_incremental"] == 0
    stored = decode(lake.fs.cat_file(state_file))
    lake.fs.pipe_file(state_file, encode(replace(stored, namespace="s3://elsewhere/x")))
    moved, _ = gc.run(lake.repo)
    assert moved.listing["kind"] == "full" and "not of this repository's namespace" in moved.listing["reason"]


def test_a_damaged_copy_in_the_range_cache_is_dropped_and_the_store_read(world, request, tmp_path):
    """The cache's copies are this machine's disk, not lakeFS's files: one that is damaged (bits flipped, cut short,
    emptied) is refused by the decoder, dropped, and the store's file read instead; the plan is the full listing's.
    A namespace on this machine's disk is read in place: no copies at all."""
    settings = RangeCacheSettings(str(tmp_path / "ranges"), 64)
    gc = replace(collector(world, "threads", request), range_cache=settings)
    lake = Lake(world, random.Random(11))
    lake.history()
    gc.run(lake.repo)
    damaged = 0
    for day, damage in enumerate(("none", "flip", "cut", "empty", "none"), start=1):  # day 1 keeps the first copies
        lake.day += 1
        for path in lake.rng.sample(lake.paths, 6):  # main's HEAD moves on, its last one out of retention: the
            lake.upload("main", path)  # ranges it alone held die, compared with yesterday's copies of them
        lake.commit("main", 10)
        copies = sorted(p for p in (tmp_path / "ranges").rglob("*") if p.is_file())
        if lake.store.kind == "local":  # on this machine's disk already: read in place, no copies kept
            assert not copies, copies
        elif day > 1 and damage != "none":
            assert copies, "the day before kept no copy: the test is too weak"
            for p in copies:
                raw = p.read_bytes()
                p.write_bytes({"flip": lambda b: b[:len(b) // 2] + bytes([b[len(b) // 2] ^ 0xFF]) + b[len(b) // 2 + 1:],
                               "cut": lambda b: b[:len(b) - 100], "empty": lambda b: b""}[damage](raw))
        now = datetime.now(UTC)
        _, full = gc.run(lake.repo, dry_run=True, listing="full", now=now)
        marked = gc.mark(lake.repo, now=now)
        listing = marked.summary.listing
        assert listing["kind"] == "incremental" and "kept_index" in listing, listing
        assert planned(marked) == planned(full), (day, damage, listing)
        if lake.store.kind == "local":
            assert listing["ranges_from_cache"] == listing["ranges_cache_dropped"] == 0, listing
        elif day > 1 and damage in ("flip", "cut"):
            assert listing["ranges_cache_dropped"] > 0, (damage, listing)
        elif day > 1 and damage == "none":
            assert listing["ranges_from_cache"] > 0 and listing["ranges_cache_dropped"] == 0, listing
        damaged += listing["ranges_cache_dropped"]
        gc.sweep(lake.repo, marked.summary.run_id)
    assert (damaged > 0) == (lake.store.kind != "local")
