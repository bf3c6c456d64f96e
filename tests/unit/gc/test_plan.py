"""The plan never proposes metadata, objects newer than the cutoff or kept objects; storage refuses metadata."""

from __future__ import annotations

import pytest

from spark_jobs.core.addresses import FULL, RELATIVE, relative_key
from spark_jobs.core.plan import StoredObject, plan_deletions
from spark_jobs.engine.stores import StorageConfig, StorageError, open_namespace

OLD, CUTOFF, NEW = 100.0, 200.0, 300.0


def test_only_old_unreferenced_data_objects_are_planned():
    objects = [
        StoredObject("_lakefs/4f0c", 10, OLD),                       # metadata: never
        StoredObject("_lakefs/retention/gc/unified/r/summary.json", 1, OLD),
        StoredObject("dummy", 1, OLD),                               # lakeFS's namespace marker
        StoredObject("data/gabc/kept", 5, OLD),                      # reachable
        StoredObject("data/gabc/fresh", 5, NEW),                     # newer than the cutoff
        StoredObject("data/gabc/garbage", 7, OLD),
        StoredObject("legacy-object", 3, OLD),                       # legacy flat layout at the root
        StoredObject("some/other/prefix/x", 3, OLD),                 # neither data/ nor the root: untouched
    ]
    deleted, summary = plan_deletions(objects, {"data/gabc/kept"}, CUTOFF)
    assert [o.key for o in deleted] == ["data/gabc/garbage", "legacy-object"]
    assert (summary.kept, summary.too_new, summary.deleted_bytes) == (1, 1, 10)


def test_addresses_outside_the_namespace_are_never_mapped_in():
    ns = ("s3://bucket/repo",)
    assert relative_key("data/g/x", RELATIVE, ns) == "data/g/x"
    assert relative_key("s3://bucket/repo/data/g/x", FULL, ns) == "data/g/x"
    assert relative_key("s3://bucket/repo-other/data/g/x", FULL, ns) is None  # a sibling prefix is outside
    assert relative_key("s3://imports/data/g/x", FULL, ns) is None


def test_storage_refuses_to_delete_metadata_or_leave_the_namespace(tmp_path):
    root = tmp_path / "ns"
    (root / "_lakefs").mkdir(parents=True)
    (root / "_lakefs" / "abc").write_bytes(b"m")
    ns = open_namespace(StorageConfig("local://ns", str(tmp_path)))
    assert ns.path("_lakefs/abc") == str(root / "_lakefs" / "abc")  # the file checked below is the one it sees
    with pytest.raises(StorageError, match="metadata"):
        ns.delete(["_lakefs/abc"])
    with pytest.raises(StorageError, match="leaves the namespace"):
        ns.delete(["../outside"])
    with pytest.raises(StorageError, match="only under _lakefs/"):
        ns.write("data/g/x", b"no")
    assert (root / "_lakefs" / "abc").exists()


def test_by_path_prefix_counts_objects_and_bytes_per_folder_prefix():
    from spark_jobs.core.plan import NO_COMMIT, StoredObject, by_path_prefix  # noqa: PLC0415

    deleted = [StoredObject("data/s/1", 10, 0), StoredObject("data/s/2", 5, 0), StoredObject("data/s/3", 1, 0),
               StoredObject("data/s/4", 7, 0)]
    paths = {"data/s/1": "tables/a/year=2026/p.parquet", "data/s/2": "tables/b/q.parquet", "data/s/3": "top.csv"}
    assert by_path_prefix(deleted, paths, 1) == {"tables/": [2, 15], "(top level)": [1, 1], NO_COMMIT: [1, 7]}
    assert by_path_prefix(deleted, paths, 3) == {"tables/a/year=2026/": [1, 10], "tables/b/": [1, 5],
                                                 "(top level)": [1, 1], NO_COMMIT: [1, 7]}
