"""Generate large lakeFS repositories quickly, for the GC benchmarks (and usable on its own).

    .venv/bin/python bench/gc/generate.py --objects 100000 --commits 1000 --changed 10 [--pattern random|append]
        [--store local|s3|azure|gcs] [--writer metadata|bulk|data|upload]
        (starts the store (versitygw for S3) and a lakeFS on it on loopback, prints what it made, stops everything)

A history is: one commit with ``objects`` objects, then ``commits`` commits that each change ``changed`` files,
every commit backdated through ``CommitCreation.date`` (one per ``step``, ending before ``now``), so retention
windows cover exactly the commits a benchmark wants.

Why it is fast: objects are not uploaded through lakeFS. They are staged with the (internal) ``stage_object``
API, one small metadata call per object that points the entry at a physical address in the storage namespace,
16 calls in flight (≈700–1,300 objects/s on 2 cores through the SDK, several times ``upload_object``'s rate for
100-byte objects). What lies behind each address depends on the writer:

* ``MetadataOnly``: nothing. The mark phase reads only lakeFS's metadata (ranges and metaranges), so its cost is
  measured on a repository whose data files do not exist; a sweep over it would find nothing to delete.
* ``BulkMetadataOnly``: the same, staged with plain keep-alive HTTP (the same ``stage_object`` call, no SDK) from
  3 processes × 16 connections: ≈3,000 objects/s on 2 cores, so 1,000,000 objects take ≈ 6 min (the
  scale curve's repositories; lakeFS's own CPU is then most of the cost).
* ``StoreObjects``: the object is first written straight to the store (any tests/services.py ``Store``: local
  disk, versitygw, Azurite, fake-gcs-server; no lakeFS in the data path), then staged; sweep benchmarks use it.

Staged objects carry full addresses (``s3://bucket/ns/data/<slice>/<id>``, ``local:///<root>/<name>/data/…``)
inside the namespace, which the GC maps back to their relative form before subtracting, exactly like lakeFS's own
GC does (``staged_base`` gives the prefix for a store).
"""

from __future__ import annotations

import base64
import http.client
import json
import multiprocessing
import random
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import lakefs_sdk

from spark_jobs.core.slices import slice_name

SLICE_EVERY = 50_000  # lakeFS starts a new data/<slice>/ every hour or 50,000 ids; one per 50,000 objects here


@dataclass(frozen=True)
class HistoryShape:
    objects: int
    commits: int = 0
    changed_per_commit: int = 10
    # random: each commit overwrites paths drawn from the whole key space (touches many ranges);
    # append: each commit adds new paths that sort after all others (time-partitioned data, touches the tail).
    pattern: str = "random"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.pattern not in ("random", "append"):
            raise ValueError(f"pattern must be random or append, not {self.pattern!r}")


@dataclass
class Generated:
    repository_id: str
    storage_namespace: str
    salt: str = ""  # names this repository's slices
    commit_ids: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)  # logical paths written so far
    physical_addresses: list[str] = field(default_factory=list)  # every address ever staged (live or garbage)

    @property
    def head(self) -> str:
        return self.commit_ids[-1]


class MetadataOnly:
    """Addresses in the namespace with no object behind them (mark benchmarks)."""

    def __init__(self, storage_namespace: str) -> None:
        self.namespace = storage_namespace.rstrip("/")

    def put(self, lakefs, repository_id: str, branch_id: str, path: str, slice_id: str, size: int) -> str:
        address = f"{self.namespace}/data/{slice_id}/{uuid.uuid4().hex}"
        return _stage(lakefs, repository_id, branch_id, path, address, uuid.uuid4().hex, size)


class BulkMetadataOnly(MetadataOnly):
    """``MetadataOnly`` staged in bulk: plain HTTP/1.1 keep-alive connections (no SDK objects per call) from
    ``processes`` spawned processes with ``connections`` each. ``stage_many`` uses ``many`` when a writer has it."""

    def __init__(self, storage_namespace: str, endpoint: str, access_key: str, secret_key: str, *,
                 processes: int = 3, connections: int = 16, spawn_above: int = 2000, files_in=None,
                 files_age: float = 3 * 86400) -> None:
        super().__init__(storage_namespace)
        self.files_in = files_in  # (store, storage namespace) of local disk or versitygw: an empty file per address
        self.files_age = files_age  # seconds: how old the files look
        self.spawn_above = spawn_above  # fewer objects are staged from this process (threads only)
        self.endpoint = endpoint
        self.auth = "Basic " + base64.b64encode(f"{access_key}:{secret_key}".encode()).decode()
        self.processes, self.connections = processes, connections

    def many(self, repository_id: str, branch_id: str, items: list[tuple[str, str]], size: int) -> list[str]:
        """Stage ``items`` ((path, slice id)); returns their addresses in order."""
        addresses = [f"{self.namespace}/data/{slice_id}/{uuid.uuid4().hex}" for _, slice_id in items]
        jobs = [(path, address) for (path, _), address in zip(items, addresses, strict=True)]
        host, port = self.endpoint.removeprefix("http://").rstrip("/").rsplit(":", 1)
        target = (host, int(port), self.auth, repository_id, branch_id, size)
        if len(jobs) <= self.spawn_above:  # not worth spawning processes
            _stage_http(target, jobs, self.connections)
        else:
            per = -(-len(jobs) // self.processes)
            with multiprocessing.get_context("spawn").Pool(self.processes) as pool:
                pool.starmap(_stage_http, [(target, jobs[i:i + per], self.connections)
                                           for i in range(0, len(jobs), per)])
        if self.files_in is not None:
            touch_files(*self.files_in, [a[len(self.namespace) + 1:] for a in addresses], age_seconds=self.files_age)
        return addresses


def store_folder(store, storage_namespace: str) -> str:
    """The folder on this machine that holds a namespace's objects as plain files (local disk, versitygw)."""
    if store.kind == "local":
        return store.fsspec_path(storage_namespace)
    if store.kind == "s3" and hasattr(store, "dir"):  # versitygw's posix backend: <dir>/data/<bucket>/<key>
        return str(store.dir / "data" / store.fsspec_path(storage_namespace))
    raise ValueError(f"objects cannot be written as files on a {store.kind} store")


def touch_files(store, storage_namespace: str, keys: list[str], *, age_seconds: float = 3 * 86400) -> None:
    """Empty objects at ``keys`` written straight as files into the store's folder (far faster than PUTs:
    ≈ 100,000 per 10 s), dated ``age_seconds`` ago."""
    import os  # noqa: PLC0415
    import time  # noqa: PLC0415

    base = store_folder(store, storage_namespace)
    when = time.time() - age_seconds
    made: set[str] = set()
    for key in keys:
        path = os.path.join(base, key)
        folder = os.path.dirname(path)
        if folder not in made:
            os.makedirs(folder, exist_ok=True)
            made.add(folder)
        fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
        os.close(fd)
        os.utime(path, (when, when))


def _stage_http(target: tuple, jobs: list[tuple[str, str]], connections: int) -> int:
    from urllib.parse import quote  # noqa: PLC0415

    host, port, auth, repository_id, branch_id, size = target
    headers = {"Authorization": auth, "Content-Type": "application/json"}
    base = f"/api/v1/repositories/{quote(repository_id)}/branches/{quote(branch_id, safe='')}/objects?path="

    def one_connection(k: int) -> None:
        conn = http.client.HTTPConnection(host, port, timeout=120)
        try:
            for path, address in jobs[k::connections]:
                body = json.dumps({"physical_address": address, "checksum": uuid.uuid4().hex, "size_bytes": size})
                for attempt in range(5):
                    try:
                        conn.request("PUT", base + quote(path, safe=""), body, headers)
                        response = conn.getresponse()
                        answer = response.read()
                    except (ConnectionError, http.client.HTTPException):
                        conn.close()
                        if attempt == 4:
                            raise
                        continue
                    if response.status != 201:
                        raise RuntimeError(f"staging {path}: HTTP {response.status} {answer[:200]!r}")
                    break
        finally:
            conn.close()

    with ThreadPoolExecutor(connections) as pool:
        list(pool.map(one_connection, range(min(connections, len(jobs)))))
    return len(jobs)


def staged_base(store, storage_namespace: str) -> str:
    """The full-address prefix staged objects of ``storage_namespace`` on ``store`` carry: the namespace itself
    on the clouds; on lakeFS's local blockstore ``local://`` + the namespace's absolute folder."""
    if getattr(store, "kind", "") == "local":
        return "local://" + store.fsspec_path(storage_namespace)
    return storage_namespace.rstrip("/")


class StoreObjects:
    """Objects written straight into the namespace on its store (fsspec, as the GC reads it), then staged
    (sweep benchmarks)."""

    def __init__(self, store, storage_namespace: str) -> None:
        self.store = store
        self.storage_namespace = storage_namespace
        self.base = staged_base(store, storage_namespace)
        self.fs = store.filesystem()

    def put(self, lakefs, repository_id: str, branch_id: str, path: str, slice_id: str, size: int) -> str:
        key = f"data/{slice_id}/{uuid.uuid4().hex}"
        target = self.store.fsspec_path(self.storage_namespace, key)
        if self.store.kind == "local":
            self.fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
        self.fs.pipe_file(target, _content(size))
        return _stage(lakefs, repository_id, branch_id, path, f"{self.base}/{key}", uuid.uuid4().hex, size)


class LakeFSUpload:
    """Objects uploaded through lakeFS (``upload_object``): relative addresses in lakeFS's own data/<slice>/
    layout, the common case."""

    def put(self, lakefs, repository_id: str, branch_id: str, path: str, slice_id: str, size: int) -> str:
        return lakefs.upload(repository_id, branch_id, path, data=_content(size)).physical_address


def _content(size: int) -> bytes:
    # Unique bytes: lakeFS compares entries by size + ETag, so an overwrite with equal bytes is "no changes".
    return uuid.uuid4().bytes * (size // 16) + uuid.uuid4().bytes[: size % 16]


SLICES_FROM = datetime.now(UTC) - timedelta(days=30)  # when the first generated slice was opened


def _slice_name(index: int, salt: str) -> str:
    # Named as lakeFS names them (descending xids), each opened an hour after the one before, from 30 days ago:
    # an incremental GC run lists only the recent ones (spark_jobs/core/slices.py), as on a real namespace.
    number = index // SLICE_EVERY
    return slice_name(SLICES_FROM + timedelta(hours=number), salt.encode()[:5] + number.to_bytes(3, "big"))


def stage_many(lakefs, *, repository_id: str, branch_id: str, paths: Iterable[str], writer,
               salt: str, start_index: int = 0, size: int = 100, threads: int = 16) -> list[str]:
    """Write one new object per path (``writer.put``) on the branch; returns their physical addresses."""
    many = getattr(writer, "many", None)
    if many is not None:
        paths = list(paths)
        return many(repository_id, branch_id,
                    [(path, _slice_name(start_index + i, salt)) for i, path in enumerate(paths)], size)

    def one(item: tuple[int, str]) -> str:
        index, path = item
        return writer.put(lakefs, repository_id, branch_id, path, _slice_name(start_index + index, salt), size)

    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(one, enumerate(paths)))


def _stage(lakefs, repository_id: str, branch_id: str, path: str, address: str, checksum: str, size: int) -> str:
    lakefs.internal.stage_object(repository_id, branch_id, path, lakefs_sdk.ObjectStageCreation(
        physical_address=address, checksum=checksum, size_bytes=size))
    return address


def _base_path(i: int) -> str:
    return f"tables/t{i % 10}/part-{i:08d}.parquet"


def generate(lakefs, *, repository_id: str, storage_namespace: str, shape: HistoryShape, writer,
             end: datetime, step: timedelta = timedelta(hours=1), branch_id: str = "main",
             progress: Callable[[str], None] = lambda _msg: None, threads: int = 16) -> Generated:
    """Create the repository and its history; the last commit is dated ``end``, each earlier one ``step`` before."""
    lakefs.repositories.create_repository(lakefs_sdk.RepositoryCreation(
        name=repository_id, storage_namespace=storage_namespace, default_branch=branch_id))
    out = Generated(repository_id, storage_namespace, salt=uuid.uuid4().hex[:6])
    first_date = end - step * shape.commits
    base = [_base_path(i) for i in range(shape.objects)]
    out.paths = list(base)
    out.physical_addresses += stage_many(lakefs, repository_id=repository_id, branch_id=branch_id, paths=base,
                                         writer=writer, salt=out.salt, threads=threads)
    out.commit_ids.append(_commit(lakefs, repository_id, branch_id, "base", first_date))
    progress(f"{repository_id}: base commit, {shape.objects} objects")
    extend(lakefs, out, shape=shape, writer=writer, first=first_date + step, step=step, branch_id=branch_id,
           progress=progress, threads=threads)
    return out


def extend(lakefs, repo: Generated, *, shape: HistoryShape, writer, first: datetime,
           step: timedelta = timedelta(hours=1), branch_id: str = "main",
           progress: Callable[[str], None] = lambda _msg: None, threads: int = 16) -> Generated:
    """Add ``shape.commits`` commits of ``shape.changed_per_commit`` files to a generated repository, the first
    dated ``first``."""
    rng = random.Random(shape.seed + len(repo.commit_ids))
    base = [p for p in repo.paths if p.startswith("tables/")]
    for n in range(1, shape.commits + 1):
        if shape.pattern == "random":
            paths = rng.sample(base, min(shape.changed_per_commit, len(base)))
        else:  # "zz/" sorts after "tables/": new partitions land at the end of the key space
            seq = len(repo.commit_ids)
            paths = [f"zz/events/n={seq:06d}/part-{k:04d}.parquet" for k in range(shape.changed_per_commit)]
            repo.paths += paths
        repo.physical_addresses += stage_many(lakefs, repository_id=repo.repository_id, branch_id=branch_id,
                                              paths=paths, writer=writer, salt=repo.salt,
                                              start_index=len(repo.physical_addresses), threads=threads)
        repo.commit_ids.append(_commit(lakefs, repo.repository_id, branch_id, f"change {n}",
                                       first + step * (n - 1)))
        if n % 100 == 0:
            progress(f"{repo.repository_id}: {n}/{shape.commits} commits")
    return repo


def _commit(lakefs, repository_id: str, branch_id: str, message: str, date: datetime) -> str:
    commit = lakefs.commits.commit(repository_id, branch_id,
                                   lakefs_sdk.CommitCreation(message=message, date=int(date.timestamp())))
    return commit.id


def main() -> int:
    import argparse  # noqa: PLC0415
    import sys  # noqa: PLC0415
    import time  # noqa: PLC0415
    from datetime import UTC  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.services import ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY, STORES, LakeFSServer  # noqa: PLC0415
    from workers.shared.lakefs.client import make_lakefs_for  # noqa: PLC0415

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--commits", type=int, default=10)
    parser.add_argument("--changed", type=int, default=10)
    parser.add_argument("--pattern", choices=["random", "append"], default="random")
    parser.add_argument("--store", choices=sorted(STORES), default="s3")
    parser.add_argument("--writer", choices=["metadata", "bulk", "data", "upload"], default="metadata")
    parser.add_argument("--quick", action="store_true", help="200 objects with data + 3 commits, and a check")
    args = parser.parse_args()
    if args.quick:
        args.objects, args.commits, args.writer = 200, 3, "data"
    store = STORES[args.store]().start()
    server = None
    try:
        server = LakeFSServer(store=store).start()
        lakefs = make_lakefs_for(server.endpoint, ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY)
        namespace = store.namespace("gen")
        writer = {"metadata": lambda: MetadataOnly(staged_base(store, namespace)),
                  "bulk": lambda: BulkMetadataOnly(staged_base(store, namespace), server.endpoint, ADMIN_ACCESS_KEY,
                                                   ADMIN_SECRET_KEY),
                  "data": lambda: StoreObjects(store, namespace), "upload": LakeFSUpload}[args.writer]()
        started = time.monotonic()
        made = generate(lakefs, repository_id="gen", storage_namespace=namespace, writer=writer,
                        shape=HistoryShape(args.objects, args.commits, args.changed, args.pattern),
                        end=datetime.now(UTC) - timedelta(hours=1), progress=print)
        print(f"{len(made.commit_ids)} commits, {len(made.physical_addresses)} objects staged in "
              f"{time.monotonic() - started:.1f}s")
        listed = lakefs.objects.list_objects("gen", "main", amount=1000).results
        if len(made.commit_ids) != args.commits + 1 or len(listed) != min(args.objects, 1000):
            print(f"FAIL: {len(made.commit_ids)} commits, {len(listed)} objects on main", file=sys.stderr)
            return 1
    finally:
        if server:
            server.cleanup()
        store.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
