"""Generate large lakeFS repositories quickly, for the GC benchmarks (and usable on its own).

    .venv/bin/python bench/gc/generate.py --objects 100000 --commits 1000 --changed 10 [--pattern random|append]
        (starts its own lakeFS on S3 (moto) on loopback, prints what it made, stops everything)

A history is: one commit with ``objects`` objects, then ``commits`` commits that each change ``changed`` files,
every commit backdated through ``CommitCreation.date`` (one per ``step``, ending before ``now``), so retention
windows cover exactly the commits a benchmark wants.

Why it is fast: objects are not uploaded through lakeFS. They are staged with the (internal) ``stage_object``
API, one small metadata call per object that points the entry at a physical address in the storage namespace,
16 calls in flight (≈1,300 objects/s here, against ≈360/s for ``upload_object`` of 100-byte objects, which moto
caps). What lies behind each address depends on the writer:

* ``MetadataOnly``: nothing. The mark phase reads only lakeFS's metadata (ranges and metaranges), so its cost is
  measured on a repository whose data files do not exist; a sweep over it would find nothing to delete.
* ``S3Objects``: the object is first written straight to the bucket with ``put_object`` (no lakeFS in the data
  path), then staged; this is what sweep benchmarks use.

Staged objects carry full addresses (``s3://bucket/ns/data/<slice>/<id>``) inside the namespace, which the GC
maps back to their relative form before subtracting, exactly like lakeFS's own GC does.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import lakefs_sdk

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
    commit_ids: list[str] = field(default_factory=list)
    physical_addresses: list[str] = field(default_factory=list)  # every address ever staged (live or garbage)

    @property
    def head(self) -> str:
        return self.commit_ids[-1]


class MetadataOnly:
    """Addresses in the namespace with no object behind them (mark benchmarks)."""

    def __init__(self, storage_namespace: str) -> None:
        self.namespace = storage_namespace.rstrip("/")

    def write(self, slice_id: str, size: int) -> tuple[str, str]:
        return f"{self.namespace}/data/{slice_id}/{uuid.uuid4().hex}", uuid.uuid4().hex


class S3Objects:
    """Objects put straight into the namespace's bucket, then staged (sweep benchmarks)."""

    def __init__(self, client, storage_namespace: str) -> None:
        if not storage_namespace.startswith("s3://"):
            raise ValueError(f"S3Objects needs an s3:// namespace, not {storage_namespace!r}")
        self.client = client
        self.bucket, _, prefix = storage_namespace[len("s3://"):].partition("/")
        self.prefix = prefix.strip("/")
        self.namespace = storage_namespace.rstrip("/")

    def write(self, slice_id: str, size: int) -> tuple[str, str]:
        key = f"{self.prefix}/data/{slice_id}/{uuid.uuid4().hex}".lstrip("/")
        etag = self.client.put_object(Bucket=self.bucket, Key=key, Body=b"g" * size)["ETag"].strip('"')
        return f"s3://{self.bucket}/{key}", etag


def _slice_name(index: int, salt: str) -> str:
    # Descending names like lakeFS's xid slices are not needed: the GC takes age from modification times.
    return f"gbench{salt}{index // SLICE_EVERY:06d}"


def stage_many(lakefs, *, repository_id: str, branch_id: str, paths: Iterable[str], writer,
               salt: str, start_index: int = 0, size: int = 100, threads: int = 16) -> list[str]:
    """Stage one new object per path (written by ``writer``); returns their physical addresses."""
    def one(item: tuple[int, str]) -> str:
        index, path = item
        address, checksum = writer.write(_slice_name(start_index + index, salt), size)
        lakefs.internal.stage_object(repository_id, branch_id, path, lakefs_sdk.ObjectStageCreation(
            physical_address=address, checksum=checksum, size_bytes=size))
        return address

    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(one, enumerate(paths)))


def _base_path(i: int) -> str:
    return f"tables/t{i % 10}/part-{i:08d}.parquet"


def generate(lakefs, *, repository_id: str, storage_namespace: str, shape: HistoryShape, writer,
             end: datetime, step: timedelta = timedelta(hours=1), branch_id: str = "main",
             progress: Callable[[str], None] = lambda _msg: None, threads: int = 16) -> Generated:
    """Create the repository and its history; the last commit is dated ``end``, each earlier one ``step`` before."""
    lakefs.repositories.create_repository(lakefs_sdk.RepositoryCreation(
        name=repository_id, storage_namespace=storage_namespace, default_branch=branch_id))
    out = Generated(repository_id, storage_namespace)
    rng = random.Random(shape.seed)
    salt = uuid.uuid4().hex[:6]
    first_date = end - step * shape.commits
    base = [_base_path(i) for i in range(shape.objects)]
    out.physical_addresses += stage_many(lakefs, repository_id=repository_id, branch_id=branch_id, paths=base,
                                         writer=writer, salt=salt, threads=threads)
    out.commit_ids.append(_commit(lakefs, repository_id, branch_id, "base", first_date))
    progress(f"base commit: {shape.objects} objects")
    staged = shape.objects
    for n in range(1, shape.commits + 1):
        if shape.pattern == "random":
            paths = rng.sample(base, min(shape.changed_per_commit, len(base)))
        else:  # "zz/" sorts after "tables/": new partitions land at the end of the key space
            paths = [f"zz/events/n={n:06d}/part-{k:04d}.parquet" for k in range(shape.changed_per_commit)]
        out.physical_addresses += stage_many(lakefs, repository_id=repository_id, branch_id=branch_id,
                                             paths=paths, writer=writer, salt=salt, start_index=staged,
                                             threads=threads)
        staged += len(paths)
        out.commit_ids.append(_commit(lakefs, repository_id, branch_id, f"change {n}", first_date + step * n))
        if n % 100 == 0:
            progress(f"{n}/{shape.commits} commits")
    return out


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
    from tests.services import ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY, LakeFSServer, MotoS3Server  # noqa: PLC0415
    from workers.lakefs_client import make_lakefs_for  # noqa: PLC0415

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--commits", type=int, default=10)
    parser.add_argument("--changed", type=int, default=10)
    parser.add_argument("--pattern", choices=["random", "append"], default="random")
    parser.add_argument("--with-data", action="store_true", help="write every object to S3 (else metadata only)")
    args = parser.parse_args()
    s3 = MotoS3Server().start()
    server = None
    try:
        s3.client().create_bucket(Bucket="bench")
        server = LakeFSServer(s3=s3).start()
        lakefs = make_lakefs_for(server.endpoint, ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY)
        namespace = "s3://bench/gen"
        writer = S3Objects(s3.client(), namespace) if args.with_data else MetadataOnly(namespace)
        started = time.monotonic()
        made = generate(lakefs, repository_id="gen", storage_namespace=namespace, writer=writer,
                        shape=HistoryShape(args.objects, args.commits, args.changed, args.pattern),
                        end=datetime.now(UTC) - timedelta(hours=1), progress=print)
        print(f"{len(made.commit_ids)} commits, {len(made.physical_addresses)} objects staged in "
              f"{time.monotonic() - started:.1f}s")
    finally:
        if server:
            server.cleanup()
        s3.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
