"""lakeFS and fsspec on real object-store servers on loopback: lakeFS's local store, versitygw (S3), Azurite and
fake-gcs-server. A repository lives on each; fsspec with the store's options lists, reads, writes and deletes in
its namespace, and lakeFS then answers 410 for what was deleted. A throttling proxy in front of each cloud store
answers batch deletes with the store's "slow down", and versitygw's own --max-requests does under load."""

from __future__ import annotations

import re
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import lakefs_sdk
import pytest
from botocore.exceptions import ClientError

from tests.integration.conftest import commit
from tests.services import Store, ThrottlingProxy, VersityGW
from workers.shared.lakefs.client import LakeFS
from workers.shared.lakefs.errors import LakeFSError

KINDS = ["local", "s3", "azure", "gcs"]
CLOUDS = ["s3", "azure", "gcs"]
DAY = 86400


def new_repo(lakefs: LakeFS, store: Store, prefix: str) -> tuple[str, str]:
    repo = f"{prefix}-{uuid.uuid4().hex[:8]}"
    namespace = store.namespace(repo)
    lakefs.call("create repository", lakefs.repositories.create_repository,
                lakefs_sdk.RepositoryCreation(name=repo, storage_namespace=namespace, default_branch="main"))
    return repo, namespace


def read(lakefs: LakeFS, repo: str, path: str) -> bytes | int:
    """The object's bytes through lakeFS's API, or the HTTP status it answered."""
    try:
        return bytes(lakefs.call("get object", lakefs.objects.get_object, repo, "main", path))
    except LakeFSError as exc:
        return exc.status


def key_of(lakefs: LakeFS, repo: str, path: str) -> str:
    """The object's key inside the namespace (``data/<slice>/<id>``), whatever form of address lakeFS shows."""
    address = lakefs.call("stat object", lakefs.objects.stat_object, repo, "main", path).physical_address
    return "data/" + address.rsplit("/data/", 1)[1]


@pytest.mark.parametrize("kind", KINDS)
def test_lakefs_and_fsspec_share_the_namespace(kind, store_of, lakefs_of):
    store, lakefs = store_of(kind), lakefs_of(kind)
    repo, namespace = new_repo(lakefs, store, "roundtrip")
    files = {f"dir/f{i}.txt": f"content {i}".encode() for i in range(6)}
    for path, data in files.items():
        lakefs.upload(repo, "main", path, data=data)
    head = commit(lakefs, repo, "main", "six files")
    assert {path: read(lakefs, repo, path) for path in files} == files

    fs = store.filesystem()
    objects = {store.fsspec_path(namespace, key_of(lakefs, repo, path)): path for path in files}
    assert sorted(fs.find(store.fsspec_path(namespace, "data"))) == sorted(objects)
    # lakeFS's metadata: the commit's metarange (an SSTable named by its id) and the marker lakeFS writes first.
    assert len(fs.cat(store.fsspec_path(namespace, f"_lakefs/{head.meta_range_id}"))) > 0
    assert fs.exists(store.fsspec_path(namespace, "_lakefs/dummy"))
    probe = store.fsspec_path(namespace, "_lakefs/janitor-probe.txt")  # flat: "file" makes no folders
    fs.pipe(probe, b"written by the janitor")
    assert store.filesystem().cat(probe) == b"written by the janitor"

    doomed = sorted(objects)[:4]
    fs.rm(doomed)  # one call: one DeleteObjects on S3; adlfs and gcsfs (on an emulator) send a DELETE per object
    left = store.filesystem().find(store.fsspec_path(namespace, "data"))
    assert sorted(left) == sorted(set(objects) - set(doomed))
    for obj, path in objects.items():
        assert read(lakefs, repo, path) == (410 if obj in doomed else files[path])


@pytest.mark.parametrize("kind", KINDS)
def test_backdate_an_object(kind, store_of, lakefs_of):
    store, lakefs = store_of(kind), lakefs_of(kind)
    repo, namespace = new_repo(lakefs, store, "backdate")
    lakefs.upload(repo, "main", "old.txt", data=b"old")
    key = key_of(lakefs, repo, "old.txt")
    if kind == "azure":
        with pytest.raises(NotImplementedError):
            store.backdate(key, namespace, 30 * DAY)
        return
    store.backdate(key, namespace, 30 * DAY)
    modified = store.filesystem().modified(store.fsspec_path(namespace, key))
    assert abs(modified.timestamp() - (time.time() - 30 * DAY)) < 60
    assert read(lakefs, repo, "old.txt") == b"old"  # the store still serves it (GCS: the edited metadata parses)


def batch_delete(store: Store, paths: list[str], endpoint: str) -> None:
    """The store's own batch delete of ``paths`` through ``endpoint``, retried as its client library does (or by
    hand, where the library has no batch against this server)."""
    if store.kind == "s3":
        store.filesystem(endpoint).rm(paths)  # s3fs: one DeleteObjects; botocore and s3fs retry SlowDown
    elif store.kind == "azure":
        from azure.storage.blob import LinearRetry  # noqa: PLC0415

        # The SDK retries 503 by itself; its default back-off (15 s, then 15+3^n) is shortened for the test.
        retry = LinearRetry(backoff=0.2, random_jitter_range=0)
        with store.container_client(endpoint=endpoint, retry_policy=retry) as container:
            assert all(r.status_code == 202 for r in container.delete_blobs(*[p.split("/", 1)[1] for p in paths]))
    else:
        names = [p.split("/", 1)[1] for p in paths]
        for _ in range(5):
            response = store.batch_delete(store.bucket, names, endpoint)
            if response.status_code not in (429, 503):
                break
        assert response.status_code == 200
        assert re.findall(r"HTTP/1\.1 (\d+)", response.text) == ["200"] * len(names)  # fake-gcs: 200, not 204


@pytest.mark.parametrize("kind", CLOUDS)
def test_proxy_forwards_and_throttles_batch_deletes(kind, store_of):
    store = store_of(kind)
    namespace = store.namespace(f"proxy-{uuid.uuid4().hex[:8]}")
    proxy = ThrottlingProxy(store.endpoint, kind, first=2).start()
    try:
        fs = store.filesystem(proxy.url)  # signed requests, bodies and listings all through the proxy
        paths = [store.fsspec_path(namespace, f"data/obj{i}") for i in range(5)]
        fs.pipe({path: f"payload {i}".encode() * 1000 for i, path in enumerate(paths)})
        assert sorted(fs.find(store.fsspec_path(namespace, "data"))) == paths
        assert fs.cat(paths[3]) == b"payload 3" * 1000
        assert fs.info(paths[3])["size"] == 9000

        batch_delete(store, paths, proxy.url)
        assert (proxy.throttled, proxy.matched) == (2, 3)
        assert store.filesystem().find(store.fsspec_path(namespace, "data")) == []
    finally:
        proxy.cleanup()


def test_gcsfs_retries_throttled_deletes_by_itself(store_of):
    """gcsfs sends an emulator one DELETE per object; it retries 429 itself (after 1-2 s, then 2-3 s, ...)."""
    store = store_of("gcs")
    namespace = store.namespace(f"gcsfs-retry-{uuid.uuid4().hex[:8]}")
    proxy = ThrottlingProxy(store.endpoint, "gcs", first=2, match="delete").start()
    try:
        fs = store.filesystem(proxy.url)
        paths = [store.fsspec_path(namespace, f"data/obj{i}") for i in range(3)]
        fs.pipe({path: b"x" for path in paths})
        fs.rm(paths)
        assert (proxy.throttled, proxy.matched) == (2, 5)
        assert store.filesystem().find(store.fsspec_path(namespace, "data")) == []
    finally:
        proxy.cleanup()


def test_proxy_throttles_every_kth_matching_request(store_of):
    store = store_of("s3")
    store.namespace("every")
    proxy = ThrottlingProxy(store.endpoint, "s3", every=3, match=lambda method, target: method == "HEAD").start()
    try:
        client = store.client(endpoint=proxy.url, retries={"total_max_attempts": 1})
        client.put_object(Bucket=store.bucket, Key="every/x", Body=b"x")
        answers = []
        for _ in range(6):
            try:
                client.head_object(Bucket=store.bucket, Key="every/x")
                answers.append(200)
            except ClientError as exc:
                answers.append(exc.response["ResponseMetadata"]["HTTPStatusCode"])
        assert answers == [200, 200, 503, 200, 200, 503]
        assert (proxy.requests, proxy.matched, proxy.throttled) == (7, 6, 2)
    finally:
        proxy.cleanup()


def test_versitygw_max_requests_answers_slowdown_under_load():
    """With the client's retries off, concurrent DeleteObjects (what a sweep sends) trip --max-requests 1 often
    (8-15 of 24 on 12 threads here); with botocore's default retries most are hidden. A few rounds make it certain."""
    store = VersityGW(max_requests=1).start()
    try:
        store.create_bucket("load")
        client = store.client(retries={"total_max_attempts": 1}, max_pool_connections=12)

        def delete(i: int) -> tuple[int, str]:
            try:  # absent keys: answered as Deleted, like present ones
                client.delete_objects(Bucket="load", Delete={"Objects": [{"Key": f"k{i}-{j}"} for j in range(100)]})
                return 200, ""
            except ClientError as exc:
                return exc.response["ResponseMetadata"]["HTTPStatusCode"], exc.response["Error"]["Code"]

        answers: list[tuple[int, str]] = []
        with ThreadPoolExecutor(12) as pool:
            for _ in range(5):
                answers += pool.map(delete, range(24))
                if (503, "SlowDown") in answers:
                    break
        assert (503, "SlowDown") in answers
        assert set(answers) <= {(200, ""), (503, "SlowDown")}
    finally:
        store.cleanup()


def test_the_namespace_reads_and_lists_s3_through_a_plain_client_as_s3fs_does(store_of):
    """Namespace's S3 reads and its _lakefs/ listing go through one plain botocore client (cheaper per request
    than s3fs's event loop); they must see exactly what s3fs sees, missing objects and buckets included."""
    import json  # noqa: PLC0415

    from spark_jobs.engine.stores import StorageConfig, StorageError, open_namespace  # noqa: PLC0415

    store = store_of("s3")
    namespace = store.namespace(f"plain-{uuid.uuid4().hex[:8]}")
    fs = store.filesystem()
    files = {f"_lakefs/{uuid.uuid4().hex}": bytes([i]) * (i * 97) for i in range(1, 40)}
    files["_lakefs/empty"] = b""
    files["_lakefs/retention/gc/commits/run/commits.csv"] = b"commit_id,expired\n"  # below: not "directly under"
    for key, data in files.items():
        fs.pipe(store.fsspec_path(namespace, key), data)
    options = json.dumps({"s3": store.fsspec_options()})
    plain = open_namespace(StorageConfig(namespace, None, options, 8))
    assert plain.s3 is not None
    # a profile has no plain equivalent: s3fs does every request (the profile does not exist: nothing is sent)
    assert open_namespace(StorageConfig(namespace, None, json.dumps({"s3": {**store.fsspec_options(),
                                                                             "profile": "x"}}), 8)).s3 is None
    listed = {e["name"].rsplit("/", 1)[-1]: e["size"] for e in fs.ls(store.fsspec_path(namespace, "_lakefs"),
                                                                       detail=True, refresh=True)
              if e["type"] == "file"}
    sizes = plain.metadata_sizes()
    # the client's listing (ElementTree, not botocore's parser) pages as botocore does: 7 objects a page here,
    # each with its time as s3fs gives it
    bucket, _, folder = store.fsspec_path(namespace, "_lakefs/").partition("/")
    pages = list(plain.s3.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix=folder, Delimiter="/", PaginationConfig={"PageSize": 7}))
    assert len(pages) == 6 and all(p["IsTruncated"] for p in pages[:-1]) and not pages[-1]["IsTruncated"]
    assert {c["Key"][len(folder):]: c["Size"] for p in pages for c in p["Contents"]} == listed
    times = {e["name"].rsplit("/", 1)[-1]: e["LastModified"] for e in fs.ls(
        store.fsspec_path(namespace, "_lakefs"), detail=True, refresh=True) if e["type"] == "file"}
    assert {c["Key"][len(folder):]: c["LastModified"] for p in pages for c in p["Contents"]} == times
    assert f"{folder}retention/" in [c["Prefix"] for p in pages for c in p["CommonPrefixes"]]
    assert sizes == listed == {k.rsplit("/", 1)[-1]: len(v) for k, v in files.items() if k.count("/") == 1}
    for key, data in files.items():
        assert plain.read(key) == data
    with pytest.raises(StorageError, match="does not exist"):
        plain.read("_lakefs/no-such-file")
    # reads and writes of several files at once: the same bytes as s3fs sees, the first failure raised
    assert plain.read_many(sorted(files)) == files
    with pytest.raises(StorageError, match="no-such-file does not exist"):
        plain.read_many([*sorted(files)[:5], "_lakefs/no-such-file"])
    written = {f"_lakefs/written/{i}": uuid.uuid4().bytes * i for i in range(12)}
    plain.write_many(written)
    plain.write("_lakefs/written/one", b"one")
    assert {k: fs.cat_file(store.fsspec_path(namespace, k)) for k in [*written, "_lakefs/written/one"]} == {
        **written, "_lakefs/written/one": b"one"}
    with pytest.raises(StorageError, match="only under _lakefs/"):
        plain.write_many({"_lakefs/written/ok": b"", "data/not-here": b"x"})
    assert not fs.exists(store.fsspec_path(namespace, "data/not-here"))
    # the sweep's listing: every data object, by slice and at the root, never _lakefs/ nor lakeFS's dummy
    data = {f"data/g{i % 3}/sub/{uuid.uuid4().hex}": b"d" * i for i in range(25)}
    data.update({f"legacy-{i}": b"r" * i for i in range(4)})
    for key, body in {**data, "dummy": b"", "data/g0/": b""}.items():
        fs.pipe(store.fsspec_path(namespace, key), body)
    through_s3fs = open_namespace(StorageConfig(namespace, None, options, 8))
    through_s3fs.s3 = None
    assert plain.list_units() == through_s3fs.list_units()
    ours = sorted(plain.list_data(), key=lambda o: o.key)
    theirs = sorted(through_s3fs.list_data(), key=lambda o: o.key)
    assert ours == theirs
    assert {(o.key, o.size) for o in ours} == {(k, len(v)) for k, v in data.items()}
    elsewhere = open_namespace(StorageConfig(f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/repo", None, options, 8))
    assert elsewhere.metadata_sizes() == {}
    with pytest.raises(StorageError, match="does not exist"):
        elsewhere.read("_lakefs/x")
    with pytest.raises(StorageError, match="NoSuchBucket"):
        elsewhere.write("_lakefs/x", b"x")
    # the store gone: a clear, classified failure after the throttle's retries, not a botocore traceback
    gone = open_namespace(StorageConfig(namespace, None, json.dumps({"s3": {
        **store.fsspec_options("http://127.0.0.1:9"), "config_kwargs": {"connect_timeout": 1, "read_timeout": 1}}}),
        8))
    with pytest.raises(StorageError) as failed:
        gone.read(next(iter(files)))
    assert failed.value.reason == "storage-unavailable"
