"""The S3 clients a namespace uses, built once per process: the plain botocore client every request goes through when
the options have a plain equivalent (``plain_s3_arguments``), from one botocore session whose models load faster
(``model_loader``) and whose listings and timestamps are read faster (``listing_page``, ``iso_timestamp``); and the
aiobotocore session s3fs gets for the rest (``s3_session``)."""

from __future__ import annotations

import email.utils
import functools
import json
import os
import threading
from datetime import datetime
from typing import Any

from spark_jobs.engine.stores.base import StorageError


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
def s3_session():
    """One aiobotocore session per process for every S3 namespace (fsspec then keeps one client per options, as
    without it), reading timestamps with ``iso_timestamp``. Built at first use, not at import."""
    from aiobotocore.session import AioSession  # noqa: PLC0415

    class Session(AioSession):
        def __reduce__(self):  # an fsspec filesystem pickles its options: this one as "the process's own"
            return s3_session, ()

    session = Session()
    session.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=iso_timestamp)
    return session


def session_options(options: dict[str, Any]) -> set[str]:
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


def plain_s3_client(options_json: str, max_in_flight: int):
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
