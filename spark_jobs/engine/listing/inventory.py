"""An S3 Inventory report instead of a listing (issue 28): the biggest buckets are listed by S3 itself, once a day,
into ``manifest.json`` and its CSV or Parquet files (AWS's documented format); a full run can read that instead of
sending a LIST request per thousand objects.

The report is a snapshot: an object written after it is not in it (so it is never a candidate: safe), and a row
may name an object deleted since (deleting it again is a no-op). The run's cutoff becomes the earlier of its own
and the report's creation minus min-age, so that every object the report calls old enough was old enough when the
report saw it. Only the namespace's own rows are kept: the source bucket must be the namespace's bucket, the key
under its prefix (never a sibling prefix that shares its name), the current version of a versioned bucket, never a
delete marker, never under ``_lakefs/``. An Azure namespace's report (Azure Blob Inventory) is read by
``inventory_azure``, to which ``open_report`` hands it.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote_plus

from spark_jobs.core import parquet_bytes
from spark_jobs.core.plan import METADATA_PREFIX, StoredObject
from spark_jobs.engine.stores import Namespace, StorageConfig, StorageError, open_namespace

if TYPE_CHECKING:
    from datetime import timedelta

    import pyarrow as pa

    from spark_jobs.engine.listing.inventory_azure import AzureManifest

FORMATS = ("CSV", "Parquet")
# The CSV columns a listing needs, by their names in the manifest's fileSchema, and the Parquet columns they are
NEEDED = {"Bucket": "bucket", "Key": "key", "Size": "size", "LastModifiedDate": "last_modified_date"}
VERSIONED = {"IsLatest": "is_latest", "IsDeleteMarker": "is_delete_marker"}


class InventoryError(StorageError):
    """A report that cannot be used; the message says what to fix. Nothing is deleted on it."""

    def __init__(self, message: str, reason: str = "inventory") -> None:
        super().__init__(message, reason)


@dataclass(frozen=True)
class Manifest:
    url: str  # of manifest.json
    source_bucket: str
    destination_bucket: str  # the files' keys are in this bucket
    created: float  # Unix seconds: when S3 started the report
    file_format: str  # CSV | Parquet
    schema: tuple[str, ...]  # CSV: the columns, in order
    files: tuple[tuple[str, int, str], ...]  # key, size, MD5 (hex; "" when the manifest gives none)


_REPORT_FOLDER = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}-\d{2}Z$")  # where S3 writes one day's report


def _bucket_of(url: str) -> tuple[str, str]:
    scheme, _, rest = url.partition("://")
    if scheme not in ("s3", "s3a") or not rest.strip("/"):
        raise InventoryError(f"--inventory {url!r}: an S3 Inventory report is named by its manifest's URL "
                             "(s3://bucket/prefix/source-bucket/config-id/YYYY-MM-DDTHH-MMZ/manifest.json) or by its "
                             "configuration's folder (s3://bucket/prefix/source-bucket/config-id/: the newest "
                             "complete report there)")
    bucket, _, key = rest.partition("/")
    return bucket, key


def newest_report(reports: Namespace, folder: str) -> str:
    """The manifest of the newest complete report in an inventory configuration's folder: S3 writes
    ``manifest.checksum`` after ``manifest.json``, so a report without it is still being written (its presence is
    what counts here; each data file is then checked against the manifest's size and MD5)."""
    folder = folder.strip("/")
    for name in sorted((n for n in reports.folders(folder) if _REPORT_FOLDER.match(n)), reverse=True):
        try:
            reports.read(f"{folder}/{name}/manifest.checksum")
        except StorageError:
            continue
        return f"{folder}/{name}/manifest.json"
    raise InventoryError(f"no complete S3 Inventory report (a YYYY-MM-DDTHH-MMZ/ folder with manifest.json and "
                         f"manifest.checksum) in s3://{reports.root}/{folder}/")


def manifest_object(raw: bytes, url: str, what: str) -> dict:
    """A manifest's JSON object, or an InventoryError saying the file is not ``what``."""
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise InventoryError(f"{url} is not JSON ({exc}): not {what}") from None
    if not isinstance(doc, dict):
        raise InventoryError(f"{url} is not {what} (a JSON object)")
    return doc


def parse_manifest(raw: bytes, url: str) -> Manifest:
    """A manifest.json as S3 writes it, checked for what a listing needs."""
    doc = manifest_object(raw, url, "an S3 Inventory manifest")
    fmt = doc.get("fileFormat")
    if fmt not in FORMATS:
        raise InventoryError(f"{url}: fileFormat {fmt!r}; reports in {' or '.join(FORMATS)} can be read (set the "
                             "inventory configuration's format to one of them)")
    try:
        created = int(doc["creationTimestamp"]) / 1000
        source = str(doc["sourceBucket"])
        destination = str(doc["destinationBucket"]).removeprefix("arn:aws:s3:::")
        files = tuple((str(f["key"]), int(f["size"]), str(f.get("MD5checksum", ""))) for f in doc["files"])
    except (KeyError, TypeError, ValueError) as exc:
        raise InventoryError(f"{url}: not an S3 Inventory manifest ({type(exc).__name__}: {exc}); it needs "
                             "sourceBucket, destinationBucket, creationTimestamp, fileFormat and files") from None
    schema = tuple(c.strip() for c in str(doc.get("fileSchema", "")).split(",")) if fmt == "CSV" else ()
    if fmt == "CSV" and not set(NEEDED) <= set(schema):
        raise InventoryError(f"{url}: the report's fields {list(schema)} lack {sorted(set(NEEDED) - set(schema))}: "
                             "add Size and Last modified date to the inventory configuration")
    return Manifest(url, source, destination, created, fmt, schema, files)


def _rows(data: bytes, manifest: Manifest, name: str):
    """(bucket, key, size, mtime, is_latest, is_delete_marker) of one report file."""
    if manifest.file_format == "CSV":
        text = gzip.decompress(data).decode() if data[:2] == b"\x1f\x8b" else data.decode()
        at = {column: i for i, column in enumerate(manifest.schema)}
        for row in csv.reader(io.StringIO(text)):
            if len(row) != len(manifest.schema):
                raise InventoryError(f"{name}: a row of {len(row)} fields, the manifest names {len(manifest.schema)}")
            latest = row[at["IsLatest"]].lower() != "false" if "IsLatest" in at else True
            marker = row[at["IsDeleteMarker"]].lower() == "true" if "IsDeleteMarker" in at else False
            size, modified = row[at["Size"]], row[at["LastModifiedDate"]]
            yield (row[at["Bucket"]], unquote_plus(row[at["Key"]]), int(size or 0),
                   _seconds(datetime.fromisoformat(modified.replace("Z", "+00:00"))) if modified else None,
                   latest, marker)
        return

    table = parquet_bytes.read(data)
    missing = sorted(set(NEEDED.values()) - set(table.column_names))
    if missing:
        raise InventoryError(f"{name}: the Parquet report lacks the columns {missing}")
    columns = {c: table.column(c).to_pylist() for c in (*NEEDED.values(), *VERSIONED.values())
               if c in table.column_names}
    for i in range(table.num_rows):
        modified = columns["last_modified_date"][i]
        yield (columns["bucket"][i], columns["key"][i], int(columns["size"][i] or 0), _seconds(modified),
               columns.get("is_latest", [True] * table.num_rows)[i] is not False,
               bool(columns.get("is_delete_marker", [False] * table.num_rows)[i]))


def _seconds(modified: object) -> float | None:
    """A Parquet report's last-modified date as Unix seconds: a timestamp (UTC when it names no zone, as S3 writes
    it) or milliseconds."""
    if modified is None:
        return None
    if isinstance(modified, datetime):
        return (modified if modified.tzinfo else modified.replace(tzinfo=UTC)).timestamp()
    return int(modified) / 1000


def report_rows(read, data: bytes, *, manifest, name: str) -> list:
    """``read(data, manifest, name)``'s rows; a file that cannot be read is an InventoryError naming it."""
    try:
        return list(read(data, manifest, name))
    except InventoryError:
        raise
    except (ValueError, TypeError, EOFError, OSError, csv.Error, ImportError) as exc:  # pyarrow's: ValueErrors
        raise InventoryError(f"{name} (of {manifest.url}) is not a readable {manifest.file_format} report file: "
                             f"{type(exc).__name__}: {exc}") from None


def listable(relative: str) -> bool:
    """Whether a listing of the namespace lists this key (relative to it): data/<slice>/… and the files directly at
    the root (the legacy layout); never a folder marker, anything under _lakefs/, nor lakeFS's ``dummy``."""
    listed = relative.startswith("data/") and relative.count("/") >= 2 or "/" not in relative
    return listed and not relative.endswith("/") and not relative.startswith(METADATA_PREFIX) and relative != "dummy"


def listed_object(relative: str, size: int, mtime: float | None, *, name: str, key: str,
                  date: str) -> StoredObject | None:
    """The object a report's row names at ``relative`` (its key relative to the namespace), or None where a listing
    would not list it (``listable``). A row without a modification time is refused: the report (file ``name``, row
    ``key``) cannot say whether the object is old enough (``date``: what the report calls the column)."""
    if not listable(relative):
        return None
    if mtime is None:
        raise InventoryError(f"{name}: {key} has no {date}; the report cannot say which objects are old enough")
    return StoredObject(relative, size, mtime)


def namespace_objects(manifest: Manifest, files: dict[str, bytes], *, bucket: str, prefix: str) -> list[StoredObject]:
    """The data objects of the namespace at ``bucket``/``prefix`` the report lists (keys relative to it)."""
    base = prefix.strip("/") + "/" if prefix.strip("/") else ""
    out = []
    for name, data in files.items():
        rows = report_rows(_rows, data, manifest=manifest, name=name)
        for row_bucket, key, size, mtime, latest, marker in rows:
            if row_bucket != bucket or not key.startswith(base) or not latest or marker:
                continue
            found = listed_object(key[len(base):], size, mtime, name=name, key=key, date="last-modified date")
            if found is not None:
                out.append(found)
    return out


@dataclass(frozen=True)
class Report:
    """An inventory report as the driver holds it: its manifest (read and checked: the newest report chosen, its
    source and coverage, its checksum), where its data files are, and the namespace whose rows it keeps. What grows
    with objects, its data files' rows, is read by whoever reads each file (``file_objects``, ``file_batch``):
    a file is a unit of work."""

    kind: str  # s3 | azure
    manifest: Manifest | AzureManifest
    files_root: str  # the storage URL of the bucket (container) holding the data files
    bucket: str  # the namespace's bucket (container)
    prefix: str  # the namespace's prefix in it

    @property
    def names(self) -> list[str]:
        """The report's data files, in the manifest's order."""
        return [f[0] for f in self.manifest.files]

    @property
    def created(self) -> datetime:
        return datetime.fromtimestamp(self.manifest.created, UTC)

    def cutoff(self, cutoff: datetime, min_age: timedelta) -> datetime:
        """The run's cutoff: what the report calls old enough was old enough when the store wrote it (newer objects
        are not in it), so the earlier of the run's own and the report's time minus ``min_age``."""
        return min(cutoff, self.created - min_age)

    def record(self, objects: int) -> dict:
        """The listing's record (``Summary.listing``)."""
        return {"kind": "inventory", "report": self.manifest.url, "report_time": self.created.isoformat(),
                "files": len(self.manifest.files), "objects": objects}

    def check(self, name: str, data: bytes) -> None:
        """A data file against what its manifest says of it (S3: size and MD5; Azure: size)."""
        expected = next((f for f in self.manifest.files if f[0] == name), None)
        if expected is None:
            raise InventoryError(f"{name} is not a file of {self.manifest.url}")
        if self.kind == "azure":
            from spark_jobs.engine.listing.inventory_azure import check_file  # noqa: PLC0415

            check_file(self.manifest, name, data, size=expected[1])
            return
        _, size, md5 = expected
        if len(data) != size or (md5 and hashlib.md5(data, usedforsecurity=False).hexdigest() != md5):
            raise InventoryError(f"{name} is not the file {self.manifest.url} names ({len(data)} bytes, expected "
                                 f"{size}, or another MD5): an incomplete or altered report")

    def objects(self, files: dict[str, bytes]) -> list[StoredObject]:
        """The namespace's objects the (checked) data files list."""
        if self.kind == "azure":
            from spark_jobs.engine.listing.inventory_azure import namespace_objects as azure_objects  # noqa: PLC0415

            return azure_objects(self.manifest, files, container=self.bucket, prefix=self.prefix)
        return namespace_objects(self.manifest, files, bucket=self.bucket, prefix=self.prefix)

    def files_namespace(self, like: Namespace) -> Namespace:
        """Where the data files are, opened with ``like``'s store settings."""
        return open_namespace(StorageConfig(self.files_root, None, like.config.options_json, like.config.max_in_flight))

    def file_objects(self, ns: Namespace, name: str) -> list[StoredObject]:
        """One data file read (from ``ns``'s store settings), checked, and its rows of the namespace."""
        data = self.files_namespace(ns).read(name)
        self.check(name, data)
        return self.objects({name: data})


def file_batch(report: Report, ctx: Any, name: str) -> pa.RecordBatch:
    """One data file of ``report`` as a listing's batch (``columns.LISTING_SCHEMA``), read where the runner puts the
    unit (an executor, a thread), checked against the manifest there (an InventoryError fails the run), its rows
    read into Arrow columns (``inventory_columns``)."""
    import pyarrow as pa  # noqa: PLC0415

    from spark_jobs.core.columns import LISTING_SCHEMA  # noqa: PLC0415
    from spark_jobs.engine.listing.inventory_columns import file_table  # noqa: PLC0415

    data = report.files_namespace(ctx.ns).read(name)
    report.check(name, data)
    batches = file_table(report, name, data).to_batches()
    if not batches:
        return pa.RecordBatch.from_pylist([], schema=LISTING_SCHEMA)
    return batches[0] if len(batches) == 1 else pa.concat_batches(batches)


def inventory_listing(url: str, ns: Namespace, *, cutoff: datetime,
                      min_age: timedelta) -> tuple[list[StoredObject], dict, datetime]:
    """The namespace's objects the report at ``url`` lists (every data file read here: the object path of a run
    the dataset steps do not plan), the listing's record (``Summary.listing``), and the run's cutoff
    (``Report.cutoff``)."""
    report = open_report(url, ns)
    listed = read_files(report, ns)
    return listed, {**report.record(len(listed)), "read_on": "driver"}, report.cutoff(cutoff, min_age)


def read_files(report: Report, ns: Namespace) -> list[StoredObject]:
    """Every data file of ``report`` read here, checked (all before any row is read), and their rows."""
    data = report.files_namespace(ns).read_many(report.names)
    for name in report.names:
        report.check(name, data[name])
    return report.objects(data)


def open_report(url: str, ns: Namespace) -> Report:
    """The report at ``url`` (its manifest, or the folder of its configuration: the newest complete report there),
    its manifest read and checked on the driver, with the namespace's store settings (an Azure namespace's: an
    Azure Blob Inventory report, ``inventory_azure``). No data file is read."""
    if ns.store == "azure":
        from spark_jobs.engine.listing.inventory_azure import open_report as open_azure_report  # noqa: PLC0415

        return open_azure_report(url, ns)
    if ns.store != "s3":
        raise InventoryError(f"an inventory report is read for S3 (S3 Inventory) and Azure (Azure Blob Inventory) "
                             f"namespaces; {ns.config.namespace} is on {ns.store}")
    bucket, _, prefix = ns.root.partition("/")
    report_bucket, manifest_key = _bucket_of(url)
    reports = open_namespace(StorageConfig(f"s3://{report_bucket}", None, ns.config.options_json,
                                           ns.config.max_in_flight))
    if not manifest_key.endswith(".json"):
        manifest_key = newest_report(reports, manifest_key)
        url = f"s3://{report_bucket}/{manifest_key}"
    manifest = parse_manifest(reports.read(manifest_key), url)
    if manifest.source_bucket != bucket:
        raise InventoryError(f"{url} is a report of bucket {manifest.source_bucket!r}; {ns.config.namespace} is in "
                             f"{bucket!r}")
    return Report("s3", manifest, f"s3://{manifest.destination_bucket}", bucket, prefix)
