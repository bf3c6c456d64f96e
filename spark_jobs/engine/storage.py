"""The storage namespace as the GC sees it, on every store lakeFS supports, through fsspec: list data objects by
unit (one unit per ``data/<slice>/`` plus the legacy flat root), read, write under ``_lakefs/``, and delete in the
store's batches under its throttling (``throttle.Throttle``).

On S3, reads and listings go through one plain botocore client per process when the options have a plain
botocore equivalent (``plain_s3_arguments``): s3fs's event loop costs twice the CPU per request.

Built from plain configuration (``StorageConfig``) so an executor can rebuild it. Never lists, writes or deletes
outside the namespace (keys are relative to it by construction and checked), and never deletes under ``_lakefs/``.

=========  ==========================================================  ===========  ===========================
store      namespace forms (as lakeFS accepts them)                     fsspec       delete batch
=========  ==========================================================  ===========  ===========================
local      ``local://<name>`` (under lakeFS's blockstore.local.path)   file         one unlink per object
S3         ``s3://bucket/prefix`` (``s3a://`` read as the same)         s3fs         DeleteObjects, 1,000 keys
Azure      ``https://<account>.blob.core.windows.net/<container>/…``   adlfs        blob batch, 256 blobs
           (ADLS Gen2: ``…dfs.core.windows.net/…``, the same blobs)
GCS        ``gs://bucket/prefix``                                      gcsfs        JSON batch, 100 objects
=========  ==========================================================  ===========  ===========================
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from spark_jobs.core.addresses import namespace_prefixes
from spark_jobs.core.plan import METADATA_PREFIX, StoredObject
from spark_jobs.engine.throttle import Throttled, ThrottleStats, Unreachable, shared_throttle

BATCH = {"local": 1000, "s3": 1000, "azure": 256, "gcs": 100}
AZURE_HOST = re.compile(r"^(?P<account>[a-z0-9]{3,24})\.(?:blob|dfs)\.core\.windows\.net$")
# What the stores answer when they throttle or have a passing fault worth a retry at a lower rate
THROTTLING = ("SlowDown", "ServerBusy", "Throttl", "TooManyRequests", "Too Many Requests", "RequestLimitExceeded",
              "ServiceUnavailable", "Service Unavailable", "InternalError", "OperationTimedOut", "rateLimitExceeded")
THROTTLING_STATUS = {429, 500, 502, 503, 504}
# A request that timed out or lost its connection, as each store library (and the asyncio/aiohttp underneath)
# names it: passing on a busy network, or the store gone
UNREACHABLE = ("Timeout", "TimedOut", "ConnectionError", "ConnectionClosed", "EndpointConnection",
               "ServerDisconnected", "ClientConnector", "ClientOSError", "ConnectionReset", "IncompleteRead")


class StorageError(RuntimeError):
    def __init__(self, message: str, reason: str = "storage") -> None:
        super().__init__(message)
        self.reason = reason  # labels the failure metric: storage, storage-unavailable, storage-throttled

    def __reduce__(self):  # from an executor to the driver with its reason
        return type(self), (str(self), self.reason)


@dataclass(frozen=True)
class Location:
    store: str  # local | s3 | azure | gcs
    protocol: str  # fsspec protocol
    root: str  # the namespace's path as fsspec names it: bucket/prefix, container/prefix, or a local folder
    account: str | None = None  # Azure storage account


def locate(namespace: str, local_root: str | None = None) -> Location:
    """Where a storage namespace lives, or a StorageError that says which forms are supported."""
    scheme, _, rest = namespace.partition("://")
    if not rest.strip("/"):
        raise StorageError(f"storage namespace {namespace!r} is not a URL with a bucket, container or name")
    if scheme == "local":
        if not local_root:
            raise StorageError(f"{namespace} is on lakeFS's local blockstore: set the blockstore folder "
                               "(LAKEFS_JANITOR_GC__LOCAL_BLOCKSTORE_PATH, lakeFS's blockstore.local.path)")
        return Location("local", "file", f"{local_root.rstrip('/')}/{rest.strip('/')}")
    if scheme in ("s3", "s3a"):
        return Location("s3", "s3", rest.strip("/"))
    if scheme == "gs":
        return Location("gcs", "gcs", rest.strip("/"))
    if scheme in ("https", "http"):
        host, _, path = rest.partition("/")
        match = AZURE_HOST.match(host)
        if match and path.strip("/"):
            return Location("azure", "abfs", path.strip("/"), match.group("account"))
    raise StorageError(f"storage namespace {namespace!r}: supported are local://name, s3://bucket/prefix, "
                       "gs://bucket/prefix and https://<account>.blob.core.windows.net/<container>/<prefix>")


@dataclass(frozen=True)
class StorageConfig:
    namespace: str  # as lakeFS gives it
    local_root: str | None = None  # the local blockstore's folder, for local:// namespaces
    # fsspec options per store, a JSON object {"s3": {...}, "azure": {...}, "gcs": {...}}: endpoint, credentials
    options_json: str | None = None
    max_in_flight: int = 8  # requests to the store at once, per process

    def options(self, store: str) -> dict[str, Any]:
        try:
            every = json.loads(self.options_json) if self.options_json else {}
        except ValueError as exc:
            raise StorageError(f"the storage options are not JSON: {exc}") from None
        if not isinstance(every, dict) or not isinstance(every.get(store, {}), dict):
            raise StorageError('the storage options must be a JSON object {"s3": {...}, "azure": {...}, "gcs": {...}}')
        return dict(every.get(store) or {})


@dataclass
class DeleteResult:
    deleted: int = 0
    requests: int = 0
    backoffs: int = 0
    failed: list[str] = field(default_factory=list)


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


def _status(exc: BaseException) -> int | None:
    for attr in ("status_code", "status", "code"):
        value = getattr(exc, attr, None)
        if isinstance(value, int):
            return value
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return None


def is_throttling(exc: BaseException) -> bool:
    """Whether an error from a store library says "slow down" (or a passing server fault)."""
    seen: BaseException | None = exc
    while seen is not None:
        if _status(seen) in THROTTLING_STATUS or any(word in str(seen) for word in THROTTLING):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def is_unreachable(exc: BaseException) -> bool:
    """Whether an error from a store library is a time-out or a failed connection (not an answer)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, (TimeoutError, ConnectionError)) or any(
                word in type(seen).__name__ for word in UNREACHABLE) or "timed out" in str(seen).lower():
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def check_key(key: str) -> str:
    if not key or key.startswith("/") or ".." in key.split("/") or "://" in key:
        raise StorageError(f"refusing a key that leaves the namespace: {key!r}")
    return key


def iso_timestamp(value: Any) -> datetime:
    """botocore's timestamp parser, with the common case first: S3 dates every listed object in ISO 8601 with its
    zone, which ``datetime.fromisoformat`` reads about 50× faster than botocore's dateutil (dateutil was 60% of the
    client's time listing _lakefs/ on versitygw). Anything else (HTTP dates in headers, epoch seconds, a date
    without a zone) goes to botocore's own parser, so every value reads as botocore would read it."""
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            parsed = None
        if parsed is not None and parsed.tzinfo is not None:
            return parsed
    from botocore.utils import parse_timestamp  # noqa: PLC0415

    return parse_timestamp(value)


@functools.cache
def _s3_session():
    """One aiobotocore session per process for every S3 namespace (fsspec then keeps one client per options, as
    without it), reading timestamps with ``iso_timestamp``. Built at first use, not at import."""
    from aiobotocore.session import AioSession  # noqa: PLC0415

    class Session(AioSession):
        def __reduce__(self):  # an fsspec filesystem pickles its options: this one as "the process's own"
            return _s3_session, ()

    session = Session()
    session.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=iso_timestamp)
    return session


def _session_options(options: dict[str, Any]) -> set[str]:
    """The S3 options s3fs hands to the aiobotocore session it builds (``profile``, …): any it does not name."""
    import inspect  # noqa: PLC0415

    import fsspec  # noqa: PLC0415

    named = set(inspect.signature(fsspec.get_filesystem_class("s3").__init__).parameters)
    fsspec_own = {"use_listings_cache", "listings_expiry_time", "max_paths", "skip_instance_cache"}
    return set(options) - named - fsspec_own


# The s3fs options a plain botocore client reproduces exactly, and create_client's arguments in client_kwargs
_PLAIN_S3 = {"key", "secret", "token", "endpoint_url", "use_ssl", "anon", "client_kwargs", "config_kwargs",
             "use_listings_cache", "listings_expiry_time", "skip_instance_cache"}
_CLIENT_ARGS = {"region_name", "endpoint_url", "use_ssl", "verify", "api_version"}


def plain_s3_arguments(options: dict[str, Any], max_in_flight: int) -> dict[str, Any] | None:
    """botocore's ``create_client`` arguments for the client s3fs builds from ``options``, or None when an option
    has no plain equivalent (a profile, a session, requester pays, extra request arguments, …): s3fs then does
    every request. Credentials not given come from botocore's usual chain, as in s3fs."""
    client_kwargs = {} if options.get("client_kwargs") is None else options["client_kwargs"]
    config_kwargs = {} if options.get("config_kwargs") is None else options["config_kwargs"]
    if set(options) - _PLAIN_S3 or not isinstance(client_kwargs, dict) or set(client_kwargs) - _CLIENT_ARGS \
            or not isinstance(config_kwargs, dict):
        return None
    from botocore import UNSIGNED  # noqa: PLC0415
    from botocore.config import Config  # noqa: PLC0415

    config = dict(config_kwargs)
    # as for s3fs below: the throttle sees every throttling answer; one connection per request in flight
    config.setdefault("retries", {"total_max_attempts": 1})
    config.setdefault("max_pool_connections", max(10, max_in_flight))
    if options.get("anon"):
        config["signature_version"] = UNSIGNED
    args = {"endpoint_url": options.get("endpoint_url"), "use_ssl": options.get("use_ssl", True),
            "aws_access_key_id": options.get("key"), "aws_secret_access_key": options.get("secret"),
            "aws_session_token": options.get("token"), **client_kwargs}
    try:
        args["config"] = Config(**config)
    except TypeError as exc:
        raise StorageError(f"the s3 storage settings are unusable: {exc}") from None
    return {k: v for k, v in args.items() if v is not None}


@functools.cache
def _plain_s3_client(options_json: str, max_in_flight: int, sizes_only: bool = False):
    """One botocore client per process and options (thread-safe, shared by every thread and namespace): a GET
    costs 1.9 ms of this process's CPU through it against 4.5 ms through s3fs's event loop, a listing of 2,000
    objects 80 against 160 ms. Timestamps read with ``iso_timestamp``. ``sizes_only``: a client of its own whose
    listings give each object's key and size only (``sizes_only_listing``), for the mark cache's check."""
    import botocore.session  # noqa: PLC0415

    args = plain_s3_arguments(json.loads(options_json), max_in_flight)
    if args is None:
        return None
    session = botocore.session.get_session()
    session.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=iso_timestamp)
    try:
        client = session.create_client("s3", **args)
    except Exception as exc:  # noqa: BLE001 - botocore's configuration errors vary
        raise StorageError(f"the s3 storage settings are unusable: {type(exc).__name__}: {exc}") from None
    if sizes_only:
        client.meta.events.register("before-parse.s3.ListObjectsV2", sizes_only_listing)
    return client


def sizes_only_listing(response_dict: dict, customized_response_dict: dict, **_: Any) -> None:
    """botocore's before-parse hook for a ListObjectsV2 page: the page read with ElementTree for what the mark
    cache's check needs (each object's key and size, the folders, the continuation), its body then handed to
    botocore's parser empty. botocore's generic parser spends ≈ 40 µs per listed object reading every field, a
    quarter of a warm run's own CPU on the bench's history. Anything but a listing page (an error, a body that is
    not XML) is left to botocore; the keys stay as sent, so botocore's own URL-decoding (EncodingType) applies."""
    import xml.etree.ElementTree as ET  # noqa: N817, PLC0415 - the standard library's parser, as botocore's

    if response_dict.get("status_code") != 200 or not response_dict.get("body"):
        return
    try:
        root = ET.fromstring(response_dict["body"])
    except ET.ParseError:
        return
    if not root.tag.endswith("ListBucketResult"):
        return
    ns = root.tag[:-len("ListBucketResult")]
    page: dict[str, Any] = {
        "IsTruncated": root.findtext(f"{ns}IsTruncated") == "true",
        "Contents": [{"Key": c.findtext(f"{ns}Key"), "Size": int(c.findtext(f"{ns}Size") or 0)}
                     for c in root.iterfind(f"{ns}Contents")],
        "CommonPrefixes": [{"Prefix": c.findtext(f"{ns}Prefix")} for c in root.iterfind(f"{ns}CommonPrefixes")]}
    for name in ("Name", "Prefix", "Delimiter", "EncodingType", "StartAfter", "ContinuationToken",
                 "NextContinuationToken"):
        if (value := root.findtext(f"{ns}{name}")) is not None:
            page[name] = value
    if (count := root.findtext(f"{ns}KeyCount")) is not None:
        page["KeyCount"] = int(count)
    customized_response_dict.update(page)
    response_dict["body"] = b""


def _client_error_code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    return str(response.get("Error", {}).get("Code", "")) if isinstance(response, dict) else ""


def _filesystem(location: Location, options: dict[str, Any]):
    import fsspec  # noqa: PLC0415 - built on executors too, after the zip is importable

    options = dict(options)
    if location.store == "local":
        return fsspec.filesystem("file")
    if location.store == "gcs":
        # gcsfs otherwise first probes a gRPC API for the bucket type, which stalls 60 s against emulators
        os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
    if location.store == "s3":
        # The throttle below retries throttled requests at a lowered rate: botocore's own retries would hide
        # every throttling answer from it (and retry at full speed).
        options.setdefault("config_kwargs", {}).setdefault("retries", {"total_max_attempts": 1})
        if not _session_options(options):  # a profile (or another session option) needs s3fs's own session
            options.setdefault("session", _s3_session())
    if location.store == "azure" and location.account and not options.get("connection_string"):
        options.setdefault("account_name", location.account)
    # A GC must see the namespace as it is now: no listing cache. The instance is shared by every namespace
    # with the same options in this process (fsspec's instance cache): a client is built once per executor.
    options.setdefault("use_listings_cache", False)
    try:
        fs = fsspec.filesystem(location.protocol, **options)
        if location.store == "s3":
            fs.retries = 1  # s3fs's own SlowDown retries, for the same reason
        return fs
    except ImportError as exc:
        package = {"s3": "s3fs", "azure": "adlfs", "gcs": "gcsfs"}[location.store]
        raise StorageError(f"{location.store} namespaces need the Python package {package} ({exc})") from None
    except (TypeError, ValueError) as exc:
        raise StorageError(f"the {location.store} storage settings are unusable: {exc}") from None


class Namespace:
    def __init__(self, config: StorageConfig) -> None:
        self.config = config
        self.location = locate(config.namespace, config.local_root)
        self.store = self.location.store
        self.root = self.location.root
        options = config.options(self.location.store)
        self.fs = _filesystem(self.location, options)
        # S3 reads and listings through one plain botocore client, when the options allow one
        self._options_json = json.dumps(options, sort_keys=True)
        self.s3 = _plain_s3_client(self._options_json, config.max_in_flight) if self.store == "s3" else None
        # per store, not per namespace object: each partition opens its own, the cap is the process's
        self.throttle = shared_throttle(f"{self.store}:{self.root.partition('/')[0]}", config.max_in_flight)
        self.prefixes = namespace_prefixes(config.namespace, config.local_root)

    def path(self, key: str) -> str:
        return f"{self.root}/{check_key(key)}"

    def _call(self, what: str, fn, tally: ThrottleStats | None = None):
        """One request (or one library call) under the throttle; other errors become a StorageError."""
        def attempt():
            try:
                return fn()
            except FileNotFoundError:
                raise
            except Exception as exc:  # noqa: BLE001 - provider errors vary; classified here
                if is_throttling(exc):
                    raise Throttled(str(exc)) from exc
                if is_unreachable(exc):
                    raise Unreachable(f"{type(exc).__name__}: {exc}") from exc
                raise StorageError(f"{what} on {self.config.namespace} failed: {type(exc).__name__}: {exc}") from exc
        try:
            return self.throttle.call(attempt, what, tally)
        except Unreachable as exc:
            raise StorageError(f"{what} on {self.config.namespace}: the store is unreachable (a request times out "
                               f"after GC__STORE_TIMEOUT_SECONDS): {exc}", "storage-unavailable") from None
        except Throttled as exc:
            raise StorageError(f"{what} on {self.config.namespace}: {exc}", "storage-throttled") from None

    def probe(self) -> None:
        """Fail early, and say why, when the namespace cannot be listed with the settings given."""
        try:
            self._call("list", lambda: self.fs.ls(self.root, detail=False))
        except FileNotFoundError:
            raise StorageError(f"{self.config.namespace} does not exist or is empty (no _lakefs/ there): check "
                               "the store settings" + (" and the blockstore folder" if self.store == "local" else
                                                       "")) from None

    def read(self, key: str) -> bytes:
        try:
            return self._call(f"reading {key}", (lambda: self._s3_get(key)) if self.s3 is not None else
                              (lambda: self.fs.cat_file(self.path(key))))
        except FileNotFoundError:
            raise StorageError(f"{self.config.namespace}/{key} does not exist") from None

    def _s3_get(self, key: str) -> bytes:
        bucket, _, name = self.path(key).partition("/")
        try:
            return self.s3.get_object(Bucket=bucket, Key=name)["Body"].read()
        except Exception as exc:
            if _client_error_code(exc) in ("NoSuchKey", "NoSuchBucket", "404"):
                raise FileNotFoundError(key) from None
            raise

    def _s3_listed(self, folder: str, *, recursive: bool, sizes_only: bool = False) -> list[dict[str, Any]]:
        """The objects under ``folder`` (a folder of the namespace, "" for its root; only those directly in it
        unless ``recursive``) as fsspec describes files: name (bucket/key), size, LastModified (None when
        ``sizes_only``: read with ``sizes_only_listing``)."""
        bucket, _, prefix = (f"{self.root}/{check_key(folder)}" if folder else self.root).partition("/")
        prefix = prefix.rstrip("/") + "/" if prefix else ""
        client = _plain_s3_client(self._options_json, self.config.max_in_flight, True) if sizes_only else self.s3
        pages = client.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=prefix, **({} if recursive else {"Delimiter": "/"}))
        try:
            return [{"name": f"{bucket}/{entry['Key']}", "size": entry.get("Size"), "type": "file",
                     "LastModified": entry.get("LastModified")}
                    for page in pages for entry in page.get("Contents", [])
                    if entry["Key"] != prefix and not entry["Key"].endswith("/")]
        except Exception as exc:
            if _client_error_code(exc) == "NoSuchBucket":
                raise FileNotFoundError(folder) from None
            raise

    def write(self, key: str, data: bytes) -> None:
        if not check_key(key).startswith(METADATA_PREFIX):
            raise StorageError(f"refusing to write {key}: the GC writes only under {METADATA_PREFIX}")
        path = self.path(key)
        if self.store == "local":
            self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
            tmp = f"{path}.tmp-{os.getpid()}"
            self.fs.pipe_file(tmp, data)
            os.replace(tmp, path)  # a reader never sees half a file
            return
        if self.s3 is not None:
            bucket, _, name = path.partition("/")
            self._call(f"writing {key}", lambda: self.s3.put_object(Bucket=bucket, Key=name, Body=data))
            return
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
            found = self._call("listing _lakefs/", (lambda: self._s3_listed("_lakefs", recursive=False,
                                                                            sizes_only=True))
                               if self.s3 is not None else
                               (lambda: self.fs.ls(self.path("_lakefs"), detail=True, refresh=True)))
        except FileNotFoundError:
            return {}
        return {e["name"].rstrip("/").rsplit("/", 1)[-1]: int(e.get("size") or 0) for e in found
                if e.get("type") == "file"}

    def list_units(self) -> list[str]:
        """``data/<slice>/`` for every slice, then ``""`` for the namespace root (legacy flat layout)."""
        try:
            entries = self._call("listing data/", lambda: self.fs.ls(self.path("data"), detail=True, refresh=True))
        except FileNotFoundError:
            entries = []
        units = {f"data/{e['name'].rstrip('/').rsplit('/', 1)[-1]}/" for e in entries if e.get("type") == "directory"}
        return sorted(units) + [""]

    def list_unit(self, unit: str) -> list[StoredObject]:
        """Every object of one unit; the root unit is not recursive and skips ``_lakefs`` and ``dummy``."""
        base = f"{self.root}/"
        try:
            if self.s3 is not None:  # the plain client (as fsspec would answer, for half the CPU)
                infos = self._call(f"listing {unit or 'the root'}",
                                   lambda: self._s3_listed(unit, recursive=bool(unit)))
            elif unit:
                infos = self._call(f"listing {unit}", lambda: self.fs.find(self.path(unit.rstrip("/")),
                                                                           detail=True)).values()
            else:
                infos = [e for e in self._call("listing the root", lambda: self.fs.ls(self.root, detail=True,
                                                                                      refresh=True))
                         if e.get("type") == "file"]
        except FileNotFoundError:
            return []
        out = []
        for info in infos:
            name = info["name"]
            if not name.startswith(base) or info.get("type") == "directory":
                continue
            key = name[len(base):]
            if not key or key.startswith(METADATA_PREFIX) or key == "dummy" or key.endswith("/"):
                continue
            out.append(StoredObject(key, int(info.get("size") or 0), _mtime(info)))
        return out

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
        size = BATCH[self.store]
        for start in range(0, len(keys), size):
            batch = keys[start:start + size]
            if self.store == "local":
                self._delete_local(batch, result, tally)
            else:
                self._delete_batch(batch, result, tally)
        result.requests, result.backoffs = tally.requests, tally.backoffs
        return result

    def _delete_local(self, batch: list[str], result: DeleteResult, tally: ThrottleStats) -> None:
        for key in batch:
            try:
                os.unlink(self.path(key))
            except FileNotFoundError:
                pass
            except OSError as exc:
                result.failed.append(f"{key}: {exc.strerror}")
                continue
            result.deleted += 1
        tally.requests += len(batch)

    def _delete_batch(self, batch: list[str], result: DeleteResult, tally: ThrottleStats) -> None:
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
        if self.store == "s3":
            return self._s3_batch(keys)
        if self.store == "azure":
            return self._azure_batch(keys)
        return self._gcs_batch(keys)

    def _s3_batch(self, keys: list[str]) -> tuple[int, list[str], list[str]]:
        bucket, _, _ = self.root.partition("/")
        names = {self.path(k).partition("/")[2]: k for k in keys}
        out = self.fs.call_s3("delete_objects", Bucket=bucket,
                              Delete={"Objects": [{"Key": n} for n in names], "Quiet": True})
        errors = out.get("Errors", [])
        again = [names[e["Key"]] for e in errors if any(w in str(e.get("Code")) for w in THROTTLING)]
        failed = [f"{names.get(e['Key'], e['Key'])}: {e.get('Code')} {e.get('Message', '')}" for e in errors
                  if e.get("Code") != "NoSuchKey" and names.get(e["Key"]) not in again]
        return len(keys) - len(again) - len(failed), again, failed

    def _azure_batch(self, keys: list[str]) -> tuple[int, list[str], list[str]]:
        from fsspec.asyn import sync  # noqa: PLC0415

        container, _, _ = self.root.partition("/")
        names = {self.path(k).partition("/")[2]: k for k in keys}

        async def request() -> list[tuple[str, int]]:
            # one blob batch request (adlfs's own rm deletes blob by blob)
            async with self.fs.service_client.get_container_client(container) as client:
                responses = await client.delete_blobs(*names, raise_on_any_failure=False)
                statuses = [response.status_code async for response in responses]
            return list(zip(names, statuses, strict=True))

        answers = sync(self.fs.loop, request)
        again = [names[n] for n, status in answers if status in THROTTLING_STATUS]
        failed = [f"{names[n]}: HTTP {status}" for n, status in answers
                  if status not in (200, 202, 404) and status not in THROTTLING_STATUS]
        return len(keys) - len(again) - len(failed), again, failed

    def _gcs_batch(self, keys: list[str]) -> tuple[int, list[str], list[str]]:
        """One JSON batch request. Not gcsfs's own batch: its parts end without the blank line that closes an
        HTTP message, which GCS forgives and strict servers (fake-gcs-server) refuse; nor fs.rm, which lists."""
        from urllib.parse import quote  # noqa: PLC0415

        from fsspec.asyn import sync  # noqa: PLC0415

        bucket, _, _ = self.root.partition("/")
        boundary = f"lakefs-janitor-{os.urandom(8).hex()}"
        parts = [f"--{boundary}\r\nContent-Type: application/http\r\nContent-ID: <{i}>\r\n\r\n"
                 f"DELETE /storage/v1/b/{quote(bucket, safe='')}/o/{quote(self.path(key).partition('/')[2], safe='')}"
                 " HTTP/1.1\r\nContent-Length: 0\r\n\r\n" for i, key in enumerate(keys)]
        headers, content = sync(self.fs.loop, self.fs._call, "POST", self.fs.batch_url_base,  # noqa: SLF001
                                headers={"Content-Type": f'multipart/mixed; boundary="{boundary}"'},
                                data="\r\n".join(parts) + f"\r\n--{boundary}--\r\n")
        answer = content.decode(errors="replace")
        statuses: dict[int, int] = {}
        for part in re.split(r"content-id:\s*<response-", answer, flags=re.IGNORECASE)[1:]:
            index, _, rest = part.partition(">")
            found = re.search(r"HTTP/[0-9.]+ (\d{3})", rest)
            if index.isdigit() and found:
                statuses[int(index)] = int(found.group(1))
        again, failed = [], []
        for i, key in enumerate(keys):
            status = statuses.get(i)
            if status in THROTTLING_STATUS:
                again.append(key)
            elif status not in (200, 204, 404):
                failed.append(f"{key}: HTTP {status}" if status else f"{key}: no answer in the batch response")
        return len(keys) - len(again) - len(failed), again, failed
