"""The storage namespace through fsspec: read and write GC metadata, list data objects by unit (one unit per
``data/<slice>/`` plus the legacy flat root), and delete in provider batches.

Built from plain configuration (``StorageConfig``) so an executor can rebuild it. Never lists or deletes under
``_lakefs/``; never touches anything outside the namespace (addresses are relative to it by construction).

* S3 (s3fs): listing by prefix, deletes with DeleteObjects at 1,000 keys per request, back-off and retry of keys
  that failed with SlowDown / 503 / InternalError; NoSuchKey counts as deleted.
* local (lakeFS's local blockstore): ``local://<name>`` is the folder ``<blockstore root>/<name>``; the root is
  found from the full addresses lakeFS reports (see addresses.local_root_from).
* GCS / Azure: the same code through gcsfs / adlfs (``fs.rm`` of a list: gcsfs batches 100 per request, adlfs
  deletes concurrently); install them next to the janitor and pass their options as storage options.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from spark_jobs.core.plan import METADATA_PREFIX, StoredObject

S3_BATCH = 1000
RETRYABLE_S3 = {"SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout", "Throttling", "503"}


class StorageError(RuntimeError):
    reason = "storage"


@dataclass(frozen=True)
class StorageConfig:
    namespace: str  # as lakeFS gives it: s3://bucket/prefix, local://name, gs://..., az://...
    local_root: str | None = None  # the local blockstore's root folder, for local:// namespaces
    options_json: str | None = None  # fsspec storage options (JSON object), e.g. an S3 endpoint and keys

    def options(self) -> dict:
        return json.loads(self.options_json) if self.options_json else {}


@dataclass
class DeleteResult:
    deleted: int = 0
    requests: int = 0
    failed: list[str] | None = None


def _mtime(info: dict) -> float:
    for key in ("LastModified", "last_modified", "mtime", "updated", "created"):
        value = info.get(key)
        if isinstance(value, datetime):
            return value.timestamp()
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str) and value:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    raise StorageError(f"no modification time for {info.get('name')}: cannot apply the safety cutoff")


class Namespace:
    def __init__(self, config: StorageConfig) -> None:
        import fsspec  # noqa: PLC0415 - built on executors too, after the zip is importable

        self.config = config
        scheme, _, rest = config.namespace.partition("://")
        if not rest:
            raise StorageError(f"storage namespace {config.namespace!r} is not a URL")
        self.scheme = scheme
        if scheme == "local":
            if not config.local_root:
                raise StorageError(f"{config.namespace}: the local blockstore's root is unknown "
                                   "(no full address to learn it from)")
            self.fs = fsspec.filesystem("file")
            self.root = f"{config.local_root.rstrip('/')}/{rest.strip('/')}"
        else:
            protocol = {"s3a": "s3", "abfs": "abfs", "az": "az", "gs": "gcs"}.get(scheme, scheme)
            options = config.options()
            # A GC must see the namespace as it is now: no listing cache. The filesystem instance itself is shared
            # by every context with the same options in this process (fsspec's instance cache): building an S3
            # client costs ~0.3 s of CPU, once per executor process rather than once per task or thread.
            options.setdefault("use_listings_cache", False)
            self.fs = fsspec.filesystem(protocol, **options)
            self.root = rest.strip("/")

    def path(self, address: str) -> str:
        return f"{self.root}/{address.lstrip('/')}"

    def read(self, address: str) -> bytes:
        try:
            return self.fs.cat_file(self.path(address))
        except FileNotFoundError:
            raise StorageError(f"{self.config.namespace}/{address} does not exist") from None
        except Exception as exc:  # noqa: BLE001 - provider errors vary; the message says which file
            raise StorageError(f"cannot read {self.config.namespace}/{address}: {exc}") from exc

    def write(self, address: str, data: bytes) -> None:
        if not address.startswith(METADATA_PREFIX):
            raise StorageError(f"refusing to write {address}: the GC writes only under {METADATA_PREFIX}")
        path = self.path(address)
        if self.scheme == "local":
            self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        self.fs.pipe_file(path, data)

    def list_units(self) -> list[str]:
        """``data/<slice>/`` for every slice, then ``""`` for the namespace root (legacy flat layout)."""
        units = []
        data = self.path("data")
        try:
            entries = self.fs.ls(data, detail=True, refresh=True) if self.fs.exists(data) else []
        except FileNotFoundError:
            entries = []
        for entry in entries:
            if entry.get("type") == "directory":
                units.append(f"data/{entry['name'].rstrip('/').rsplit('/', 1)[-1]}/")
        return sorted(units) + [""]

    def list_unit(self, unit: str) -> list[StoredObject]:
        """Every object of one unit; the root unit is not recursive and skips ``_lakefs`` and ``dummy``."""
        prefix = f"{self.root}/"
        if unit:
            found = self.fs.find(self.path(unit), detail=True)
            infos = found.values()
        else:
            infos = [e for e in self.fs.ls(self.root, detail=True, refresh=True) if e.get("type") == "file"]
        out = []
        for info in infos:
            name = info["name"]
            if not name.startswith(prefix) or info.get("type") == "directory":
                continue
            address = name[len(prefix):]
            if address.startswith(METADATA_PREFIX) or address == "dummy" or not address:
                continue
            out.append(StoredObject(address, int(info.get("size") or 0), _mtime(info)))
        return out

    def delete(self, addresses: Iterable[str]) -> DeleteResult:
        addresses = [a for a in addresses if a and not a.startswith(METADATA_PREFIX)]
        if self.scheme == "s3":
            return self._delete_s3(addresses)
        result = DeleteResult()
        if self.scheme == "local":
            for address in addresses:
                try:
                    self.fs.rm_file(self.path(address))
                except FileNotFoundError:
                    pass  # already gone: a re-run over a partly collected namespace
                result.deleted += 1
                result.requests += 1
            return result
        paths = [self.path(a) for a in addresses]
        self.fs.rm(paths)
        return DeleteResult(deleted=len(paths), requests=-1)

    def _delete_s3(self, addresses: list[str]) -> DeleteResult:
        result = DeleteResult(failed=[])
        bucket, _, _ = self.root.partition("/")
        for start in range(0, len(addresses), S3_BATCH):
            keys = [self.path(a).partition("/")[2] for a in addresses[start:start + S3_BATCH]]
            attempt = 0
            while keys:
                out = self.fs.call_s3("delete_objects", Bucket=bucket,
                                      Delete={"Objects": [{"Key": k} for k in keys], "Quiet": True})
                result.requests += 1
                errors = out.get("Errors", [])
                retry = [e["Key"] for e in errors if e.get("Code") in RETRYABLE_S3]
                fatal = [e for e in errors if e.get("Code") not in RETRYABLE_S3 and e.get("Code") != "NoSuchKey"]
                result.deleted += len(keys) - len(retry) - len(fatal)
                result.failed += [f"{e['Key']}: {e.get('Code')} {e.get('Message', '')}" for e in fatal]
                keys = retry
                if keys:
                    attempt += 1
                    if attempt > 8:
                        result.failed += [f"{k}: still throttled after {attempt} attempts" for k in keys]
                        break
                    time.sleep(min(30.0, 0.2 * 2 ** attempt) * (0.5 + random.random()))
        return result
