"""S3: ``s3://bucket/prefix`` (``s3a://`` read as the same) through s3fs, deleted with DeleteObjects (1,000 keys).

Reads, writes, listings and deletes go through one plain botocore client per process when the options have a plain
botocore equivalent (``plain_s3_arguments``): s3fs's event loop costs twice the CPU per request, and s3fs is then
not even imported unless something the plain client does not do asks for it. Neither client
retries by itself: the throttle must see every throttling answer (and retries at a lowered rate)."""

from __future__ import annotations

import email.utils
import functools
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime
from typing import Any

from spark_jobs.core.freeing import Verdict, s3_verdict, unreadable
from spark_jobs.engine.stores.base import DeleteResult, Location, StorageConfig, StorageError, check_key
from spark_jobs.engine.stores.faults import THROTTLING, error_text
from spark_jobs.engine.stores.namespace import Namespace
from spark_jobs.engine.stores.s3_head import HandOver, SignedHead, signed_head


class S3Namespace(Namespace):
    store = "s3"
    protocol = "s3"
    batch = 1000
    package = "s3fs"

    def __init__(self, config: StorageConfig, location: Location) -> None:
        # every request of a run through one plain botocore client, when the options allow one (None: s3fs does
        # all); s3fs itself (0.25 s of imports, its own client on its event loop) is then built only if asked for
        self._options_json = json.dumps(config.options(self.store), sort_keys=True)
        self.s3 = _plain_s3_client(self._options_json, config.max_in_flight)
        self._signed_heads: dict[str, SignedHead | None] = {}  # per bucket, built at its first HEAD
        super().__init__(config, location)

    def defers_filesystem(self) -> bool:
        return self.s3 is not None

    @classmethod
    def fsspec_options(cls, location: Location, options: dict[str, Any]) -> dict[str, Any]:
        # The throttle retries throttled requests at a lowered rate: botocore's own retries would hide every
        # throttling answer from it (and retry at full speed).
        options.setdefault("config_kwargs", {}).setdefault("retries", {"total_max_attempts": 1})
        if not _session_options(options):  # a profile (or another session option) needs s3fs's own session
            options.setdefault("session", _s3_session())
        return options

    @classmethod
    def tuned(cls, fs):
        fs.retries = 1  # s3fs's own SlowDown retries, for the same reason
        return fs

    def _s3_call(self, operation: str, **kwargs: Any) -> dict:
        if self.s3 is not None:
            return getattr(self.s3, operation)(**kwargs)
        return self.fs.call_s3(operation, **kwargs)

    def freeing(self) -> Verdict:
        bucket, _, prefix = self.root.partition("/")
        try:
            versioning = self._s3_call("get_bucket_versioning", Bucket=bucket).get("Status")
        except Exception as exc:  # noqa: BLE001 - denied, or not implemented: said, not raised
            return unreadable("s3", f"versioning of bucket {bucket}", permission="s3:GetBucketVersioning",
                              error=error_text(exc))
        why = None
        try:
            rules = self._s3_call("get_bucket_lifecycle_configuration", Bucket=bucket).get("Rules", [])
        except Exception as exc:  # noqa: BLE001
            rules = [] if "NoSuchLifecycleConfiguration" in f"{_client_error_code(exc)} {exc}" else None
            why = f"cannot read the lifecycle rules of bucket {bucket} (needs s3:GetLifecycleConfiguration): " \
                  f"{error_text(exc)}"
        verdict = s3_verdict(versioning, rules, prefix)
        if rules is None and versioning:
            return replace(verdict, notes=(why, *verdict.notes))
        return verdict

    def purge_noncurrent(self, keys: list[str]) -> DeleteResult:
        bucket, _, _ = self.root.partition("/")
        result = DeleteResult()
        versions = [v for found in self._each(self._versions, [check_key(k) for k in keys]) for v in found]
        for start in range(0, len(versions), self.batch):
            batch = versions[start:start + self.batch]
            answer = self._call("removing noncurrent versions", lambda b=batch: self._s3_call(
                "delete_objects", Bucket=bucket, Delete={"Objects": [{"Key": v["Key"], "VersionId": v["VersionId"]}
                                                                     for v in b], "Quiet": True}))
            failed = {(e["Key"], e.get("VersionId")) for e in answer.get("Errors", [])}
            result.failed += [f"{e['Key']} version {e.get('VersionId')}: {e.get('Code')}" for e in
                              answer.get("Errors", [])]
            removed = [v for v in batch if (v["Key"], v["VersionId"]) not in failed]
            result.deleted += sum(1 for v in removed if "Size" in v)  # versions; delete markers hold no bytes
            result.freed_bytes += sum(int(v.get("Size") or 0) for v in removed)
            result.requests += 1
        return result

    def _versions(self, key: str) -> list[dict]:
        """The noncurrent versions and delete markers of exactly ``key``: none when it has a current version
        (written again since this run deleted it, it is not garbage any more)."""
        bucket, _, name = self.path(key).partition("/")
        found, marker = [], {}
        while True:
            page = self._call(f"listing the versions of {key}", lambda m=marker: self._s3_call(
                "list_object_versions", Bucket=bucket, Prefix=name, **m))
            # the prefix also lists longer keys that start with this one: only the key itself
            found += [v for v in page.get("Versions", []) + page.get("DeleteMarkers", []) if v["Key"] == name]
            if not page.get("IsTruncated"):
                break
            marker = {"KeyMarker": page["NextKeyMarker"], "VersionIdMarker": page["NextVersionIdMarker"]}
        if any(v.get("IsLatest") and "Size" in v for v in found):
            return []
        return found

    def _get(self, key: str) -> bytes:
        if self.s3 is None:
            return super()._get(key)
        bucket, _, name = self.path(key).partition("/")
        try:
            return self.s3.get_object(Bucket=bucket, Key=name)["Body"].read()
        except Exception as exc:
            if _client_error_code(exc) in ("NoSuchKey", "NoSuchBucket", "404"):
                raise FileNotFoundError(key) from None
            raise

    def _get_range(self, key: str, start: int, end: int) -> bytes:
        if self.s3 is None:
            return super()._get_range(key, start, end)
        bucket, _, name = self.path(key).partition("/")
        try:
            return self.s3.get_object(Bucket=bucket, Key=name, Range=f"bytes={start}-{end - 1}")["Body"].read()
        except Exception as exc:
            code = _client_error_code(exc)
            if code in ("NoSuchKey", "NoSuchBucket", "404"):
                raise FileNotFoundError(key) from None
            raise

    def list_units(self) -> list[str]:
        if self.s3 is None:
            return super().list_units()
        bucket, _, prefix = self.path("data").partition("/")
        request = {"Bucket": bucket, "Prefix": prefix + "/", "Delimiter": "/"}
        slices: set[str] = set()
        try:
            for page in self._pages("data/", request):
                slices.update(p["Prefix"][len(request["Prefix"]):].strip("/") for p in page.get("CommonPrefixes", []))
        except FileNotFoundError:
            pass
        return sorted(f"data/{name}/" for name in slices if name) + [""]

    def _info(self, key: str) -> dict[str, Any]:
        if self.s3 is None:
            return super()._info(key)
        bucket, _, name = self.path(key).partition("/")
        try:
            head = self._head(bucket, name)
        except Exception as exc:
            if _client_error_code(exc) in ("NoSuchKey", "NoSuchBucket", "404", "NotFound"):
                raise FileNotFoundError(key) from None
            raise
        return {"name": f"{bucket}/{name}", "size": head.get("ContentLength"), "type": "file",
                "LastModified": head.get("LastModified")}

    def _head(self, bucket: str, name: str) -> dict[str, Any]:
        """One object's HEAD: signed and sent by this module's lighter path (``s3_head``) when it can be built for
        the bucket, else (and once it handed a request over: a redirect, a refusal) by the client's call."""
        if bucket not in self._signed_heads:
            self._signed_heads[bucket] = signed_head(self.s3, bucket)
        head = self._signed_heads[bucket]  # read once: another thread may hand the bucket over meanwhile
        if head is not None:
            try:
                return head(name)
            except HandOver:
                self._signed_heads[bucket] = None
        return self.s3.head_object(Bucket=bucket, Key=name)

    def _write(self, key: str, path: str, data: bytes) -> None:
        if self.s3 is None:
            super()._write(key, path, data)
            return
        bucket, _, name = path.partition("/")
        self._call(f"writing {key}", lambda: self.s3.put_object(Bucket=bucket, Key=name, Body=data))

    def _metadata_listing(self) -> list[dict[str, Any]]:
        if self.s3 is None:
            return super()._metadata_listing()
        return self._listed("_lakefs", recursive=False)

    def _unit_pages(self, unit: str) -> Iterator[list[dict[str, Any]]]:
        """ListObjectsV2 a page at a time (each request under the throttle; the plain client's when there is one,
        else s3fs's), each page's objects as fsspec describes files: everything under ``data/<slice>/``, or the
        objects directly in the root for ``""``."""
        bucket, _, prefix = (f"{self.root}/{check_key(unit)}" if unit else self.root).partition("/")
        prefix = prefix.rstrip("/") + "/" if prefix else ""
        request = {"Bucket": bucket, "Prefix": prefix, "MaxKeys": self.page_size, **({"Delimiter": "/"} if not unit
                                                                                    else {})}
        for page in self._pages(unit or "the root", request):
            yield [{"name": f"{bucket}/{entry['Key']}", "size": entry.get("Size"), "type": "file",
                    "LastModified": entry.get("LastModified")}
                   for entry in page.get("Contents", []) if entry["Key"] != prefix and not entry["Key"].endswith("/")]

    def _pages(self, what: str, request: dict[str, Any]) -> Iterator[dict]:
        """The ListObjectsV2 pages of ``request``, each asked for under the throttle, following the continuation
        token (a page that says more follows without one fails the listing)."""
        request = dict(request)
        while True:
            page = self._call(f"listing {what}", lambda r=dict(request): self._list_page(r))
            yield page
            if not page.get("IsTruncated"):
                return
            if not page.get("NextContinuationToken"):
                raise StorageError(f"listing {what} on {self.config.namespace}: a page said more follows and gave no "
                                   "continuation token")
            request["ContinuationToken"] = page["NextContinuationToken"]

    def _list_page(self, request: dict[str, Any]) -> dict:
        try:
            return self._s3_call("list_objects_v2", **request)
        except Exception as exc:
            if _client_error_code(exc) == "NoSuchBucket" or isinstance(exc, FileNotFoundError):
                raise FileNotFoundError(request["Bucket"]) from None
            raise

    def _listed(self, folder: str, *, recursive: bool) -> list[dict[str, Any]]:
        """The objects under ``folder`` (a folder of the namespace, "" for its root; only those directly in it
        unless ``recursive``) as fsspec describes files: name (bucket/key), size, LastModified."""
        bucket, _, prefix = (f"{self.root}/{check_key(folder)}" if folder else self.root).partition("/")
        prefix = prefix.rstrip("/") + "/" if prefix else ""
        pages = self.s3.get_paginator("list_objects_v2").paginate(
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

    def _batch_request(self, keys: list[str]) -> tuple[int, list[str], list[str]]:
        bucket, _, _ = self.root.partition("/")
        names = self._names(keys)
        out = self._s3_call("delete_objects", Bucket=bucket,
                            Delete={"Objects": [{"Key": n} for n in names], "Quiet": True})
        errors = out.get("Errors", [])
        again = [names[e["Key"]] for e in errors if any(w in str(e.get("Code")) for w in THROTTLING)]
        failed = [f"{names.get(e['Key'], e['Key'])}: {e.get('Code')} {e.get('Message', '')}" for e in errors
                  if e.get("Code") != "NoSuchKey" and names.get(e["Key"]) not in again]
        return len(keys) - len(again) - len(failed), again, failed


def _client_error_code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    return str(response.get("Error", {}).get("Code", "")) if isinstance(response, dict) else ""


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
        if parsed is None and value.endswith(" GMT"):  # an HTTP date (a HEAD's Last-Modified): 10% of a HEAD's CPU
            try:
                parsed = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError):
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
    # as for s3fs: the throttle sees every throttling answer; one connection per request in flight
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


_clients_lock = threading.Lock()


def _plain_s3_client(options_json: str, max_in_flight: int):
    """``_built_client``, built once even when two threads ask at once (a run has it built in the background while
    it asks lakeFS for its history: ≈ 0.2 s of botocore's imports and models)."""
    with _clients_lock:
        return _built_client(options_json, max_in_flight)


@functools.cache
def _built_client(options_json: str, max_in_flight: int):
    """One botocore client per process and options (thread-safe, shared by every thread and namespace): a GET
    costs 1.9 ms of this process's CPU through it against 4.5 ms through s3fs's event loop, a listing of 2,000
    objects 80 against 160 ms. Timestamps read with ``iso_timestamp``; listings read with ``listing_page``."""
    args = plain_s3_arguments(json.loads(options_json), max_in_flight)
    if args is None:
        return None
    try:
        client = _botocore_session().create_client("s3", **args)
    except Exception as exc:  # noqa: BLE001 - botocore's configuration errors vary
        raise StorageError(f"the s3 storage settings are unusable: {type(exc).__name__}: {exc}") from None
    client.meta.events.register("before-parse.s3.ListObjectsV2", listing_page)
    return client


@functools.cache
def _botocore_session():
    """One botocore session per process (its models read once, whatever the clients), reading timestamps with
    ``iso_timestamp`` and its models with ``ModelLoader``."""
    import botocore.session  # noqa: PLC0415

    session = botocore.session.get_session()
    session.register_component("data_loader", model_loader(session.get_config_variable("data_path")))
    session.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=iso_timestamp)
    return session


def model_loader(data_path: str | None):
    """botocore's loader of service models (``AWS_DATA_PATH`` searched first, as botocore's own), less two costs
    of a fresh process's first client, which a daily run waits for (≈ 40 ms of a 0.2 s client on a quiet machine,
    twice that on a busy one): the model files read into plain dicts (ordered, as every dict is) rather than
    through an OrderedDict hook that runs Python for every object of S3's 1 MB of models, and the one service
    asked for looked up in its own folder rather than after listing the folders of the ≈ 400 services botocore
    ships (``_KnownServices``)."""
    from botocore.loaders import JSONFileLoader, Loader  # noqa: PLC0415

    class PlainJSONFiles(JSONFileLoader):
        def _load_file(self, full_path, open_method):
            if not os.path.isfile(full_path):
                return None
            with open_method(full_path, "rb") as fp:
                return json.loads(fp.read().decode("utf-8"))

    class ModelLoader(Loader):
        def list_available_services(self, type_name):
            return _KnownServices(self, type_name, super().list_available_services)

    paths = [os.path.expanduser(os.path.expandvars(p)) for p in data_path.split(os.pathsep)] if data_path else None
    return ModelLoader(extra_search_paths=paths, file_loader=PlainJSONFiles())


class _KnownServices(list):
    """The services ``loader`` has models of (of ``type_name``), as botocore lists them, filled only when read
    whole: whether it has one (all a client's creation asks) is looked up in that service's folder alone."""

    def __init__(self, loader: Any, type_name: str, listed: Any) -> None:
        super().__init__()
        self._loader, self._type_name, self._listed = loader, type_name, listed

    def __contains__(self, name: object) -> bool:
        from botocore.exceptions import DataNotFoundError  # noqa: PLC0415

        try:
            return isinstance(name, str) and bool(self._loader.list_api_versions(name, self._type_name))
        except DataNotFoundError:
            return False

    def _filled(self) -> None:
        if self._listed is not None:
            self.extend(self._listed(self._type_name))
            self._listed = None

    def __iter__(self):
        self._filled()
        return super().__iter__()

    def __len__(self) -> int:
        self._filled()
        return super().__len__()

    def __getitem__(self, index):
        self._filled()
        return super().__getitem__(index)


def listing_page(response_dict: dict, customized_response_dict: dict, **_: Any) -> None:
    """botocore's before-parse hook for a ListObjectsV2 page: the page read with ElementTree for what the engine
    reads of it (each object's key, size and time — ``iso_timestamp`` —, the folders, the continuation), its body
    then handed to botocore's parser empty. botocore's generic parser spends ≈ 40 µs per listed object reading every
    field (a quarter of a warm run's own CPU on the bench's history; a third of a daily run's LISTs). Anything but a
    listing page (an error, a body that is not XML) is left to botocore; the keys stay as sent, so botocore's own
    URL-decoding (EncodingType) applies."""
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
    key, size, when = f"{ns}Key", f"{ns}Size", f"{ns}LastModified"
    contents = []
    for c in root.iterfind(f"{ns}Contents"):
        entry: dict[str, Any] = {"Key": c.findtext(key), "Size": int(c.findtext(size) or 0)}
        if (text := c.findtext(when)) is not None:
            entry["LastModified"] = iso_timestamp(text)
        contents.append(entry)
    page: dict[str, Any] = {
        "IsTruncated": root.findtext(f"{ns}IsTruncated") == "true", "Contents": contents,
        "CommonPrefixes": [{"Prefix": c.findtext(f"{ns}Prefix")} for c in root.iterfind(f"{ns}CommonPrefixes")]}
    for name in ("Name", "Prefix", "Delimiter", "EncodingType", "StartAfter", "ContinuationToken",
                 "NextContinuationToken"):
        if (value := root.findtext(f"{ns}{name}")) is not None:
            page[name] = value
    if (count := root.findtext(f"{ns}KeyCount")) is not None:
        page["KeyCount"] = int(count)
    customized_response_dict.update(page)
    response_dict["body"] = b""
