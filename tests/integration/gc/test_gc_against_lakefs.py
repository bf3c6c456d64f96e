"""The GC's sets against lakeFS itself: retained ⊇ lakeFS's own, deleted = an independent computation through the
API; and failures (corrupt metadata, unreadable namespace, lakeFS down) delete nothing."""

from __future__ import annotations

import csv
import http.client
import random
import threading
import time
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import lakefs_sdk
import pytest

from spark_jobs.engine.runtime.context import GCError
from tests.gc_engine import Collector
from tests.integration.conftest import commit, create_branch, upload
from workers.shared.lakefs.errors import LakeFSError

DAY = 86400


def lakefs_own_retained(lakefs, repo: str, local_root: str, timeout: float = 120) -> dict[str, str]:
    """lakeFS's own retained commits (commit id -> metarange id), independent of the engine under test: lakeFS's
    prepare_garbage_collection_commits through the SDK, the CSV it writes read straight from its blockstore
    folder."""
    task = lakefs.call("prepare", lakefs.internal.prepare_garbage_collection_commits_async, repo)
    deadline = time.monotonic() + timeout
    while not (status := lakefs.call("status", lakefs.internal.prepare_garbage_collection_commits_status, repo,
                                     task.id)).completed:
        assert time.monotonic() < deadline, "lakeFS did not prepare its GC commits in time"
        time.sleep(0.1)
    assert not status.error, status.error
    location = status.result.gc_commits_location.removeprefix("local://")
    path = Path(location if location.endswith(".csv") else f"{location.rstrip('/')}/commits.csv")
    assert path.is_relative_to(local_root), (path, local_root)
    rows = csv.DictReader(path.read_text().splitlines())
    return {r["commit_id"]: r["metarange_id"] for r in rows if r["expired"] == "false"}


def rules(lakefs, repo, default, **branches):
    lakefs.call("rules", lakefs.repositories.set_gc_rules, repo, lakefs_sdk.GarbageCollectionRules(
        default_retention_days=default,
        branches=[lakefs_sdk.GarbageCollectionRule(branch_id=b, retention_days=d) for b, d in branches.items()]))


def random_history(lakefs, repo, rng: random.Random) -> None:
    """Branches, backdated commits, overwrites, deletes, merges, reverts, tags, a deleted branch, staged objects."""
    now = int(time.time())
    paths = [f"p{i}.txt" for i in range(6)]
    for p in paths:
        upload(lakefs, repo, "main", p, p.encode())
    commit(lakefs, repo, "main", "base", date=now - 40 * DAY)
    branches = ["main"]
    for day in sorted(rng.sample(range(1, 39), 12), reverse=True):
        b = rng.choice(branches)
        op = rng.random()
        if op < 0.2 and len(branches) < 4:
            name = f"b{len(branches)}"
            create_branch(lakefs, repo, name, b)
            branches.append(name)
            continue
        if op < 0.3:
            lakefs.call("delete", lakefs.objects.delete_object, repo, b, rng.choice(paths))
        for _ in range(rng.randint(1, 3)):
            upload(lakefs, repo, b, rng.choice(paths), f"{day}-{rng.random()}".encode())
        try:
            commit(lakefs, repo, b, f"day {day}", date=now - day * DAY)
        except LakeFSError:
            pass
    if len(branches) > 1:
        try:
            lakefs.call("merge", lakefs.refs.merge_into_branch, repo, branches[1], "main")
        except LakeFSError:
            pass
    lakefs.call("tag", lakefs.tags.create_tag, repo, lakefs_sdk.TagCreation(id="v1", ref="main"))
    if len(branches) > 2:
        lakefs.call("delete branch", lakefs.branches.delete_branch, repo, branches[-1])
    upload(lakefs, repo, "main", "staged-only.txt", b"staged")


def key_of(address: str, repo: str) -> str | None:
    """Independent of the code under test: the part after the namespace's folder name."""
    if "://" not in address:
        return address
    marker = f"/{repo}/"
    return address.split(marker, 1)[1] if marker in address else None


def reachable_through_api(lakefs, repo, refs: set[str]) -> set[str]:
    keys = set()
    for ref in refs:
        for obj in lakefs.paginate("list", lakefs.objects.list_objects, repo, ref):
            if (k := key_of(obj.physical_address, repo)) is not None:
                keys.add(k)
    return keys


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_retained_contains_lakefs_and_deleted_matches_the_api(lakefs, gc, repo, namespace, local_root, seed):
    random_history(lakefs, repo, random.Random(seed))
    rules(lakefs, repo, 7, main=14)
    theirs = set(lakefs_own_retained(lakefs, repo, local_root))
    marked = gc.mark(repo, now=datetime.now(UTC), min_age=timedelta(0), dry_run=True)
    assert theirs <= marked.retained and marked.lakefs_retained == theirs
    # Whatever we keep beyond lakeFS, the seed's rule keeps, for a reason it names (no cleaning policies here).
    extra = marked.retained - theirs
    assert all(marked.why[c].startswith(("branch ", "dangling leaf ")) for c in extra), {
        c: marked.why.get(c) for c in extra}
    print(f"seed {seed}: kept beyond lakeFS: {sorted((c[:12], marked.why[c]) for c in extra)}")
    branches = {b for b, _ in lakefs.branch_heads(repo, show_hidden=True)}
    kept = reachable_through_api(lakefs, repo, marked.retained | branches)
    listed = {o.key for o in namespace.list_data() if o.key.startswith("data/")}
    expected = listed - kept
    assert {o.key for o in marked.deleted} == expected
    assert marked.summary.num_deleted_objects == len(expected)


def fork_base_history(lakefs, repo, variant: int) -> dict[str, str]:
    """Trunks t<k>: x (40 d) <- y (30 d) <- z (1 d), kept 10 days (z, and y as the HEAD 10 days ago); features
    f<k> forked at x with one commit (2 d), kept 7 days, so x is f<k>'s HEAD as of 7 days ago."""
    now = int(time.time())
    bases = {}
    for k in range(3):
        trunk, feature = f"t{k}", f"f{k}"
        create_branch(lakefs, repo, trunk, "main")
        upload(lakefs, repo, trunk, "a.txt", f"{k}-x".encode())
        base = commit(lakefs, repo, trunk, f"x{k}", date=now - 40 * DAY).id
        for label, days in (("y", 30), ("z", 1)):
            upload(lakefs, repo, trunk, "a.txt", f"{k}-{label}".encode())
            commit(lakefs, repo, trunk, f"{label}{k}", date=now - days * DAY)
        create_branch(lakefs, repo, feature, base)
        upload(lakefs, repo, feature, "f.txt", f"{k}-{variant}".encode())
        commit(lakefs, repo, feature, f"feature {k} variant {variant}", date=now - 2 * DAY)
        bases[base] = feature
    rules(lakefs, repo, 7, **{f"t{k}": 10 for k in range(3)})
    return bases


def test_commits_kept_beyond_lakefs_are_named(lakefs, gc, lakefs_server, local_root):
    """lakefs-facts §8: lakeFS's walks run in commit-id order and stop before a commit that another walk with an
    equal or longer retention reached first, so a branch forked from an old commit can lose its fork base, which
    the seed's rule keeps as that branch's HEAD as of N days ago. Whether lakeFS drops it depends on the commit
    ids, so fresh repositories are built until it does; every commit we keep beyond lakeFS must be such a base."""
    seen_extra: list[str] = []
    for variant in range(6):
        name = f"fork-{variant}-{int(time.time() * 1000) % 10**8}"
        lakefs.call("create", lakefs.repositories.create_repository, lakefs_sdk.RepositoryCreation(
            name=name, storage_namespace=f"local://{name}", default_branch="main"))
        try:
            bases = fork_base_history(lakefs, name, variant)
            marked = gc.mark(name, now=datetime.now(UTC), min_age=timedelta(0), dry_run=True)
            assert marked.lakefs_retained == set(lakefs_own_retained(lakefs, name, local_root))
        finally:
            lakefs.call("delete", lakefs.repositories.delete_repository, name, force=True)
        assert set(bases) <= marked.retained
        extra = marked.retained - marked.lakefs_retained
        # Each extra is a fork base, named by the walk that keeps it: its feature's, or its trunk's (which
        # reaches it only as the commit after its own HEAD 10 days ago, so never).
        assert {c: marked.why.get(c) for c in extra} == {c: f"branch {bases[c]}" for c in extra}
        seen_extra += [bases[c] for c in extra]
        if seen_extra:
            break
    print(f"kept beyond lakeFS after {variant + 1} histories: fork bases of {sorted(seen_extra)}")
    assert seen_extra, "lakeFS kept every fork base in 6 histories: the case of lakefs-facts §8 never arose"


def test_full_run_keeps_every_retained_object_readable(lakefs, gc, repo, namespace, local_root):
    random_history(lakefs, repo, random.Random(9))
    rules(lakefs, repo, 7, main=14)
    summary, marked = gc.run(repo, min_age=timedelta(0))
    assert summary.success and summary.phase == "swept" and summary.swept == summary.num_deleted_objects > 0
    for ref in marked.retained | {b for b, _ in lakefs.branch_heads(repo, show_hidden=True)}:
        for obj in lakefs.paginate("list", lakefs.objects.list_objects, repo, ref):
            assert lakefs.call("get", lakefs.objects.get_object, repo, ref, obj.path) is not None


def test_corrupt_range_fails_the_run_and_deletes_nothing(lakefs, gc, repo, namespace, local_root):
    upload(lakefs, repo, "main", "a.txt", b"v1")
    commit(lakefs, repo, "main", "old", date=int(time.time()) - 30 * DAY)
    upload(lakefs, repo, "main", "a.txt", b"v2")
    commit(lakefs, repo, "main", "new", date=int(time.time()) - 20 * DAY)
    rules(lakefs, repo, 1)
    before = {o.key for o in namespace.list_data()}
    meta = Path(local_root) / repo / "_lakefs"
    for f in meta.iterdir():
        if f.is_file() and len(f.name) == 64:
            f.write_bytes(b"not an sstable" * 10)
    with pytest.raises(GCError) as err:
        gc.run(repo, min_age=timedelta(0))
    assert err.value.reason == "corrupt-metadata"
    assert {o.key for o in namespace.list_data()} == before


def test_namespace_that_cannot_be_read_fails_clearly(lakefs, lakefs_server, repo, namespace, local_root, tmp_path):
    upload(lakefs, repo, "main", "a.txt", b"v1")
    commit(lakefs, repo, "main", "old", date=int(time.time()) - 30 * DAY)
    upload(lakefs, repo, "main", "a.txt", b"v2")
    commit(lakefs, repo, "main", "new", date=int(time.time()) - 20 * DAY)
    rules(lakefs, repo, 1)
    before = {o.key for o in namespace.list_data()}
    elsewhere = Collector(lakefs_server.endpoint, local_root=str(tmp_path / "not-the-blockstore"))
    with pytest.raises(GCError, match="not under the configured local blockstore folder") as err:
        elsewhere.run(repo, min_age=timedelta(0))
    assert err.value.reason == "storage-config"
    assert f"lakeFS keeps it under {local_root}" in str(err.value)  # and says where it is
    assert {o.key for o in namespace.list_data()} == before


class DyingLakeFS:
    """A reverse proxy in front of the real lakeFS that goes away for good at a chosen request: that request's
    connection is dropped unanswered, every later one too, and the port stops accepting (connection refused).
    ``dies_at(method, path, seen)`` picks the request; ``seen`` counts earlier requests by (method, path)."""

    def __init__(self, upstream: str, dies_at) -> None:
        self.upstream = urlsplit(upstream)
        self.dies_at = dies_at
        self.seen: list[tuple[str, str]] = []
        self.dead = threading.Event()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _handle(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = urlsplit(self.path).path
                if proxy.dead.is_set() or proxy.dies_at(self.command, path, proxy.seen):
                    proxy.die()
                    self.close_connection = True
                    return
                proxy.seen.append((self.command, path))
                upstream = http.client.HTTPConnection(proxy.upstream.hostname, proxy.upstream.port, timeout=60)
                try:
                    upstream.request(self.command, self.path, body=body or None,
                                     headers={k: v for k, v in self.headers.items() if k.lower() != "connection"})
                    response = upstream.getresponse()
                    payload = response.read()
                except OSError:  # lakeFS itself is down (a restart): the client sees its connection dropped
                    self.close_connection = True
                    return
                finally:
                    upstream.close()
                self.send_response_only(response.status, response.reason)
                for name, value in response.getheaders():
                    if name.lower() not in ("connection", "transfer-encoding", "content-length"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_DELETE = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def die(self) -> None:
        if not self.dead.is_set():
            self.dead.set()
            threading.Thread(target=lambda: (self.server.shutdown(), self.server.server_close()), daemon=True).start()


def _count(seen, method: str, suffix: str) -> int:
    return sum(1 for m, p in seen if m == method and p.endswith(suffix))


# Where lakeFS goes away: reading the history (the third request), once lakeFS prepared its commits and the
# ranges were read (asking for the staged addresses), and after the plan was written (the sweep's re-check of
# the branch HEADs, the second listing of branches).
DEATHS = {
    "reading history": (lambda method, path, seen: len(seen) == 2, "lakefs-unavailable"),
    "mid mark": (lambda method, path, seen: path.endswith("/gc/prepare_uncommited"), "lakefs-unavailable"),
    "before the sweep": (lambda method, path, seen: method == "GET" and path.endswith("/branches")
                         and _count(seen, "GET", "/branches") == 1, "recheck"),
}


@pytest.mark.parametrize("when", list(DEATHS))
def test_lakefs_unreachable_mid_run_fails_before_anything_is_deleted(lakefs, lakefs_server, repo, namespace,
                                                                     when):
    upload(lakefs, repo, "main", "a.txt", b"v1")
    first = commit(lakefs, repo, "main", "old", date=int(time.time()) - 30 * DAY)
    upload(lakefs, repo, "main", "a.txt", b"v2")
    commit(lakefs, repo, "main", "new", date=int(time.time()) - 20 * DAY)
    rules(lakefs, repo, 1)
    before = {o.key for o in namespace.list_data()}
    dies_at, reason = DEATHS[when]
    proxy = DyingLakeFS(lakefs_server.endpoint, dies_at)
    try:
        with pytest.raises(GCError, match="unreachable") as err:
            Collector(proxy.url).run(repo, min_age=timedelta(0))
    finally:
        proxy.die()
    assert proxy.dead.is_set() and err.value.reason == reason, (err.value.reason, proxy.seen)
    assert {o.key for o in namespace.list_data()} == before
    assert lakefs.call("get", lakefs.objects.get_object, repo, first.id, "a.txt") == b"v1"
    # the same run through lakeFS itself collects the old version: the failure alone saved it
    summary, _ = Collector(lakefs_server.endpoint).run(repo, min_age=timedelta(0))
    assert summary.swept == 1


def test_a_long_retention_is_not_cut_short_by_a_shorter_one_read_first(lakefs, gc, repo, namespace, local_root):
    """'a-feature' (7 days) sorts before 'main' (30 days) and shares main's recent history: reading its line first
    must not stop main's line where the feature's stopped. main's 30-day window and the commit before it are kept
    by the seed's rule itself, not only because lakeFS's own set happens to hold them."""
    now = int(time.time())
    ids = {}
    for name, days in (("m0", 40), ("m1", 25), ("m2", 20), ("m3", 2)):
        upload(lakefs, repo, "main", "a.txt", name.encode())
        ids[name] = commit(lakefs, repo, "main", name, date=now - days * DAY).id
    create_branch(lakefs, repo, "a-feature", "main")
    upload(lakefs, repo, "a-feature", "f.txt", b"f")
    commit(lakefs, repo, "a-feature", "feature", date=now - 1 * DAY)
    rules(lakefs, repo, 7, main=30)
    marked = gc.mark(repo, now=datetime.now(UTC), min_age=timedelta(0), dry_run=True)
    assert {name: marked.why.get(i) for name, i in ids.items()} == {
        "m0": "branch main", "m1": "branch main", "m2": "branch a-feature", "m3": "branch a-feature"}
