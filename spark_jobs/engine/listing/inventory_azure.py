"""An Azure Blob Inventory report instead of a listing: the Azure counterpart of ``inventory`` (S3 Inventory), for
namespaces on Azure Blob Storage (``https://<account>.blob.core.windows.net/<container>/<prefix>``).

Microsoft's documented format, https://learn.microsoft.com/en-us/azure/storage/blobs/blob-inventory ("Inventory
output", "Inventory files", "Custom schema fields supported for blob inventory"):

- each run of a rule writes, in the rule's destination container of the same account, under
  ``YYYY/MM/DD/HH-MM-SS/<ruleName>/`` (the time the run started), one or more CSV or Apache Parquet files, then
  ``<ruleName>-manifest.json`` and ``<ruleName>-manifest.checksum``;
- the manifest: ``destinationContainer``, ``endpoint`` (``https://<account>.blob.core.windows.net``), ``files``
  (``blob``: the file's path in the destination container, ``size``: its bytes), ``inventoryStartTime``,
  ``inventoryCompletionTime``, ``ruleDefinition`` (``filters``: blobTypes, prefixMatch, excludePrefix,
  includeSnapshots, includeBlobVersions, includeDeleted; ``format``: csv | parquet; ``objectType``: blob |
  container; ``schedule``; ``schemaFields``), ``ruleName``, ``status``, ``summary``, ``version``. It is created
  when the run begins with ``status`` ``Pending``, set to a completion status (e.g. ``Succeeded`` or ``Failed``)
  when it ends; the run's completion event names ``Succeeded``, ``PartiallySucceeded`` and ``Failed``;
- the checksum file holds the MD5 of the manifest; writing it marks the completion of the rule's run;
- a CSV file's first row is the schema row; Parquet files give dates as ``timestamp_millis`` (milliseconds since
  1970-01-01 00:00:00 UTC);
- the fields read here: ``Name`` (always present), ``Content-Length``, ``Last-Modified``; and when present
  ``Snapshot`` (present when snapshots are included), ``VersionId``/``IsCurrentVersion`` (present when versions
  are), ``Deleted``, ``hdi_isfolder`` (hierarchical-namespace accounts);
- duplicate rows may appear (the docs' "Handle duplicates in blob inventory").

What the documentation leaves unclear, and what is done about it (a report this module cannot interpret stops the
run, nothing is deleted):

- ``Name``'s form: not stated in words; Microsoft's own samples (calculate-blob-count-size: ``LEFT(Name,
  CHARINDEX('/', Name) - 1) AS Container``; the Blob-Inventory-Report-Analytics notebook) take its first segment as
  the container, so ``Name`` is read as ``<container>/<blob name>``, verbatim (no URL decoding is documented,
  unlike S3's). A Name without a ``/`` is refused.
- CSV date text: shown only in a screenshot. ISO 8601 with a zone (``2021-05-26T13:35:56.1234567Z``, any number
  of fraction digits) and the HTTP form (``Wed, 26 May 2021 13:35:56 GMT``) are read; a time without a zone, or
  any other text, is refused (never assumed to be UTC).
- CSV booleans (Deleted, IsCurrentVersion, hdi_isfolder): ``true``/``false`` in any case, empty for "not said";
  anything else is refused.
- Parquet column names: taken to be the schema field names (Microsoft's notebook reads CSV and Parquet reports
  with the same names); a Parquet file without Name, Content-Length and Last-Modified is refused.
- Only ``status: Succeeded`` is read: Pending, Failed, PartiallySucceeded or anything else is refused.
- The checksum's encoding is not documented: it is compared with the manifest's MD5 when it reads as one (32 hex
  digits, or base64 of 16 bytes) and refused on a mismatch; otherwise only its presence counts, as for S3.
- When ``IsCurrentVersion`` is empty (a blob with no version), the row is the blob itself and kept. A key listed
  twice (duplicates, or a version row) keeps its newest Last-Modified: never older than what is there now.

The cutoff rule is the S3 one (``mark.py``): the earlier of the run's and the report's time minus min-age, the
report's time being ``inventoryStartTime`` (an object written after the run started may be missing from it: safe).
"""

from __future__ import annotations

import base64
import binascii
import csv
import hashlib
import io
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from spark_jobs.core import parquet_bytes
from spark_jobs.core.plan import METADATA_PREFIX, StoredObject
from spark_jobs.engine.listing.inventory import (
    InventoryError,
    Report,
    listed_object,
    manifest_object,
    report_rows,
)
from spark_jobs.engine.stores import Namespace, StorageConfig, StorageError, locate, open_namespace

FORMATS = ("csv", "parquet")
NEEDED = ("Name", "Content-Length", "Last-Modified")
OPTIONAL = ("Snapshot", "IsCurrentVersion", "Deleted", "hdi_isfolder")
# the rule's filters that add rows the GC must tell apart, and the field that tells them apart
FILTER_FIELDS = {"includeSnapshots": "Snapshot", "includeBlobVersions": "IsCurrentVersion", "includeDeleted": "Deleted"}
FORMS = ("https://<account>.blob.core.windows.net/<container>/YYYY/MM/DD/HH-MM-SS/<rule>/<rule>-manifest.json, or "
         "https://<account>.blob.core.windows.net/<container>/<rule> (the rule's newest complete report)")
_DATE_FOLDERS = (re.compile(r"^\d{4}$"), re.compile(r"^\d{2}$"), re.compile(r"^\d{2}$"),
                 re.compile(r"^\d{2}-\d{2}-\d{2}$"))
_ACCOUNT = re.compile(r"^https?://(?P<account>[a-z0-9]{3,24})\.(?:blob|dfs)\.core\.windows\.net/?$")


@dataclass(frozen=True)
class AzureManifest:
    url: str  # of <rule>-manifest.json
    account: str  # the storage account the report lists (its endpoint's)
    destination_container: str  # the files' paths are in this container
    created: float  # Unix seconds: inventoryStartTime
    file_format: str  # csv | parquet
    schema: tuple[str, ...]  # ruleDefinition.schemaFields
    files: tuple[tuple[str, int], ...]  # blob path, size
    prefix_match: tuple[str, ...] = ()  # empty: every container of the account
    exclude_prefix: tuple[str, ...] = ()
    blob_types: tuple[str, ...] = ()


def parse_url(url: str) -> tuple[str, str, str]:
    """(account, container, path in it) of an ``--inventory`` URL in the project's Azure form."""
    try:
        location = locate(url)
    except StorageError:
        location = None
    if location is None or location.store != "azure":
        raise InventoryError(f"--inventory {url!r}: an Azure Blob Inventory report is named by {FORMS}")
    container, _, path = location.root.partition("/")
    return str(location.account), container, path.strip("/")


def _status_error(url: str, status: object) -> InventoryError:
    if status is None:
        return InventoryError(f"{url}: no status: not an Azure Blob Inventory manifest")
    if status == "Pending":
        return InventoryError(f"{url}: status Pending: the inventory run is still writing this report; name a "
                              "finished one, or the rule (its newest complete report)")
    return InventoryError(f"{url}: status {status!r}: only a report of status Succeeded lists every blob; name "
                          "another report, or the rule (its newest complete report)")


def _utc(text: str, what: str) -> float:
    """A manifest's time (``2021-05-26T13:25:36Z``) as Unix seconds."""
    when = datetime.fromisoformat(text)
    if when.tzinfo is None:
        raise ValueError(f"{what} {text!r} names no time zone")
    return when.timestamp()


def parse_manifest(raw: bytes, url: str) -> AzureManifest:
    """A ``<rule>-manifest.json`` as Azure writes it, checked for what a listing needs."""
    doc = manifest_object(raw, url, "an Azure Blob Inventory manifest")
    if doc.get("status") != "Succeeded":
        raise _status_error(url, doc.get("status"))
    try:
        rule = doc["ruleDefinition"]
        filters = rule.get("filters") or {}
        object_type, fmt = str(rule["objectType"]).lower(), str(rule["format"]).lower()
        schema = tuple(str(f) for f in rule["schemaFields"])
        created = _utc(str(doc["inventoryStartTime"]), "inventoryStartTime")
        endpoint, container = str(doc["endpoint"]), str(doc["destinationContainer"])
        files = tuple((str(f["blob"]), int(f["size"])) for f in doc["files"])
        lists = {k: tuple(str(p) for p in filters.get(k) or ()) for k in ("prefixMatch", "excludePrefix", "blobTypes")}
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InventoryError(f"{url}: not an Azure Blob Inventory manifest ({type(exc).__name__}: {exc}); it needs "
                             "endpoint, destinationContainer, files, inventoryStartTime, status and ruleDefinition "
                             "(objectType, format, schemaFields)") from None
    account = _ACCOUNT.match(endpoint)
    if account is None:
        raise InventoryError(f"{url}: endpoint {endpoint!r} is not https://<account>.blob.core.windows.net")
    if object_type != "blob":
        raise InventoryError(f"{url}: an inventory of {object_type}s; the GC needs a rule of objectType blob")
    if fmt not in FORMATS:
        raise InventoryError(f"{url}: format {fmt!r}; reports in csv or parquet can be read")
    missing = [f for f in NEEDED if f not in schema]
    missing += [field for flag, field in FILTER_FIELDS.items() if filters.get(flag) is True and field not in schema]
    if missing:
        raise InventoryError(f"{url}: the rule's schemaFields {list(schema)} lack {missing}: add them to the "
                             "inventory rule (Snapshot, IsCurrentVersion and Deleted when the rule includes "
                             "snapshots, versions or deleted blobs)")
    return AzureManifest(url, account.group("account"), container, created, fmt, schema, files,
                         lists["prefixMatch"], lists["excludePrefix"], lists["blobTypes"])


def check_coverage(manifest: AzureManifest, *, container: str, prefix: str) -> None:
    """Refuse a report whose rule leaves out part of the namespace: its containers and prefixes (``prefixMatch``,
    ``excludePrefix``: plain string prefixes of ``<container>/<blob name>``) or its blob types (lakeFS writes
    block blobs)."""
    root = f"{container}/{prefix.strip('/')}/" if prefix.strip("/") else f"{container}/"
    # no prefixMatch, or an empty one: every blob of the account (the docs)
    if manifest.prefix_match and not any(root.startswith(p) for p in manifest.prefix_match):
        raise InventoryError(f"{manifest.url} is a report of {list(manifest.prefix_match)}; it does not list "
                             f"{root} (the namespace's container and prefix)")
    metadata = root + METADATA_PREFIX  # excluding what lakeFS keeps there takes nothing the GC lists
    cut = [e for e in manifest.exclude_prefix if e and (root.startswith(e) or e.startswith(root) and not (
        e.startswith(metadata) or e == metadata.rstrip("/")))]
    if cut:
        raise InventoryError(f"{manifest.url}: the rule excludes {cut}, part of {root}: its report does not list the "
                             "whole namespace")
    if manifest.blob_types and "blockBlob" not in manifest.blob_types:
        raise InventoryError(f"{manifest.url}: the rule lists {list(manifest.blob_types)} blobs; lakeFS writes "
                             "block blobs (add blockBlob to blobTypes)")


def check_files(manifest: AzureManifest, data: dict[str, bytes]) -> None:
    for blob, size in manifest.files:
        check_file(manifest, blob, data[blob], size=size)


def check_file(manifest: AzureManifest, blob: str, data: bytes, *, size: int) -> None:
    """A report file against the size its manifest gives (the manifest gives no MD5)."""
    if len(data) != size:
        raise InventoryError(f"{blob} is not the file {manifest.url} names ({len(data)} bytes, expected {size}): an "
                             "incomplete or altered report")


def check_checksum(manifest_raw: bytes, checksum: bytes, url: str) -> None:
    """The checksum file against the manifest's MD5, when it reads as one (its encoding is not documented)."""
    text = checksum.decode("utf-8", "replace").strip().strip('"')
    digest = None
    if re.fullmatch(r"[0-9a-fA-F]{32}", text):
        digest = bytes.fromhex(text)
    else:
        try:
            decoded = base64.b64decode(text, validate=True)
            digest = decoded if len(decoded) == 16 else None
        except (binascii.Error, ValueError):
            digest = None
    if digest is not None and digest != hashlib.md5(manifest_raw, usedforsecurity=False).digest():
        raise InventoryError(f"{url}: its checksum file does not match it (another MD5): an altered report")


def _flag(value: object, column: str, name: str) -> bool | None:
    """A boolean field: True/False, None when empty."""
    if value is None or isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    if not text:
        return None
    raise InventoryError(f"{name}: {column} {value!r} is neither true nor false")


def _time(value: object, name: str) -> float | None:
    """Last-Modified as Unix seconds: a Parquet timestamp (UTC when it names no zone) or milliseconds, or CSV text
    in ISO 8601 with a zone or the HTTP date form."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()
    if isinstance(value, int):
        return value / 1000
    text = str(value).strip()
    if text.endswith(("GMT", "UTC")) and "," in text:
        return parsedate_to_datetime(text).timestamp()
    when = datetime.fromisoformat(text)
    if when.tzinfo is None:
        raise InventoryError(f"{name}: Last-Modified {text!r} names no time zone; the report's times cannot be "
                             "compared with the cutoff")
    return when.timestamp()


def _rows(data: bytes, manifest: AzureManifest, name: str):
    """(Name, size, mtime, current) of one report file; current: not a snapshot, not an older version, not
    deleted, not a folder."""
    if manifest.file_format == "csv":
        reader = csv.reader(io.StringIO(data.decode("utf-8-sig")))
        header = [c.strip() for c in next(reader, [])]
        missing = [f for f in NEEDED if f not in header]
        if missing:
            raise InventoryError(f"{name}: the CSV schema row {header} lacks {missing}")
        at = {column: i for i, column in enumerate(header)}
        for row in reader:
            if not row:
                continue
            if len(row) != len(header):
                raise InventoryError(f"{name}: a row of {len(row)} fields, the schema row names {len(header)}")
            yield _row({c: row[i] for c, i in at.items()}, name)
        return

    table = parquet_bytes.read(data)
    missing = [f for f in NEEDED if f not in table.column_names]
    if missing:
        raise InventoryError(f"{name}: the Parquet report lacks the columns {missing}")
    columns = {c: table.column(c).to_pylist() for c in (*NEEDED, *OPTIONAL) if c in table.column_names}
    for i in range(table.num_rows):
        yield _row({c: values[i] for c, values in columns.items()}, name)


def _row(row: dict, name: str) -> tuple[str, int, float | None, bool]:
    current = not row.get("Snapshot") and _flag(row.get("IsCurrentVersion"), "IsCurrentVersion", name) is not False \
        and not _flag(row.get("Deleted"), "Deleted", name) and not _flag(row.get("hdi_isfolder"), "hdi_isfolder", name)
    size = row["Content-Length"]
    return str(row["Name"]), int(size) if size not in (None, "") else 0, _time(row["Last-Modified"], name), current


def namespace_objects(manifest: AzureManifest, files: dict[str, bytes], *, container: str,
                      prefix: str) -> list[StoredObject]:
    """The data objects of the namespace at ``container``/``prefix`` the report lists (keys relative to it), one
    per key with its newest Last-Modified."""
    base = f"{container}/{prefix.strip('/')}/" if prefix.strip("/") else f"{container}/"
    found: dict[str, StoredObject] = {}
    for name, data in files.items():
        rows = report_rows(_rows, data, manifest=manifest, name=name)
        for blob, size, mtime, current in rows:
            if "/" not in blob:
                raise InventoryError(f"{name}: Name {blob!r} is not <container>/<blob name>")
            if not current or not blob.startswith(base):
                continue
            listed = listed_object(blob[len(base):], size, mtime, name=name, key=blob, date="Last-Modified")
            if listed is None:
                continue
            seen = found.get(listed.key)
            if seen is None or listed.mtime > seen.mtime:
                found[listed.key] = listed
    return list(found.values())


def _report_status(reports: Namespace, key: str) -> object:
    try:
        return json.loads(reports.read(key)).get("status")
    except (StorageError, ValueError, AttributeError):
        return None


def newest_report(reports: Namespace, rule: str) -> str:
    """The manifest of the rule's newest complete report in its destination container: a
    ``YYYY/MM/DD/HH-MM-SS/<rule>/`` folder with ``<rule>-manifest.checksum`` (written last) whose manifest says
    Succeeded (a run that failed is passed over for the one before)."""
    def walk(folder: str, depth: int):
        names = sorted((n for n in reports.folders(folder) if _DATE_FOLDERS[depth].match(n)), reverse=True)
        for name in names:
            path = f"{folder}/{name}"
            if depth + 1 < len(_DATE_FOLDERS):
                yield from walk(path, depth + 1)
            else:
                yield path

    def runs():
        # A namespace lists the folders below a folder, never its container's root: the year folders are looked
        # for from next year (a clock ahead of ours) back to 2019, before blob inventory existed.
        for year in range(datetime.now(UTC).year + 1, 2018, -1):
            yield from walk(str(year), 1)

    for run in runs():
        key = f"{run}/{rule}/{rule}-manifest.json"
        try:
            reports.read(f"{run}/{rule}/{rule}-manifest.checksum")
        except StorageError:
            continue
        if _report_status(reports, key) == "Succeeded":
            return key
    raise InventoryError(f"no complete Azure Blob Inventory report of rule {rule!r} (a YYYY/MM/DD/HH-MM-SS/{rule}/ "
                         f"folder with {rule}-manifest.json of status Succeeded and {rule}-manifest.checksum) in "
                         f"{reports.config.namespace}/")


def _container(ns: Namespace, account: str, container: str) -> Namespace:
    return open_namespace(StorageConfig(f"https://{account}.blob.core.windows.net/{container}", None,
                                        ns.config.options_json, ns.config.max_in_flight))


def open_report(url: str, ns: Namespace) -> Report:
    """The report at ``url`` (its manifest, or its rule: the newest complete report), its manifest and checksum
    read and checked on the driver, with the namespace's store settings. No data file is read."""
    container, _, prefix = ns.root.partition("/")
    account, report_container, path = parse_url(url)
    if account != ns.location.account:
        raise InventoryError(f"{url} is in account {account!r}; an inventory lists the blobs of its own account, "
                             f"and {ns.config.namespace} is in {ns.location.account!r}")
    reports = _container(ns, account, report_container)
    base = f"https://{account}.blob.core.windows.net/{report_container}"
    if path.endswith("-manifest.json"):
        key = path
    elif path and "/" not in path:
        key = newest_report(reports, path)
    else:
        raise InventoryError(f"--inventory {url!r}: an Azure Blob Inventory report is named by {FORMS}")
    url = f"{base}/{key}"
    raw = reports.read(key)
    manifest = parse_manifest(raw, url)
    try:
        checksum = reports.read(key.removesuffix(".json") + ".checksum")
    except StorageError:
        raise InventoryError(f"{url}: no {key.rsplit('/', 1)[-1].removesuffix('.json')}.checksum beside it: the "
                             "run has not finished writing the report") from None
    check_checksum(raw, checksum, url)
    if manifest.account != account:
        raise InventoryError(f"{url} is a report of account {manifest.account!r}; {ns.config.namespace} is in "
                             f"{account!r}")
    check_coverage(manifest, container=container, prefix=prefix)
    return Report("azure", manifest, f"https://{account}.blob.core.windows.net/{manifest.destination_container}",
                  container, prefix)
