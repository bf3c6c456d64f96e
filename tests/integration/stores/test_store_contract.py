"""The store contract: the same cases against every store's ``Namespace`` (spark_jobs/engine/stores/), each on its
real server (lakeFS's local store: a folder; S3: versitygw; Azure: Azurite; GCS: fake-gcs-server). What a case
puts in place or checks afterwards goes through the store's own client (``Store.filesystem``), never through the
namespace under test. Faults come from a FaultProxy in front of a cloud store (throttling answers, stalls past the
time-out, dropped connections, the store gone); a folder has no network, so those cases run on the three clouds.

Each case: list each slice and the root (``_lakefs/`` and ``dummy`` skipped), sizes and modification times, read
and write (only under ``_lakefs/``), missing keys and an empty namespace, batch deletes (batches, partial
failures), throttling, time-outs and a store gone, keys with odd characters, and a sibling prefix sharing the
namespace's name (``…/repo`` never lists nor deletes ``…/repo2/…``). The listing page by page (units longer than a
page, a throttled page): test_store_contract_pages.py."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from spark_jobs.engine.stores import STORES, Namespace, StorageConfig, StorageError, open_namespace
from tests.services import FaultProxy, Store, throttle_answer

KINDS = ["local", "s3", "azure", "gcs"]
CLOUDS = ["s3", "azure", "gcs"]
# LAKEFS_JANITOR_FAULT_SEED fixes the seed of the randomized fault case (default: random, printed on failure)
SEED = int(os.environ.get("LAKEFS_JANITOR_FAULT_SEED", str(random.randrange(1 << 30))))
DAY = 86400
# Each store's request time-out, as workers/gc/store_options.py sets it from GC__STORE_TIMEOUT_SECONDS (here 1 s)
TIMEOUT_OPTIONS = {"s3": {"config_kwargs": {"connect_timeout": 1, "read_timeout": 1}},
                   "azure": {"connection_timeout": 1, "read_timeout": 1}, "gcs": {"requests_timeout": 1}}


@dataclass
class Place:
    """A namespace on a store, and the store's own client to put objects in it and see what is left."""

    store: Store
    namespace: str

    def open(self, endpoint: str | None = None, *, max_in_flight: int = 8, **options) -> Namespace:
        """The namespace under test; ``endpoint``: through a proxy; ``max_in_flight``: a throttle of its own (the
        process shares one per store and cap, and a fault case lowers its rate)."""
        if self.store.kind == "local":
            return open_namespace(StorageConfig(self.namespace, str(self.store.root), None, max_in_flight))
        every = {self.store.kind: {**self.store.fsspec_options(endpoint), **options}}
        return open_namespace(StorageConfig(self.namespace, None, json.dumps(every), max_in_flight))

    def path(self, key: str) -> str:
        return self.store.fsspec_path(self.namespace, key)

    def put(self, files: dict[str, bytes]) -> None:
        if self.store.kind == "local":  # fsspec's "file" makes no folders
            for key, data in files.items():
                Path(self.path(key)).parent.mkdir(parents=True, exist_ok=True)
                Path(self.path(key)).write_bytes(data)
            return
        self.store.filesystem().pipe({self.path(key): data for key, data in files.items()})

    def listed(self) -> set[str]:
        """Every object's key in the namespace (``_lakefs/`` included), as the store's own client lists them."""
        root = self.path("").rstrip("/") + "/"
        if self.store.kind == "local":
            return {str(Path(folder, name))[len(root):] for folder, _, names in os.walk(root) for name in names}
        return {found[len(root):] for found in self.store.filesystem().find(root)}

    def cat(self, key: str) -> bytes:
        return self.store.filesystem().cat_file(self.path(key))


def new_place(store: Store) -> Place:
    return Place(store, store.namespace(f"contract-{uuid.uuid4().hex[:8]}"))


@pytest.fixture(params=KINDS)
def place(request, store_of) -> Place:
    return new_place(store_of(request.param))


@pytest.fixture(params=CLOUDS)
def cloud_place(request, store_of) -> Place:
    """A place on a store with a network to throttle, time out or go away."""
    return new_place(store_of(request.param))


def sizes(objects) -> dict[str, int]:
    return {o.key: o.size for o in objects}


def test_lists_each_slice_and_the_root_but_not_metadata_nor_dummy(place):
    place.put({"data/aa/one": b"1" * 10, "data/aa/sub/two": b"2" * 20, "data/bb/three": b"3" * 30,
               "legacy-a": b"a" * 4, "legacy-b": b"", "dummy": b"d", "other/deep": b"o",
               "_lakefs/dummy": b"x", "_lakefs/abc": b"r" * 7, "_lakefs/retention/gc/run/x.csv": b"c"})
    ns = place.open()
    assert ns.list_units() == ["data/aa/", "data/bb/", ""]
    assert sizes(ns.list_unit("data/aa/")) == {"data/aa/one": 10, "data/aa/sub/two": 20}
    assert sizes(ns.list_unit("data/bb/")) == {"data/bb/three": 30}
    # the root is the legacy flat layout: its files only, never lakeFS's dummy, _lakefs/ or a folder's contents
    assert sizes(ns.list_unit("")) == {"legacy-a": 4, "legacy-b": 0}
    assert ns.list_unit("data/zz/") == []
    assert sorted(o.key for o in ns.list_data()) == ["data/aa/one", "data/aa/sub/two", "data/bb/three",
                                                     "legacy-a", "legacy-b"]


def test_sizes_and_modification_times(place):
    before = time.time()
    place.put({"data/aa/big": os.urandom(1 << 20), "data/aa/small": b"s", "data/bb/old": b"o" * 3})
    after = time.time()
    ns = place.open()
    listed = {o.key: o for o in ns.list_data()}
    assert sizes(listed.values()) == {"data/aa/big": 1 << 20, "data/aa/small": 1, "data/bb/old": 3}
    # stores date objects to the second (S3, Azure): within a few seconds of the write, on the same clock
    assert all(before - 5 <= o.mtime <= after + 5 for o in listed.values()), listed
    try:
        place.store.backdate("data/bb/old", place.namespace, 30 * DAY)
    except NotImplementedError:  # Azurite keeps Last-Modified to itself: the case above is all it can check
        return
    old = {o.key: o for o in ns.list_unit("data/bb/")}["data/bb/old"]
    assert abs(old.mtime - (time.time() - 30 * DAY)) < 60
    # asked for one by one (an incremental run's HEADs): what the listing says of each, to the second
    asked = {o.key: o for o in ns.stat(["data/aa/big", "data/bb/old", "data/bb/gone"])}
    assert sizes(asked.values()) == {"data/aa/big": 1 << 20, "data/bb/old": 3}
    assert abs(asked["data/bb/old"].mtime - old.mtime) < 1


def test_reads_anything_and_writes_only_metadata(place):
    rng = bytes(range(256)) * 4
    place.put({"_lakefs/range-1": rng, "_lakefs/dummy": b"", "data/aa/obj": b"data"})
    ns = place.open()
    assert ns.read("_lakefs/range-1") == rng
    assert ns.read("data/aa/obj") == b"data"
    assert ns.read_many(["_lakefs/range-1", "data/aa/obj", "_lakefs/dummy"]) == {
        "_lakefs/range-1": rng, "data/aa/obj": b"data", "_lakefs/dummy": b""}
    ns.write("_lakefs/janitor/summary.json", b"{}")
    ns.write("_lakefs/janitor/summary.json", b'{"run": 2}')  # overwritten, whole
    ns.write_many({f"_lakefs/janitor/part-{i}": bytes([i]) * i for i in range(5)})
    assert place.cat("_lakefs/janitor/summary.json") == b'{"run": 2}'
    assert {i: place.cat(f"_lakefs/janitor/part-{i}") for i in range(5)} == {i: bytes([i]) * i for i in range(5)}
    assert ns.list_metadata("_lakefs/janitor/") == ["_lakefs/janitor/part-0", "_lakefs/janitor/part-1",
                                                    "_lakefs/janitor/part-2", "_lakefs/janitor/part-3",
                                                    "_lakefs/janitor/part-4", "_lakefs/janitor/summary.json"]
    # directly under _lakefs/ only: the range files and metaranges a mark reads, not what the janitor wrote below
    assert ns.metadata_sizes() == {"range-1": 1024, "dummy": 0}
    with pytest.raises(StorageError, match="only under _lakefs/"):
        ns.write("data/aa/new", b"x")
    with pytest.raises(StorageError, match="only under _lakefs/"):
        ns.write_many({"_lakefs/janitor/ok": b"", "dummy": b"x"})
    with pytest.raises(StorageError, match="lists only lakeFS's metadata"):
        ns.list_metadata("data/")
    for outside in ("../elsewhere/_lakefs/x", "/_lakefs/x", "_lakefs/../../x", "s3://other/_lakefs/x"):
        with pytest.raises(StorageError, match="leaves the namespace"):
            ns.write(outside, b"x")
    with pytest.raises(StorageError, match="refusing to delete metadata"):
        ns.delete(["data/aa/obj", "_lakefs/range-1"])
    # nothing written where it was refused, no temporary file left (local writes through a rename), nothing deleted;
    # write_many's files are in flight together: the one it may write can have landed before the refusal
    assert place.listed() - {"_lakefs/janitor/ok"} == {
        "_lakefs/range-1", "_lakefs/dummy", "data/aa/obj", "_lakefs/janitor/summary.json",
        *(f"_lakefs/janitor/part-{i}" for i in range(5))}


def test_ranged_reads_give_what_a_file_read_gives(place):
    data = bytes(random.Random(3).randrange(256) for _ in range(1000))
    place.put({"_lakefs/index-1": data})
    ns = place.open()
    spans = [(0, 10), (990, 1000), (995, 2000), (0, 1000), (500, 501), (7, 7), (9, 3), (999, 5000)]
    assert [ns.read_range("_lakefs/index-1", *span) for span in spans] == [data[a:b] for a, b in spans]
    assert ns.read_ranges("_lakefs/index-1", spans) == [data[a:b] for a, b in spans]
    with pytest.raises(StorageError, match=r"/_lakefs/nothing does not exist"):
        ns.read_range("_lakefs/nothing", 0, 10)


def test_a_mapped_read_gives_what_a_read_gives(place):
    """read_mapped: the file mapped in place on a disk store (lakeFS's local store), a plain read elsewhere."""
    data = bytes(random.Random(4).randrange(256) for _ in range(5000))
    place.put({"_lakefs/range-2": data, "_lakefs/empty": b""})
    ns = place.open()
    mapped = ns.read_mapped("_lakefs/range-2")
    assert type(mapped).__name__ == ("mmap" if place.store.kind == "local" else "bytes")
    assert len(mapped) == 5000 and mapped[:] == data and mapped[10:20] == data[10:20] and bytes(mapped) == data
    assert ns.read_mapped("_lakefs/empty") == b""
    with pytest.raises(StorageError, match=r"/_lakefs/nothing does not exist"):
        ns.read_mapped("_lakefs/nothing")


def test_an_s3_run_builds_no_s3fs_when_the_plain_client_does_everything(store_of, tmp_path):
    """Every request of a run (listing slices and units, reading whole and in part, asking for objects, writing,
    deleting) through the plain botocore client: s3fs (0.25 s of imports, a client on its own event loop) is not
    even imported. Options the plain client cannot reproduce still build s3fs when the namespace opens."""
    place = new_place(store_of("s3"))
    place.put({"_lakefs/range-1": b"r" * 100, "data/aa/one": b"1", "data/bb/two": b"22", "legacy": b"l"})
    script = tmp_path / "run.py"
    script.write_text(f"""
import json, sys
from spark_jobs.engine.stores import StorageConfig, open_namespace
def opened(**extra):
    every = {{"s3": {{**{place.store.fsspec_options()!r}, **extra}}}}
    return open_namespace(StorageConfig({place.namespace!r}, None, json.dumps(every), 4))
ns = opened()
seen = dict(units=ns.list_units(), objects=sorted(o.key for u in ns.list_units() for o in ns.list_unit(u)),
            read=ns.read("_lakefs/range-1").decode(), part=ns.read_range("_lakefs/range-1", 90, 200).decode(),
            sizes=ns.metadata_sizes(), found=sorted(o.key for o in ns.stat(["data/aa/one", "data/aa/gone"])))
ns.write("_lakefs/janitor/x", b"x")
seen["deleted"] = ns.delete(["data/bb/two", "data/bb/gone"]).deleted
seen["s3fs"] = "s3fs" in sys.modules
opened(requester_pays=True)  # no plain equivalent: s3fs does every request, built at once
seen["s3fs_for_requester_pays"] = "s3fs" in sys.modules
print(json.dumps(seen))
""")
    root = str(Path(__file__).resolve().parents[3])  # this checkout's modules, whatever the install points at
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=root,
                         env={**os.environ, "PYTHONPATH": root})
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.splitlines()[-1])
    assert seen == {"units": ["data/aa/", "data/bb/", ""], "objects": ["data/aa/one", "data/bb/two", "legacy"],
                    "read": "r" * 100, "part": "r" * 10, "sizes": {"range-1": 100}, "found": ["data/aa/one"],
                    "deleted": 2, "s3fs": False, "s3fs_for_requester_pays": True}, seen
    assert place.listed() == {"_lakefs/range-1", "_lakefs/janitor/x", "data/aa/one", "legacy"}


@pytest.mark.parametrize("answer", [301, 403])
def test_an_s3_object_asked_for_is_read_as_the_client_reads_it_and_a_redirect_goes_to_the_client(store_of, answer):
    """``stat`` on S3 signs its HEADs itself (stores/s3_head.py): each answer equals the client's ``head_object``
    (size, time to the second), a key with odd characters included; a redirect (a bucket in another region) or a
    refusal (a signing scheme only the client's endpoint rules pick) makes the namespace hand that HEAD and every
    later one to the client's call."""
    place = new_place(store_of("s3"))
    files = {key: key.encode() * 3 for key in ODD if key.startswith("data/")}
    place.put(files)
    ns = place.open()
    client, bucket = ns.s3, ns.root.partition("/")[0]
    for o in ns.stat(sorted(files)):
        head = client.head_object(Bucket=bucket, Key=ns.path(o.key).partition("/")[2])
        assert (o.size, o.mtime) == (head["ContentLength"], head["LastModified"].timestamp()), o.key
    assert ns._signed_heads[bucket] is not None  # the signed path did those
    key = sorted(files)[0]
    proxy = FaultProxy(place.store.endpoint, "s3", first=1, match=lambda method, target: method == "HEAD",
                       answer=(answer, {"Location": place.store.endpoint}, b"")).start()
    try:
        ns = place.open(proxy.url)
        assert sizes(ns.stat([key])) == {key: len(files[key])}
    finally:
        proxy.cleanup()
    assert ns._signed_heads[bucket] is None and proxy.requests == 2  # handed over, then the client's own HEAD


def test_missing_keys_and_an_empty_namespace(place):
    ns = place.open()
    assert ns.list_units() == [""]
    assert ns.list_unit("") == [] and ns.list_unit("data/aa/") == [] and list(ns.list_data()) == []
    assert ns.metadata_sizes() == {}
    assert ns.list_metadata("_lakefs/retention/") == []
    with pytest.raises(StorageError, match="does not exist or is empty"):
        ns.probe()
    with pytest.raises(StorageError, match=r"/_lakefs/nothing does not exist"):
        ns.read("_lakefs/nothing")
    place.put({"_lakefs/here": b"h", "data/aa/here": b"h"})
    ns.probe()
    with pytest.raises(StorageError, match=r"/_lakefs/nothing does not exist"):
        ns.read_many(["_lakefs/here", "_lakefs/nothing"])
    # an object already gone counts as deleted: a re-run over a partly collected namespace
    result = ns.delete(["data/aa/gone", "data/aa/here", "legacy-gone"])
    assert (result.deleted, result.failed) == (3, [])
    assert place.listed() == {"_lakefs/here"}


def test_deletes_in_the_store_batches(place):
    ns = place.open()
    batch = STORES[place.store.kind].batch
    assert ns.batch == batch
    keys = [f"data/aa/k{i:05d}" for i in range(batch + 1)]
    place.put({k: b"x" for k in keys[:3] + keys[-2:]})  # the rest absent: deleted all the same, as requests cost
    result = ns.delete(keys)
    assert (result.deleted, result.failed, result.backoffs) == (batch + 1, [], 0)
    # a batch request per `batch` keys; a folder has no batches: one unlink per key
    assert result.requests == (batch + 1 if place.store.kind == "local" else 2)
    assert place.listed() == set()


def _hold(place: Place, key: str) -> tuple[Place, object]:
    """An object of ``place`` the store refuses to delete, by the store's own means, and how to let it go."""
    store = place.store
    if store.kind == "local":  # a folder where an object's key points: unlink fails (root unlinks anything else)
        place.put({f"{key}/inside": b"i"})
        return place, lambda: None
    if store.kind == "azure":  # a leased blob: 412 LeaseIdMissing in the batch answer
        place.put({key: b"held"})
        container = store.container_client()
        lease = container.get_blob_client(place.path(key).split("/", 1)[1]).acquire_lease(-1)

        def release() -> None:
            lease.break_lease()
            container.close()
        return place, release
    if store.kind == "s3":  # a legal hold (its bucket has object lock): AccessDenied for that key
        client = store.client()
        if "janitor-locked" not in store._buckets:  # noqa: SLF001 - the store's own record of its buckets
            client.create_bucket(Bucket="janitor-locked", ObjectLockEnabledForBucket=True)
            store._buckets.add("janitor-locked")  # noqa: SLF001
        locked = Place(store, f"s3://janitor-locked/{place.namespace.rsplit('/', 1)[1]}")
        locked.put({key: b"held"})
        name = locked.path(key).split("/", 1)[1]
        client.put_object_legal_hold(Bucket="janitor-locked", Key=name, LegalHold={"Status": "ON"})
        return locked, lambda: client.put_object_legal_hold(Bucket="janitor-locked", Key=name,
                                                            LegalHold={"Status": "OFF"})
    raise AssertionError(store.kind)


def test_a_batch_delete_reports_the_keys_the_store_refused(place):
    kind = place.store.kind
    keys = ["data/aa/k0", "data/aa/k1", "data/aa/k2", "data/aa/k3"]
    if kind == "gcs":
        # fake-gcs-server honours no holds: the proxy answers the first batch as GCS answers a partial failure
        # (k0 deleted, k1 403, k2 throttled, k3 404); k2 alone is then sent again, to the store
        place.put({k: b"x" for k in keys})
        parts = "".join(f"--b\r\nContent-Type: application/http\r\nContent-ID: <response-{i}>\r\n\r\n"
                        f"HTTP/1.1 {status} X\r\nContent-Length: 0\r\n\r\n\r\n"
                        for i, status in enumerate([204, 403, 429, 404]))
        proxy = FaultProxy(place.store.endpoint, "gcs", first=1, answer=(
            200, {"Content-Type": "multipart/mixed; boundary=b"}, f"{parts}--b--\r\n".encode())).start()
        try:
            result = place.open(proxy.url, max_in_flight=5).delete(keys)
        finally:
            proxy.cleanup()
        assert (result.deleted, result.failed) == (3, ["data/aa/k1: HTTP 403"])
        assert (result.requests, result.backoffs, proxy.matched) == (2, 1, 2)
        assert "data/aa/k2" not in place.listed()  # the throttled key, sent again, is gone
        return
    held, release = _hold(place, "data/aa/k1")
    held.put({k: b"x" for k in keys if k != "data/aa/k1"})
    try:
        result = held.open().delete(keys)
    finally:
        release()
    assert result.deleted == 3 and len(result.failed) == 1, result
    assert result.failed[0].startswith("data/aa/k1: ") and result.failed[0] != "data/aa/k1: still throttled"
    # what the store refused is still there, the rest of the batch is gone
    assert held.listed() == ({"data/aa/k1/inside"} if kind == "local" else {"data/aa/k1"})


# The request of each store that asks for one object's size and time (``Namespace.stat``)
STAT_REQUEST = {"s3": lambda method, target: method == "HEAD", "azure": lambda method, target: method == "HEAD",
                "gcs": lambda method, target: method == "GET" and "/o/" in target and "alt=media" not in target}


def test_throttled_requests_are_retried_at_a_lower_rate(cloud_place):
    place, kind = cloud_place, cloud_place.store.kind
    files = {f"data/aa/k{i}": f"payload {i}".encode() for i in range(5)}
    place.put({**files, "_lakefs/range-1": b"r" * 100})
    proxy = FaultProxy(place.store.endpoint, kind, first=1, match=lambda method, target: method == "GET").start()
    try:  # a listing or a read answered "slow down": the same answer after a back-off
        ns = place.open(proxy.url, max_in_flight=3)
        assert sizes(ns.list_data()) == {k: len(v) for k, v in files.items()}
        assert ns.read("_lakefs/range-1") == b"r" * 100
    finally:
        proxy.cleanup()
    assert proxy.throttled == 1 and proxy.matched > 1
    assert ns.throttle.stats.backoffs >= 1  # the store library did not retry it out of the throttle's sight
    proxy = FaultProxy(place.store.endpoint, kind, first=2, match=STAT_REQUEST[kind]).start()
    try:  # an object's size and time asked for, answered "slow down" (S3's HEAD: no body, the status says it)
        ns = place.open(proxy.url, max_in_flight=3)
        assert sizes(ns.stat(["data/aa/k0", "data/aa/k1", "data/aa/gone"])) == {"data/aa/k0": 9, "data/aa/k1": 9}
    finally:
        proxy.cleanup()
    assert proxy.throttled == 2 and ns.throttle.stats.backoffs >= 2
    proxy = FaultProxy(place.store.endpoint, kind, first=2).start()  # the first two batch deletes
    try:
        result = place.open(proxy.url, max_in_flight=3).delete(list(files))
    finally:
        proxy.cleanup()
    assert (result.deleted, result.failed) == (5, []) and proxy.throttled == 2
    # every "slow down" reached the throttle: three requests, two back-offs (no retry of the library's own)
    assert (result.requests, result.backoffs) == (3, 2)
    assert place.listed() == {"_lakefs/range-1"}


@pytest.mark.parametrize("fault", ["stall", "gone", "drop"])
def test_a_store_that_times_out_or_is_gone_fails_classified(cloud_place, fault):
    """Every request stalled past the time-out, the store gone (the port closed), or every connection dropped
    unanswered: the throttle's few attempts, then ``storage-unavailable``, in seconds (no library's own retries
    first: azure-storage-blob's took 418 s, gcsfs's 168 s to give up on a store gone)."""
    place, kind = cloud_place, cloud_place.store.kind
    place.put({"_lakefs/range-1": b"r", "data/aa/k": b"k"})
    faults = {"stall": {"stall": 3.0}, "gone": {"gone": True}, "drop": {"faults": ("drop",)}}[fault]
    proxy = FaultProxy(place.store.endpoint, kind, first=10**6, match=lambda method, target: True, **faults)
    proxy.start()
    try:
        ns = place.open(proxy.url, max_in_flight={"stall": 6, "gone": 7, "drop": 9}[fault], **TIMEOUT_OPTIONS[kind])
        started = time.monotonic()
        with pytest.raises(StorageError) as failed:
            ns.read("_lakefs/range-1")
        assert failed.value.reason == "storage-unavailable", failed.value
        assert "unreachable" in str(failed.value)
        assert time.monotonic() - started < 60  # a few retries of a 1 s time-out, not minutes
        with pytest.raises(StorageError) as failed:
            ns.delete(["data/aa/k"])
        assert failed.value.reason == "storage-unavailable", failed.value
        with pytest.raises(StorageError) as failed:
            ns.list_units()
        assert failed.value.reason == "storage-unavailable", failed.value
        with pytest.raises(StorageError) as failed:
            ns.stat(["data/aa/k"])
        assert failed.value.reason == "storage-unavailable", failed.value
    finally:
        proxy.cleanup()
    # a stalled request reaches the store after the client gave up on it (the delete may have happened); a request
    # to a store gone, or dropped, never does
    assert place.listed() == {"_lakefs/range-1", "data/aa/k"} if fault != "stall" else "_lakefs/range-1" in place.listed()


def test_a_share_of_faults_on_every_request_is_retried_and_every_answer_is_exact(cloud_place):
    """A fifth of all requests answered 429 or 503, stalled past the time-out, dropped unanswered, or carried out
    with the answer lost: listing, reading, writing and deleting all give exactly what a healthy store gives."""
    place, kind = cloud_place, cloud_place.store.kind
    files = {f"data/s{i % 3}/k{i}": f"payload {i}".encode() for i in range(12)}
    place.put({**files, "_lakefs/range-1": b"r" * 100, "legacy": b"l"})
    proxy = FaultProxy(place.store.endpoint, kind, share=0.2, seed=SEED, match=lambda method, target: True,
                       faults=("answer", "stall", "drop", "lost-answer"), stall=2.0,
                       answer=[throttle_answer(kind, 429), throttle_answer(kind, 503)]).start()
    try:
        ns = place.open(proxy.url, max_in_flight=10, **TIMEOUT_OPTIONS[kind])
        assert ns.list_units() == ["data/s0/", "data/s1/", "data/s2/", ""], f"seed {SEED}"
        assert sizes(ns.list_data()) == {**{k: len(v) for k, v in files.items()}, "legacy": 1}, f"seed {SEED}"
        assert ns.read_many(sorted(files)) == files, f"seed {SEED}"
        assert sizes(ns.stat([*files, "data/s0/gone"])) == {k: len(v) for k, v in files.items()}, f"seed {SEED}"
        ns.write_many({f"_lakefs/janitor/p{i}": bytes([i]) * 3 for i in range(4)})
        assert ns.metadata_sizes() == {"range-1": 100}, f"seed {SEED}"
        result = ns.delete(sorted(files))
    finally:
        proxy.cleanup()
    assert (result.deleted, result.failed) == (len(files), []), f"seed {SEED}: {result}"
    assert proxy.throttled >= 3, f"seed {SEED}: {proxy.faults} in {proxy.requests} requests"
    assert place.listed() == {"_lakefs/range-1", "legacy", *(f"_lakefs/janitor/p{i}" for i in range(4))}
    print(f"RELIABILITY contract-{kind}-fault-share: seed {SEED}, {proxy.requests} requests, faults {proxy.faults}, "
          f"back-offs {ns.throttle.stats.backoffs}")


# lakeFS names its own objects (data/<slice>/<xid>), but a legacy root or an import may hold any key. Not "?": adlfs
# reads what follows it as a query (a blob "a?b" written through adlfs is stored as another name)
ODD = ["data/odd/a b.bin", "data/odd/é ü 日本.bin", "data/odd/a+b.bin", "data/odd/100%.bin", "data/odd/%41.bin",
       "data/odd/k=v/x=1+2.bin", "legacy a+b=%é.bin"]


def test_keys_with_odd_characters(place):
    place.put({key: key.encode() for key in ODD})
    ns = place.open()
    assert ns.list_units() == ["data/odd/", ""]
    assert sizes(ns.list_data()) == {key: len(key.encode()) for key in ODD}
    assert ns.read_many(ODD) == {key: key.encode() for key in ODD}
    assert sizes(ns.stat([*ODD, "data/odd/a b.bin.gone"])) == {key: len(key.encode()) for key in ODD}
    ns.write("_lakefs/odd a+b=%41é.json", b"odd")
    assert place.cat("_lakefs/odd a+b=%41é.json") == b"odd"
    assert ns.metadata_sizes() == {"odd a+b=%41é.json": 3}
    result = ns.delete(ODD)
    assert (result.deleted, result.failed) == (len(ODD), [])
    assert place.listed() == {"_lakefs/odd a+b=%41é.json"}


def test_a_sibling_prefix_sharing_the_name_is_never_listed_nor_deleted(place):
    sibling = Place(place.store, place.namespace + "2")  # …/contract-xyz and …/contract-xyz2
    if place.store.kind != "local":
        assert sibling.path("x").startswith(place.path(""))  # the sibling's keys start with the namespace's name
    sibling.put({"data/aa/one": b"s", "data/aa/sibling-only": b"s", "data/zz/z": b"z", "legacy-s": b"s",
                 "_lakefs/range-s": b"s", "_lakefs/janitor/x": b"s"})
    place.put({"data/aa/one": b"p", "legacy-p": b"p"})
    ns = place.open()
    assert ns.list_units() == ["data/aa/", ""]
    assert sizes(ns.list_data()) == {"data/aa/one": 1, "legacy-p": 1}
    assert ns.metadata_sizes() == {}
    assert ns.list_metadata("_lakefs/") == []
    with pytest.raises(StorageError, match="does not exist"):
        ns.read("_lakefs/range-s")
    result = ns.delete(["data/aa/one", "data/aa/sibling-only", "data/zz/z", "legacy-s", "legacy-p"])
    assert (result.deleted, result.failed) == (5, [])
    assert place.listed() == set()
    assert sibling.listed() == {"data/aa/one", "data/aa/sibling-only", "data/zz/z", "legacy-s", "_lakefs/range-s",
                              "_lakefs/janitor/x"}
    # the sibling's own namespace sees its objects: the listing above was not empty by accident
    assert sizes(sibling.open().list_data()) == {"data/aa/one": 1, "data/aa/sibling-only": 1, "data/zz/z": 1,
                                                 "legacy-s": 1}


def test_the_scheme_picks_the_store(place):
    ns = place.open()
    assert type(ns) is STORES[place.store.kind] and ns.store == place.store.kind
    assert ns.root == place.path("").rstrip("/")


def test_says_whether_a_deletion_frees_and_purges_nothing_without_versions(place):
    """Every store reads its bucket's or container's settings (``Namespace.freeing``): on the test servers' default
    buckets (no versioning, no soft delete) a deletion frees at once, and the purge of noncurrent versions finds
    none. Versioned buckets and soft delete: tests/integration/gc/test_gc_freeing.py."""
    ns = place.open()
    verdict = ns.freeing()
    assert (verdict.store, verdict.state) == (place.store.kind, "freed"), verdict
    place.put({"data/s/a": b"1", "data/s/b": b"2"})
    assert ns.delete(["data/s/a"]).deleted == 1
    purged = ns.purge_noncurrent(["data/s/a"])
    assert (purged.deleted, purged.failed) == (0, [])
    assert place.listed() == {"data/s/b"}
