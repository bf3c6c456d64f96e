"""The GC's sets against lakeFS itself: retained ⊇ lakeFS's own, deleted = an independent computation through the
API; and failures (corrupt metadata, unreadable namespace, lakeFS down) delete nothing."""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import lakefs_sdk
import pytest

from tests.integration.conftest import commit, create_branch, upload
from workers.gc.run import GCError, lakefs_retained, mark, run
from workers.gc.storage import namespace_uris, open_namespace
from workers.lakefs.client import make_lakefs_for
from workers.lakefs.errors import LakeFSError

DAY = 86400


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
def test_retained_contains_lakefs_and_deleted_matches_the_api(lakefs, repo, namespace, local_root, seed):
    random_history(lakefs, repo, random.Random(seed))
    rules(lakefs, repo, 7, main=14)
    ns_uris = namespace_uris(namespace, local_root=local_root)
    theirs = set(lakefs_retained(lakefs, namespace, ns_uris, repository_id=repo))
    marked = mark(lakefs, namespace, repo, now=datetime.now(UTC), min_age=timedelta(0), local_root=local_root,
                  dry_run=True)
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


def test_commits_kept_beyond_lakefs_are_named(lakefs, lakefs_server, local_root):
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
            marked = mark(lakefs, open_namespace(f"local://{name}", local_root=local_root), name,
                          now=datetime.now(UTC), min_age=timedelta(0), local_root=local_root, dry_run=True)
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


def test_full_run_keeps_every_retained_object_readable(lakefs, repo, namespace, local_root):
    random_history(lakefs, repo, random.Random(9))
    rules(lakefs, repo, 7, main=14)
    summary, marked = run(lakefs, namespace, repo, min_age=timedelta(0), local_root=local_root)
    assert summary.success
    for ref in marked.retained | {b for b, _ in lakefs.branch_heads(repo, show_hidden=True)}:
        for obj in lakefs.paginate("list", lakefs.objects.list_objects, repo, ref):
            assert lakefs.call("get", lakefs.objects.get_object, repo, ref, obj.path) is not None


def test_corrupt_range_fails_the_run_and_deletes_nothing(lakefs, repo, namespace, local_root):
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
        run(lakefs, namespace, repo, min_age=timedelta(0), local_root=local_root)
    assert err.value.reason == "corrupt-metadata"
    assert {o.key for o in namespace.list_data()} == before


def test_namespace_that_cannot_be_read_fails_clearly(lakefs, repo, tmp_path):
    upload(lakefs, repo, "main", "a.txt", b"v1")
    commit(lakefs, repo, "main")
    rules(lakefs, repo, 1)
    elsewhere = open_namespace(f"local://{repo}", local_root=str(tmp_path / "not-the-blockstore"))
    with pytest.raises(GCError) as err:
        run(lakefs, elsewhere, repo, min_age=timedelta(0), local_root=str(tmp_path))
    assert err.value.reason == "storage-read"


def test_lakefs_unreachable_mid_mark_fails_before_any_sweep(lakefs, repo, namespace, local_root):
    upload(lakefs, repo, "main", "a.txt", b"v1")
    commit(lakefs, repo, "main", "old", date=int(time.time()) - 30 * DAY)
    upload(lakefs, repo, "main", "a.txt", b"v2")
    commit(lakefs, repo, "main", "new", date=int(time.time()) - 20 * DAY)
    rules(lakefs, repo, 1)
    before = {o.key for o in namespace.list_data()}

    class DiesAfter:
        """The real client, whose lakeFS 'goes away' after a few calls."""

        def __init__(self, real, calls):
            self._real, self._left = real, calls

        def __getattr__(self, name):
            return getattr(self._real, name)

        def call(self, what, fn, *a, **kw):
            self._left -= 1
            if self._left < 0:
                dead = make_lakefs_for("http://127.0.0.1:9", "a", "b", timeout=2)
                return dead.call(what, dead.repositories.list_repositories)
            return self._real.call(what, fn, *a, **kw)

        def paginate(self, what, fn, *a, **kw):
            yield from self._real.paginate(what, fn, *a, **kw)

        def branch_heads(self, *a, **kw):
            return self._real.branch_heads(*a, **kw)

    with pytest.raises(LakeFSError, match="unreachable"):
        run(DiesAfter(lakefs, 2), namespace, repo, min_age=timedelta(0), local_root=local_root)
    assert {o.key for o in namespace.list_data()} == before


def test_a_long_retention_is_not_cut_short_by_a_shorter_one_read_first(lakefs, repo, namespace, local_root):
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
    marked = mark(lakefs, namespace, repo, now=datetime.now(UTC), min_age=timedelta(0), local_root=local_root,
                  dry_run=True)
    assert {name: marked.why.get(i) for name, i in ids.items()} == {
        "m0": "branch main", "m1": "branch main", "m2": "branch a-feature", "m3": "branch a-feature"}
