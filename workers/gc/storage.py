"""The storage namespace as the GC sees it: list data objects, read and write under ``_lakefs/``, delete in bulk.

Two backends: a local folder (lakeFS's local blockstore) and S3 (boto3: exactly 1,000 keys per DeleteObjects
request, the provider's limit, with back-off on SlowDown/503). GCS and Azure would add a backend with the same
four methods. Every method takes keys relative to the namespace, and nothing outside it is ever addressed.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

from spark_jobs.core.addresses import namespace_prefixes
from spark_jobs.core.plan import METADATA_PREFIX, StoredObject

S3_DELETE_BATCH = 1000


class StorageError(RuntimeError):
    """The namespace could not be listed, read or written: the run fails before anything is deleted."""


class Namespace(Protocol):
    uri: str

    def probe(self) -> None: ...
    def list_data(self) -> Iterator[StoredObject]: ...
    def list_metadata(self, prefix: str) -> list[str]: ...
    def read(self, key: str) -> bytes: ...
    def write(self, key: str, data: bytes) -> None: ...
    def delete(self, keys: list[str]) -> int: ...


def _check_key(key: str) -> str:
    if not key or key.startswith("/") or ".." in key.split("/"):
        raise StorageError(f"refusing a key that leaves the namespace: {key!r}")
    return key


def _metadata_prefix(prefix: str) -> str:
    if not prefix.startswith(METADATA_PREFIX):
        raise StorageError(f"the GC lists only lakeFS's metadata under {METADATA_PREFIX}, not {prefix!r}")
    return _check_key(prefix)


class LocalNamespace:
    """A namespace folder of lakeFS's local blockstore."""

    def __init__(self, uri: str, root: Path, *, workers: int = 8):
        self.uri = uri
        self.root = root
        self.workers = workers

    def _path(self, key: str) -> Path:
        return self.root / _check_key(key)

    def probe(self) -> None:
        """Fail early, and say why, when this is not lakeFS's folder for the namespace."""
        if not (self.root / "_lakefs").is_dir():
            raise StorageError(f"namespace {self.uri} is not at {self.root} (no _lakefs/ there): check the "
                               "blockstore folder setting (lakeFS's blockstore.local.path)")

    def list_data(self) -> Iterator[StoredObject]:
        if not self.root.is_dir():
            raise StorageError(f"namespace {self.uri} is not a folder the janitor can read ({self.root})")
        try:
            # The legacy flat layout: objects directly at the root (never recursive there: _lakefs/ lives there).
            for entry in os.scandir(self.root):
                if entry.is_file(follow_symlinks=False):
                    st = entry.stat(follow_symlinks=False)
                    yield StoredObject(entry.name, st.st_size, st.st_mtime)
            data = self.root / "data"
            if not data.is_dir():
                return
            slices = [e.path for e in os.scandir(data) if e.is_dir(follow_symlinks=False)]
            with ThreadPoolExecutor(self.workers) as pool:  # in parallel by slice
                for found in pool.map(self._list_slice, slices):
                    yield from found
            for entry in os.scandir(data):
                if entry.is_file(follow_symlinks=False):
                    st = entry.stat(follow_symlinks=False)
                    yield StoredObject(f"data/{entry.name}", st.st_size, st.st_mtime)
        except OSError as exc:
            raise StorageError(f"listing {self.uri} failed: {exc}") from exc

    def list_metadata(self, prefix: str) -> list[str]:
        """Keys of the files under ``prefix`` inside ``_lakefs/`` (what lakeFS wrote for a GC run)."""
        base = self._path(_metadata_prefix(prefix))
        if not base.is_dir():
            return []
        try:
            return sorted(os.path.relpath(os.path.join(folder, name), self.root).replace(os.sep, "/")
                          for folder, _, files in os.walk(base) for name in files)
        except OSError as exc:
            raise StorageError(f"listing {self.uri}/{prefix} failed: {exc}") from exc

    def _list_slice(self, path: str) -> list[StoredObject]:
        out = []
        for folder, _, files in os.walk(path):
            for name in files:
                full = os.path.join(folder, name)
                st = os.lstat(full)
                out.append(StoredObject(os.path.relpath(full, self.root).replace(os.sep, "/"), st.st_size, st.st_mtime))
        return out

    def read(self, key: str) -> bytes:
        try:
            return self._path(key).read_bytes()
        except OSError as exc:
            raise StorageError(f"reading {self.uri}/{key} failed: {exc}") from exc

    def write(self, key: str, data: bytes) -> None:
        if not key.startswith(METADATA_PREFIX):
            raise StorageError(f"the GC writes only under {METADATA_PREFIX}, not {key!r}")
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_bytes(data)
            tmp.replace(path)
        except OSError as exc:
            raise StorageError(f"writing {self.uri}/{key} failed: {exc}") from exc

    def delete(self, keys: list[str]) -> int:
        done = 0
        for key in keys:
            if key.startswith(METADATA_PREFIX):
                raise StorageError(f"refusing to delete metadata {key!r}")
            try:
                self._path(key).unlink()
            except FileNotFoundError:
                pass  # already gone counts as deleted: a re-run of a partly collected namespace succeeds
            except OSError as exc:
                raise StorageError(f"deleting {self.uri}/{key} failed: {exc}") from exc
            done += 1
        return done


class S3Namespace:
    """A namespace ``s3://bucket/prefix``; ``client_factory`` builds a boto3 S3 client (one per thread)."""

    def __init__(self, uri: str, client_factory: Callable[[], object], *, workers: int = 8,
                 max_attempts: int = 8, sleep: Callable[[float], None] = time.sleep):
        rest = uri.removeprefix("s3://")
        self.uri = uri.rstrip("/")
        self.bucket, _, prefix = rest.partition("/")
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self.client = client_factory()
        self.client_factory = client_factory
        self.workers = workers
        self.max_attempts = max_attempts
        self.sleep = sleep
        self.delete_requests = 0

    def probe(self) -> None:
        """Fail early, and say why, when the credentials cannot list the namespace."""
        self._call("list", self.client.list_objects_v2, Bucket=self.bucket, Prefix=self.prefix, MaxKeys=1)

    def _call(self, what: str, fn: Callable, **kwargs):
        from botocore.exceptions import BotoCoreError, ClientError  # noqa: PLC0415

        for attempt in range(self.max_attempts):
            try:
                return fn(**kwargs)
            except ClientError as exc:
                code = exc.response.get("Error", {}).get("Code", "")
                status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
                if code in ("SlowDown", "Throttling", "RequestLimitExceeded") or status in (500, 503):
                    self.sleep(min(120.0, 2 ** attempt) * (0.5 + random.random() / 2))
                    continue
                raise StorageError(f"{what} on {self.uri} failed: {code or status}: {exc}") from exc
            except BotoCoreError as exc:
                if attempt + 1 < self.max_attempts:
                    self.sleep(min(120.0, 2 ** attempt))
                    continue
                raise StorageError(f"{what} on {self.uri} failed: {exc}") from exc
        raise StorageError(f"{what} on {self.uri}: still throttled after {self.max_attempts} attempts")

    def _list(self, prefix: str, delimiter: str | None = None) -> Iterator[dict]:
        token = None
        while True:
            kwargs = {"Bucket": self.bucket, "Prefix": prefix}
            if delimiter:
                kwargs["Delimiter"] = delimiter
            if token:
                kwargs["ContinuationToken"] = token
            page = self._call("list", self.client.list_objects_v2, **kwargs)
            yield page
            if not page.get("IsTruncated"):
                return
            token = page["NextContinuationToken"]

    def _objects(self, page: dict) -> list[StoredObject]:
        return [StoredObject(o["Key"][len(self.prefix):], o["Size"], o["LastModified"].timestamp())
                for o in page.get("Contents", [])]

    def list_data(self) -> Iterator[StoredObject]:
        slices = []
        for page in self._list(self.prefix, "/"):
            yield from self._objects(page)  # legacy objects at the root
        for page in self._list(self.prefix + "data/", "/"):
            yield from self._objects(page)
            slices += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
        with ThreadPoolExecutor(self.workers) as pool:  # in parallel by slice
            for found in pool.map(lambda s: [o for p in self._list(s) for o in self._objects(p)], slices):
                yield from found

    def list_metadata(self, prefix: str) -> list[str]:
        """Keys of the objects under ``prefix`` inside ``_lakefs/`` (what lakeFS wrote for a GC run)."""
        start = self.prefix + _metadata_prefix(prefix)
        return sorted(o["Key"][len(self.prefix):] for page in self._list(start) for o in page.get("Contents", []))

    def read(self, key: str) -> bytes:
        body = self._call("read", self.client.get_object, Bucket=self.bucket, Key=self.prefix + _check_key(key))
        return body["Body"].read()

    def write(self, key: str, data: bytes) -> None:
        if not key.startswith(METADATA_PREFIX):
            raise StorageError(f"the GC writes only under {METADATA_PREFIX}, not {key!r}")
        self._call("write", self.client.put_object, Bucket=self.bucket, Key=self.prefix + _check_key(key), Body=data)

    def delete(self, keys: list[str]) -> int:
        for key in keys:
            if _check_key(key).startswith(METADATA_PREFIX):
                raise StorageError(f"refusing to delete metadata {key!r}")
        batches = [keys[i:i + S3_DELETE_BATCH] for i in range(0, len(keys), S3_DELETE_BATCH)]
        with ThreadPoolExecutor(min(self.workers, max(1, len(batches)))) as pool:
            return sum(pool.map(self._delete_batch, batches))

    def _delete_batch(self, batch: list[str]) -> int:
        self.delete_requests += 1
        answer = self._call("delete", self.client.delete_objects, Bucket=self.bucket, Delete={
            "Objects": [{"Key": self.prefix + k} for k in batch], "Quiet": True})
        errors = [e for e in answer.get("Errors", []) if e.get("Code") != "NoSuchKey"]  # already gone: deleted
        if errors:
            raise StorageError(f"deleting from {self.uri}: {len(errors)} keys failed, e.g. {errors[0]}")
        return len(batch)


def open_namespace(uri: str, *, local_root: str | None = None, s3_client_factory: Callable[[], object] | None = None,
                   ) -> Namespace:
    """``local://name`` under the local blockstore folder, or ``s3://bucket/prefix``."""
    if uri.startswith("local://"):
        if not local_root:
            raise StorageError(f"namespace {uri} is on lakeFS's local blockstore: set the blockstore folder "
                               "(LAKEFS_JANITOR_GC__LOCAL_BLOCKSTORE_PATH, lakeFS's blockstore.local.path)")
        return LocalNamespace(uri, Path(local_root) / uri.removeprefix("local://").strip("/"))
    if uri.startswith("s3://"):
        if s3_client_factory is None:
            raise StorageError(f"namespace {uri} is on S3 but no S3 client is configured")
        return S3Namespace(uri, s3_client_factory)
    raise StorageError(f"storage namespace {uri!r}: only local:// and s3:// are supported")


def namespace_uris(ns: Namespace, *, local_root: str | None = None) -> tuple[str, ...]:
    """The forms a full address inside this namespace can take (to map them back to relative keys)."""
    forms = list(namespace_prefixes(ns.uri, str(Path(local_root)) if local_root else None))
    if isinstance(ns, LocalNamespace):
        forms += ["local://" + str(ns.root), "local:" + str(ns.root)]
    return tuple(dict.fromkeys(forms))


def chunks(items: list[str], size: int) -> Iterable[list[str]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]
