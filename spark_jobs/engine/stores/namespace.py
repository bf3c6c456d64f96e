"""``Namespace``: one storage namespace on its store, the contract each store module implements (``local``, ``s3``,
``azure``, ``gcs``), with the listing, reading, writing and batched deleting written once over a handful of
per-store steps (``where``, ``fsspec_options``, ``_get``, ``_write``, ``_metadata_listing``, ``_unit_pages`` (a
unit's listing, page by page) or ``_unit_infos``, ``_batch_request`` or the whole ``_delete_batch``; the fsspec calls
by default). Every request goes through ``_call`` (``faults.throttled_call``: under the process's throttle for the
store).
"""

from __future__ import annotations

import functools
import mmap
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

import pyarrow as pa

from spark_jobs.core.addresses import namespace_prefixes
from spark_jobs.core.columns import LISTING_SCHEMA
from spark_jobs.core.freeing import UNKNOWN, Verdict
from spark_jobs.core.plan import METADATA_PREFIX, StoredObject, is_data_key
from spark_jobs.engine.stores.base import DeleteResult, Location, StorageConfig, StorageError, check_key
from spark_jobs.engine.stores.faults import throttled_call
from spark_jobs.engine.stores.throttle import Throttled, ThrottleStats, shared_throttle


def _mtime(info: dict) -> float:
    for key in ("LastModified", "last_modified", "mtime", "updated", "created", "creation_time"):
        value = info.get(key)
        if isinstance(value, datetime):
            return value.timestamp()
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str) and value:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    raise StorageError(f"no modification time for {info.get('name')}: cannot apply the safety cutoff")


class Namespace:
    """One storage namespace on its store: what the GC lists, reads, writes (under ``_lakefs/`` only) and deletes
    (never under ``_lakefs/``). Opened by ``stores.open_namespace``, which picks the store's subclass; a subclass
    names its store and batch size and overrides the steps its store does differently."""

    store = ""  # local | s3 | azure | gcs
    protocol = ""  # the fsspec protocol of its filesystem
    batch = 1  # keys per delete request
    page_size = 1000  # objects per listing page (the most S3, GCS and Azure give in one; the local walk's batch)
    package = ""  # the Python package fsspec needs for the store, named when it is missing
    settings_hint = "the store settings"  # what to check when the namespace cannot be listed

    def __init__(self, config: StorageConfig, location: Location) -> None:
        self.config = config
        self.location = location
        self.root = location.root
        self.options = config.options(self.store)
        if not self.defers_filesystem():  # built now, so that unusable settings fail the open
            self.fs  # noqa: B018
        # per store, not per namespace object: each partition opens its own, the cap is the process's
        self.throttle = shared_throttle(f"{self.store}:{self.root.partition('/')[0]}", config.max_in_flight)
        self.prefixes = namespace_prefixes(config.namespace, config.local_root)

    def defers_filesystem(self) -> bool:
        """Whether the fsspec filesystem may wait for its first use: a store module that makes a run's requests with
        a client of its own (S3's plain botocore client) builds it only for what that client does not do."""
        return False

    @functools.cached_property
    def fs(self):
        """The namespace's fsspec filesystem (``filesystem``)."""
        return self.filesystem(self.location, self.options)

    @classmethod
    def where(cls, rest: str, local_root: str | None) -> Location | None:
        """Where a namespace of this store's scheme lives (``rest``: the namespace after ``scheme://``), or None
        when it is not one this store reads. By default a bucket's: ``rest`` is ``bucket/prefix``."""
        return Location(cls.store, cls.protocol, rest.strip("/"))

    @classmethod
    def fsspec_options(cls, location: Location, options: dict[str, Any]) -> dict[str, Any]:
        """The store's own changes to its fsspec options (``options`` is the caller's copy)."""
        return options

    @classmethod
    def filesystem_class(cls, location: Location):
        """The fsspec filesystem class for the store (a store module may name its own, configured for the GC)."""
        import fsspec  # noqa: PLC0415 - built on executors too, after the zip is importable

        return fsspec.get_filesystem_class(location.protocol)

    @classmethod
    def filesystem(cls, location: Location, options: dict[str, Any]):
        options = cls.fsspec_options(location, dict(options))
        # A GC must see the namespace as it is now: no listing cache. The instance is shared by every namespace
        # with the same options in this process (fsspec's instance cache): a client is built once per executor.
        options.setdefault("use_listings_cache", False)
        try:
            return cls.tuned(cls.filesystem_class(location)(**options))
        except ImportError as exc:
            raise StorageError(f"{cls.store} namespaces need the Python package {cls.package} ({exc})") from None
        except (TypeError, ValueError) as exc:
            raise StorageError(f"the {cls.store} storage settings are unusable: {exc}") from None

    @classmethod
    def tuned(cls, fs):
        """The filesystem once built, with the store's settings fsspec takes only as attributes."""
        return fs

    def path(self, key: str) -> str:
        return f"{self.root}/{check_key(key)}"

    def _call(self, what: str, fn, tally: ThrottleStats | None = None):
        """One request (or one library call) under the store's throttle (``faults.throttled_call``)."""
        return throttled_call(self.throttle, what, fn, namespace=self.config.namespace, tally=tally)

    def probe(self) -> None:
        """Fail early, and say why, when the namespace cannot be listed with the settings given."""
        try:
            self._call("list", lambda: self.fs.ls(self.root, detail=False))
        except FileNotFoundError:
            raise StorageError(f"{self.config.namespace} does not exist or is empty (no _lakefs/ there): check "
                               f"{self.settings_hint}") from None

    def freeing(self) -> Verdict:
        """Whether what the GC deletes here is freed at once, later, or never: the bucket's or container's
        settings (versioning, lifecycle rules, soft delete) read with the store's API and judged by
        ``core.freeing``. A setting the identity may not read is said in the verdict, never raised."""
        return Verdict(self.store, UNKNOWN, f"{self.store}: reading its settings is not implemented")

    def purge_noncurrent(self, keys: list[str]) -> DeleteResult:
        """Remove the noncurrent versions of exactly ``keys`` (keys this run just deleted); a key written again
        since (a current version) keeps all its versions. Stores without versions have nothing to remove."""
        return DeleteResult()

    def read(self, key: str) -> bytes:
        try:
            return self._call(f"reading {key}", lambda: self._get(key))
        except FileNotFoundError:
            raise StorageError(f"{self.config.namespace}/{key} does not exist") from None

    def read_mapped(self, key: str) -> bytes | mmap.mmap:
        """``read``; on a store that is this machine's disk, the file mapped read-only instead (its pages are the page
        cache's: neither copied nor allocated), for a reader that takes any buffer (the range decoders)."""
        return self.read(key)

    def read_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes [start, end) of one object: a ranged read (shorter when the object is; ``start`` inside it)."""
        if end <= start:
            return b""
        try:
            return self._call(f"reading {key} [{start}, {end})", lambda: self._get_range(key, start, end))
        except FileNotFoundError:
            raise StorageError(f"{self.config.namespace}/{key} does not exist") from None

    def _get_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes [start, end) of one object (``start`` < ``end``); FileNotFoundError when it does not exist."""
        return self.fs.cat_file(self.path(key), start=start, end=end)

    def read_ranges(self, key: str, spans: list[tuple[int, int]]) -> list[bytes]:
        """``read_range`` of each span of one object, the requests in flight together (up to the store's cap)."""
        return self._each(lambda span: self.read_range(key, *span), spans)

    def size(self, key: str) -> int:
        try:
            return int(self._call(f"reading the size of {key}", lambda: self._info(key)).get("size") or 0)
        except FileNotFoundError:
            raise StorageError(f"{self.config.namespace}/{key} does not exist") from None

    def _get(self, key: str) -> bytes:
        """One object's bytes; FileNotFoundError when it (or its bucket) does not exist."""
        return self.fs.cat_file(self.path(key))

    def write(self, key: str, data: bytes) -> None:
        if not check_key(key).startswith(METADATA_PREFIX):
            raise StorageError(f"refusing to write {key}: the GC writes only under {METADATA_PREFIX}")
        self._write(key, self.path(key), data)

    def _write(self, key: str, path: str, data: bytes) -> None:
        self._call(f"writing {key}", lambda: self.fs.pipe_file(path, data))

    def read_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        """``read`` of each key, the requests in flight together (up to the store's cap): a run's few metadata
        files cost one round trip instead of one each. The first failure is raised."""
        return dict(zip(keys := list(keys), self._each(self.read, keys), strict=True))

    def write_many(self, files: Mapping[str, bytes]) -> None:
        """``write`` of each file, in flight together; which lands first is not said (write what must come
        last, such as a pointer or a summary, after this returns)."""
        self._each(lambda key: self.write(key, files[key]), list(files))

    def _each(self, fn, keys: list[str]) -> list:
        if len(keys) <= 1:
            return [fn(key) for key in keys]
        with ThreadPoolExecutor(max(1, min(len(keys), self.config.max_in_flight)), thread_name_prefix="gc-ns") as pool:
            return list(pool.map(fn, keys))

    def folders(self, prefix: str) -> list[str]:
        """The names of the folders directly under ``prefix`` (read-only; e.g. the dated folders of an inventory
        configuration); empty when there is none."""
        try:
            found = self._call(f"listing {prefix}", lambda: self.fs.ls(self.path(prefix.strip("/")), detail=True,
                                                                       refresh=True))
        except FileNotFoundError:
            return []
        return sorted(e["name"].rstrip("/").rsplit("/", 1)[-1] for e in found if e.get("type") == "directory")

    def list_metadata(self, prefix: str) -> list[str]:
        """Keys of the files under ``prefix`` inside ``_lakefs/`` (what lakeFS wrote for a GC run)."""
        if not check_key(prefix).startswith(METADATA_PREFIX):
            raise StorageError(f"the GC lists only lakeFS's metadata under {METADATA_PREFIX}, not {prefix!r}")
        base = f"{self.root}/"
        try:
            found = self._call(f"listing {prefix}", lambda: self.fs.find(self.path(prefix.rstrip("/"))))
        except FileNotFoundError:
            return []
        return sorted(name[len(base):] for name in found if name.startswith(base))

    def metadata_sizes(self) -> dict[str, int]:
        """Name -> size of every file directly under ``_lakefs/`` (the range files and metaranges), from one
        listing; empty when there is no ``_lakefs/``."""
        try:
            found = self._call("listing _lakefs/", self._metadata_listing)
        except FileNotFoundError:
            return {}
        return {e["name"].rstrip("/").rsplit("/", 1)[-1]: int(e.get("size") or 0) for e in found
                if e.get("type") == "file"}

    def _metadata_listing(self) -> list[dict[str, Any]]:
        """What is directly under ``_lakefs/``, as fsspec describes it (name, size, type)."""
        return self.fs.ls(self.path("_lakefs"), detail=True, refresh=True)

    def list_units(self) -> list[str]:
        """``data/<slice>/`` for every slice, then ``""`` for the namespace root (legacy flat layout)."""
        try:
            entries = self._call("listing data/", lambda: self.fs.ls(self.path("data"), detail=True, refresh=True))
        except FileNotFoundError:
            entries = []
        units = {f"data/{e['name'].rstrip('/').rsplit('/', 1)[-1]}/" for e in entries if e.get("type") == "directory"}
        return sorted(units) + [""]

    def list_unit(self, unit: str) -> list[StoredObject]:
        """Every object of one unit (``list_unit_batches``' rows, as objects)."""
        return [StoredObject(*row) for batch in self.list_unit_batches(unit)
                for row in zip(*(column.to_pylist() for column in batch.columns), strict=True)]

    def list_unit_batches(self, unit: str) -> Iterator[pa.RecordBatch]:
        """Every object of one unit, a page of the store's listing at a time, as Arrow record batches
        (``columns.LISTING_SCHEMA``: key, size, mtime): the data keys under ``data/<slice>/``, or for the root unit
        ``""`` only the files directly in it, without ``_lakefs`` and ``dummy``. What the store said of an object
        (fsspec's description, or the store's own page) lives as long as its page, never for the whole slice."""
        base = f"{self.root}/"
        try:
            for page in self._unit_pages(unit):
                keys, sizes, mtimes = [], [], []
                for info in page:
                    name = info["name"]
                    if not name.startswith(base) or info.get("type") == "directory":
                        continue
                    key = name[len(base):]
                    if not key or key.startswith(METADATA_PREFIX) or key == "dummy" or key.endswith("/"):
                        continue
                    keys.append(key)
                    sizes.append(int(info.get("size") or 0))
                    mtimes.append(_mtime(info))
                del page
                if keys:
                    yield pa.RecordBatch.from_arrays([pa.array(keys, pa.string()), pa.array(sizes, pa.int64()),
                                                      pa.array(mtimes, pa.float64())], schema=LISTING_SCHEMA)
        except FileNotFoundError:
            return

    def _unit_pages(self, unit: str) -> Iterator[list[dict[str, Any]]]:
        """The files of one unit as fsspec describes them (name, size, a modification time), a page of at most
        ``page_size`` at a time. A store module lists page by page with its own requests (each under ``_call``);
        by default this cuts ``_unit_infos`` (the whole unit at once) into pages."""
        infos = list(self._unit_infos(unit))
        for start in range(0, len(infos), self.page_size):
            yield infos[start:start + self.page_size]

    def _unit_infos(self, unit: str) -> Iterable[dict[str, Any]]:
        """The files of one unit as fsspec describes them (name, size, a modification time): everything under
        ``data/<slice>/``, or only the files directly in the root for ``""``."""
        if unit:
            return self._call(f"listing {unit}", lambda: self.fs.find(self.path(unit.rstrip("/")),
                                                                      detail=True)).values()
        return [e for e in self._call("listing the root", lambda: self.fs.ls(self.root, detail=True, refresh=True))
                if e.get("type") == "file"]

    def stat(self, keys: Iterable[str]) -> list[StoredObject]:
        """The data objects of ``keys`` that exist, each with its size and modification time (one request each,
        in flight together up to the store's cap): how an incremental run finds what it did not list."""
        keys = [k for k in keys if is_data_key(check_key(k))]
        found = self._each(self._stat_one, keys)
        return [o for o in found if o is not None]

    def _stat_one(self, key: str) -> StoredObject | None:
        try:
            info = self._call(f"reading the size and time of {key}", lambda: self._info(key))
        except FileNotFoundError:
            return None
        if info.get("type") == "directory":
            return None
        return StoredObject(key, int(info.get("size") or 0), _mtime(info))

    def _info(self, key: str) -> dict[str, Any]:
        """One object as fsspec describes it (size, a modification time); FileNotFoundError when it is gone."""
        return self.fs.info(self.path(key))

    def list_data(self) -> Iterable[StoredObject]:
        """Every data object, unit by unit (the runners list units in parallel)."""
        for unit in self.list_units():
            yield from self.list_unit(unit)

    def delete(self, keys: Iterable[str]) -> DeleteResult:
        """Delete in the store's batches; an object already gone counts as deleted (a re-run over a partly
        collected namespace). Refuses anything under ``_lakefs/``."""
        keys = list(keys)
        for key in keys:
            if check_key(key).startswith(METADATA_PREFIX):
                raise StorageError(f"refusing to delete metadata {key!r}")
        result, tally = DeleteResult(), ThrottleStats()
        for start in range(0, len(keys), self.batch):
            self._delete_batch(keys[start:start + self.batch], result, tally)
        result.requests, result.backoffs = tally.requests, tally.backoffs
        return result

    def _delete_batch(self, batch: list[str], result: DeleteResult, tally: ThrottleStats) -> None:
        """One batch through the store's batch request, under the throttle; keys the store throttled alone are
        retried alone after a back-off, and reported failed when they are still throttled."""
        pending = list(batch)
        for attempt in range(self.throttle.max_attempts):
            throttled_keys: list[str] = []

            def request(keys=pending, retry=throttled_keys) -> None:
                retry.clear()
                done, again, failed = self._batch_request(keys)
                result.deleted += done
                result.failed.extend(failed)
                if again and len(again) == len(keys):
                    raise Throttled(f"all {len(keys)} keys of a batch delete were throttled")
                retry.extend(again)

            self._call("batch delete", request, tally)
            if not throttled_keys:
                return
            # some keys of the batch were throttled: that answer is throttling too; retry only those
            self.throttle.back_off(attempt, tally)
            pending = list(throttled_keys)
        result.failed.extend(f"{k}: still throttled" for k in pending)

    def _batch_request(self, keys: list[str]) -> tuple[int, list[str], list[str]]:
        """One batch-delete request: (deleted, keys to retry because the store throttled them, failures)."""
        raise NotImplementedError

    def _names(self, keys: list[str]) -> dict[str, str]:
        """Each key's object name inside the bucket or container (the root's first segment), to its key."""
        return {self.path(k).partition("/")[2]: k for k in keys}
