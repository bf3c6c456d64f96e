"""Cleaning per table (``paths:`` in a cleaning policy) on a real lakeFS, on both runners: generated histories where
the expected kept set is computed apart from the engine, entry by entry — every commit's objects listed through
lakeFS's API (not read from SSTables), the policies deciding for a path found by the tests' own glob matcher, and
each such set of policies' retained commits from the pure retention rules plus lakeFS's own retained set. Each on
the object path (threads with the mark cache, below its size threshold) and on the dataset plan (threads without it:
Arrow; Spark)."""

from __future__ import annotations

import json
import random
import time
from datetime import UTC, datetime, timedelta

import lakefs_sdk
import pytest

from spark_jobs.core.cleaning import METADATA_KEY, parse_cleaning_policies, retained_set
from spark_jobs.core.retention import GCRules, commit_from_api
from tests.gc_engine import Collector, runner_of
from tests.integration.conftest import commit, create_branch, upload
from tests.integration.gc.test_gc_against_lakefs import lakefs_own_retained, rules
from tests.unit.gc.test_path_policies import covers

DAY = 86400
PATHS = ["tables/events/a", "tables/events/b", "tables/users/a", "tmp/x", "tmp/y", "top"]

POLICY_SETS = {
    # path policies alone: more history for the events table than lakeFS's rules keep
    "paths alone": [{"id": "events", "patterns": ["*"], "paths": ["tables/events/**"], "keep_commits": 8}],
    # mixed with a branch-level policy, no override
    "with a branch policy": [{"id": "tmp", "patterns": ["main"], "paths": ["tmp/**"], "keep_for": "17d"},
                             {"id": "dev", "patterns": ["dev"], "keep_commits": 6}],
    # tmp/ cleaned harder than lakeFS's 15 days on main, the rest keeps its retention
    "override": [{"id": "tmp", "patterns": ["main"], "paths": ["tmp/**", "top"], "keep_commits": 1,
                  "override_gc_rules": True},
                 {"id": "users", "patterns": ["*"], "paths": ["tables/users/**"], "keep_versions": 4}],
}


def key_of(repo: str, address: str) -> str:
    return address.split(f"/{repo}/", 1)[1] if "://" in address else address


def generate(lakefs, repo, rng: random.Random) -> None:
    """main: a commit a day for 20 days; dev off main 12 days ago with its own daily commits. Each commit rewrites a
    few paths; now and then an object moves to another path (copy, then delete: a rename in lakeFS)."""
    now = int(time.time())
    for p in PATHS:
        upload(lakefs, repo, "main", p, f"{p} base".encode())
    commit(lakefs, repo, "main", "base", date=now - 21 * DAY)
    for day in range(20, 0, -1):
        branches = ["main"] + (["dev"] if day < 12 else [])
        if day == 12:
            create_branch(lakefs, repo, "dev", "main")
        for branch in branches:
            for p in rng.sample(PATHS, rng.randint(1, 2)):
                upload(lakefs, repo, branch, p, f"{p} {branch} {day} {rng.random()}".encode())
            if rng.random() < 0.4:  # rename across a path boundary (tables/ <-> tmp/)
                src = rng.choice([p for p in PATHS if p.startswith("tmp/")] + ["tables/events/a"])
                dst = rng.choice([p for p in PATHS if p.split("/")[0] != src.split("/")[0]])
                lakefs.call("copy", lakefs.objects.copy_object, repo, branch, dst,
                            lakefs_sdk.ObjectCopyCreation(src_path=src, src_ref=branch))
                lakefs.call("delete", lakefs.objects.delete_object, repo, branch, src)
                upload(lakefs, repo, branch, src, f"{src} again {day}".encode())  # every path stays present
            commit(lakefs, repo, branch, f"{branch} day {day}", date=now - day * DAY + rng.randint(0, 3000))


def expected_kept(lakefs, repo, local_root, policies, now) -> set[str]:
    heads = dict(lakefs.branch_heads(repo))
    commits = {}
    for head in heads.values():
        for c in lakefs.paginate_json("log", lakefs.refs.log_commits_with_http_info, repo, head):
            commits[c["id"]] = commit_from_api(c)
    theirs = lakefs_own_retained(lakefs, repo, local_root)
    inputs = dict(commits=commits, branch_heads=heads, rules=GCRules(10, {"main": 15}), lakefs_retained=theirs,
                  tags={}, now=now)
    decided: dict[tuple[str, ...], frozenset[str]] = {}
    listing = {c: {o.path: key_of(repo, o.physical_address)
                   for o in lakefs.paginate("list", lakefs.objects.list_objects, repo, c)} for c in commits}
    kept: set[str] = set()
    for commit_id, entries in listing.items():
        for path, key in entries.items():
            deciding = tuple(p.id for p in policies if not p.paths or covers(p.paths, path))
            if deciding not in decided:
                chosen = [p for p in policies if p.id in deciding]
                decided[deciding] = retained_set(policies=chosen, **inputs).commits
            if commit_id in decided[deciding]:
                kept.add(key)
    # keep_versions, by path: each path's N latest distinct versions along each matching branch's first-parent line
    for branch, head in heads.items():
        line = [c["id"] for c in lakefs.paginate_json("log", lakefs.refs.log_commits_with_http_info, repo, head,
                                                      first_parent=True)]
        for path in PATHS:
            n = max((p.keep_versions or 0 for p in policies if p.matches(branch) and p.keep_versions
                     and (not p.paths or covers(p.paths, path))), default=0)
            versions: list[str] = []
            for c in line:
                if path in listing[c] and listing[c][path] not in versions and len(versions) < n:
                    versions.append(listing[c][path])
            kept |= set(versions)
    return kept


@pytest.fixture(params=["threads", "threads-datasets", pytest.param("spark", marks=pytest.mark.spark)])
def path_gc(request, lakefs_server) -> Collector:
    """The object path (threads, the mark cache on), Arrow datasets (threads, --no-cache), Spark's datasets."""
    name = "spark" if request.param == "spark" else "threads"
    runner, recorded = runner_of(name, request)
    return Collector(lakefs_server.endpoint, runner=runner, runner_name=recorded,
                     cache=request.param == "threads")


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("name", sorted(POLICY_SETS))
def test_path_policies_keep_exactly_what_each_path_s_policies_keep(lakefs, repo, local_root, namespace,
                                                                   path_gc, name, seed):
    generate(lakefs, repo, random.Random(seed))
    rules(lakefs, repo, 10, main=15)
    document = {"policies": POLICY_SETS[name]}
    policies = parse_cleaning_policies(document)
    lakefs.call("metadata", lakefs.internal.set_repository_metadata, repo, lakefs_sdk.RepositoryMetadataSet(
        metadata={METADATA_KEY: json.dumps(document)}))
    now = datetime.now(UTC)
    marked = path_gc.mark(repo, now=now, min_age=timedelta(0), dry_run=True)
    kept = expected_kept(lakefs, repo, local_root, policies, now)
    listed = {o.key for o in namespace.list_data() if o.key.startswith("data/")}
    assert {o.key for o in marked.deleted} == listed - kept
    assert listed - kept and kept  # neither nothing nor everything goes
    # which plan made it: the dataset backend's (with the mark cache the thread runner chooses by size)
    if not path_gc.cache:
        assert marked.summary.listing.get("plan") == {"threads": "arrow", "spark": "spark"}[path_gc.runner_name]


def test_an_override_path_policy_cleans_its_paths_and_leaves_the_rest_to_lakefs_rules(lakefs, repo, path_gc):
    """tmp/ keeps one day on main while tables/ keeps lakeFS's 30 days; a table file moved to tmp/ keeps its old
    version under its old path's retention."""
    now = int(time.time())
    rules(lakefs, repo, 30)
    ids = []
    for day in (5, 4, 3):
        upload(lakefs, repo, "main", "tmp/stage.csv", f"stage {day}".encode())
        upload(lakefs, repo, "main", "tables/t/part", f"part {day}".encode())
        ids.append(commit(lakefs, repo, "main", f"day {day}", date=now - day * DAY).id)
    lakefs.call("copy", lakefs.objects.copy_object, repo, "main", "tmp/moved",
                lakefs_sdk.ObjectCopyCreation(src_path="tables/t/part", src_ref="main"))
    lakefs.call("delete", lakefs.objects.delete_object, repo, "main", "tables/t/part")
    ids.append(commit(lakefs, repo, "main", "moved", date=now - 2 * DAY).id)
    document = {"policies": [{"id": "tmp", "patterns": ["main"], "paths": ["tmp/**"], "keep_for": "1d",
                              "override_gc_rules": True}]}
    lakefs.call("metadata", lakefs.internal.set_repository_metadata, repo, lakefs_sdk.RepositoryMetadataSet(
        metadata={METADATA_KEY: json.dumps(document)}))
    summary, _ = path_gc.run(repo, min_age=timedelta(0))
    assert summary.success

    def status(ref, path):
        try:
            lakefs.call("get", lakefs.objects.get_object, repo, ref, path)
            return 200
        except Exception as exc:  # noqa: BLE001 - LakeFSError carries the status
            return getattr(exc, "status", None)

    # tmp/ on main: only the HEAD's version and the first before the 1-day window (day 2's = HEAD here)
    assert [status(c, "tmp/stage.csv") for c in ids] == [410, 410, 200, 200]
    # tables/ keeps its 30 days, including the version later moved to tmp/
    assert [status(c, "tables/t/part") for c in ids[:3]] == [200, 200, 200]
    assert status(ids[3], "tmp/moved") == 200


@pytest.mark.parametrize("depth", [1, 3])
def test_by_path_names_the_plan_as_the_object_path_does(lakefs, repo, path_gc, monkeypatch, depth):
    """--by-path on the dataset plan (the history's entries of the plan's keys, each named by its entry of least
    range and path) counts per path prefix what the object path's ``paths_of`` counts, objects moved between paths
    (a copy and a delete) included."""
    from spark_jobs.engine.plan import datasets  # noqa: PLC0415

    generate(lakefs, repo, random.Random(5))
    rules(lakefs, repo, 10, main=15)
    document = {"policies": POLICY_SETS["override"]}
    lakefs.call("metadata", lakefs.internal.set_repository_metadata, repo, lakefs_sdk.RepositoryMetadataSet(
        metadata={METADATA_KEY: json.dumps(document)}))
    now = datetime.now(UTC)
    marked = path_gc.mark(repo, now=now, min_age=timedelta(0), dry_run=True, by_path=True, prefix_depth=depth)
    with monkeypatch.context() as patch:
        patch.setattr(datasets, "eligible", lambda *_, **__: False)  # the object path, whatever the size
        reference = Collector(path_gc.endpoint).mark(repo, now=now, min_age=timedelta(0), dry_run=True,
                                                     by_path=True, prefix_depth=depth)
    assert "plan" not in reference.summary.listing
    assert {o.key for o in marked.deleted} == {o.key for o in reference.deleted}
    assert marked.summary.by_path == reference.summary.by_path
    assert sum(n for n, _ in marked.summary.by_path.values()) == len(marked.deleted) > 0
    assert len(marked.summary.by_path) > 1, marked.summary.by_path
