"""An inventory report's data file read into Arrow columns: the namespace's rows of one S3 Inventory or Azure Blob
Inventory file (``columns.LISTING_SCHEMA``), filtered by Arrow compute, never a Python object per row. The per-row
readers (``inventory._rows``, ``inventory_azure._rows`` with ``namespace_objects``) stay the reference: a file these
columns cannot read exactly as they would (an unusual time or flag text, a key that must be URL-decoded aside, an
error) is read by the reference, which gives the same rows or raises its own InventoryError."""

from __future__ import annotations

import csv
import gzip
import io
from typing import TYPE_CHECKING
from urllib.parse import unquote_plus

import pyarrow as pa
import pyarrow.compute as pc

from spark_jobs.core import parquet_bytes
from spark_jobs.core.columns import LISTING_SCHEMA
from spark_jobs.core.plan import METADATA_PREFIX
from spark_jobs.engine.listing.inventory import InventoryError

if TYPE_CHECKING:
    from spark_jobs.engine.listing.inventory import Report

# the ISO 8601 times these columns read (the reference reads any other form, or refuses it)
_ISO = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$"


class Unusual(Exception):  # noqa: N818 - not an error: the reference reads this file
    """A file these columns do not read exactly as the reference does."""


def file_table(report: Report, name: str, data: bytes) -> pa.Table:
    """The namespace's rows of one (checked) data file of ``report``, as the reference gives them."""
    try:
        return (_azure if report.kind == "azure" else _s3)(report, name, data)
    except (Unusual, pa.ArrowException, ValueError, TypeError, KeyError, EOFError, OSError):
        found = report.objects({name: data})  # the reference: the same rows, or its InventoryError
        return pa.table({"key": pa.array([o.key for o in found], pa.string()),
                         "size": pa.array([o.size for o in found], pa.int64()),
                         "mtime": pa.array([o.mtime for o in found], pa.float64())}, schema=LISTING_SCHEMA)


def _seconds_of(times: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Unix seconds of timestamps (a zone-less one is UTC), truncated to microseconds as Python's datetime is, or of
    integer milliseconds."""
    if pa.types.is_timestamp(times.type):
        if times.type.unit == "ns":
            raise Unusual("nanosecond timestamps")
        micros = pc.cast(pc.cast(times, pa.timestamp("us", times.type.tz), safe=False), pa.int64())
        return pc.divide(pc.cast(micros, pa.float64()), 1e6)
    if pa.types.is_integer(times.type):
        return pc.divide(pc.cast(times, pa.float64()), 1000.0)
    raise Unusual(f"times of type {times.type}")


def _text_seconds(text: pa.Array) -> pa.Array:
    """Unix seconds of ISO 8601 times with a zone (null where empty)."""
    given = pc.not_equal(text, "")
    if not pc.all(pc.or_(pc.invert(given), pc.match_substring_regex(text, _ISO))).as_py():
        raise Unusual("a time in another form")
    stamps = pc.cast(pc.if_else(given, text, pa.scalar(None, pa.string())), pa.timestamp("ns", "UTC"))
    return _seconds_of(pc.cast(stamps, pa.timestamp("us", "UTC"), safe=False))


def _kept(keys: pa.Array, sizes: pa.Array, mtimes: pa.Array, mask: pa.Array, *, base: str, name: str,
          date: str) -> pa.Table:
    """``inventory.listed_object`` over columns: of the rows ``mask`` keeps, those under ``base`` that a listing
    lists (``inventory.listable``), keys relative to ``base``; a listed row without a time refused as there."""
    mask = pc.and_(pc.fill_null(mask, False), pc.starts_with(keys, pattern=base))
    keys, sizes, mtimes = keys.filter(mask), sizes.filter(mask), mtimes.filter(mask)
    relative = pc.utf8_slice_codeunits(keys, start=len(base))
    sliced = pc.and_(pc.starts_with(relative, pattern="data/"), pc.greater_equal(pc.count_substring(relative, "/"), 2))
    listable = pc.and_(pc.or_(sliced, pc.invert(pc.match_substring(relative, "/"))), pc.and_(
        pc.and_(pc.invert(pc.ends_with(relative, pattern="/")), pc.invert(pc.starts_with(relative,
                                                                                          pattern=METADATA_PREFIX))),
        pc.not_equal(relative, "dummy")))
    untimed = pc.and_(listable, pc.is_null(mtimes))
    if pc.any(untimed).as_py():
        key = keys.filter(untimed)[0].as_py()
        raise InventoryError(f"{name}: {key} has no {date}; the report cannot say which objects are old enough")
    return pa.table({"key": relative.filter(listable), "size": sizes.filter(listable),
                     "mtime": mtimes.filter(listable)}, schema=LISTING_SCHEMA)


def _s3(report: Report, name: str, data: bytes) -> pa.Table:
    """An S3 Inventory file (``inventory._rows``): the rows of the namespace's bucket, current, no delete marker."""
    manifest = report.manifest
    base = report.prefix.strip("/") + "/" if report.prefix.strip("/") else ""
    if manifest.file_format == "CSV":
        import pyarrow.csv as pacsv  # noqa: PLC0415

        raw = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
        if not raw.strip():
            raise Unusual("an empty file")
        schema = list(manifest.schema)
        wanted = [c for c in schema if c in ("Bucket", "Key", "Size", "LastModifiedDate", "IsLatest",
                                             "IsDeleteMarker")]
        table = pacsv.read_csv(io.BytesIO(raw), read_options=pacsv.ReadOptions(column_names=schema, use_threads=False),
                               parse_options=pacsv.ParseOptions(newlines_in_values=True, ignore_empty_lines=False),
                               convert_options=pacsv.ConvertOptions(
                                   column_types={c: pa.string() for c in schema}, include_columns=wanted,
                                   strings_can_be_null=False, quoted_strings_can_be_null=False))
        table = table.combine_chunks()
        if not table.num_rows:
            return LISTING_SCHEMA.empty_table()
        bucket = table["Bucket"].chunk(0)
        keys = table["Key"].combine_chunks()
        encoded = pc.match_substring_regex(keys, "[%+]")
        if pc.any(encoded).as_py():  # URL-encoded keys (S3 encodes the CSV's keys): only those decoded one by one
            at = pc.indices_nonzero(encoded)
            decoded = pa.array([unquote_plus(k) for k in keys.take(at).to_pylist()], pa.string())
            keys = pc.replace_with_mask(keys, encoded, decoded)
        latest = pc.not_equal(pc.utf8_lower(table["IsLatest"].combine_chunks()), "false") \
            if "IsLatest" in schema else pa.scalar(True)
        marker = pc.equal(pc.utf8_lower(table["IsDeleteMarker"].combine_chunks()), "true") \
            if "IsDeleteMarker" in schema else pa.scalar(False)
        size_text = table["Size"].combine_chunks()
        sizes = pc.cast(pc.if_else(pc.equal(size_text, ""), "0", size_text), pa.int64())
        mtimes = _text_seconds(table["LastModifiedDate"].combine_chunks())
    else:
        table = parquet_bytes.read(data).combine_chunks()
        if not {"bucket", "key", "size", "last_modified_date"} <= set(table.column_names):
            raise Unusual("columns missing")  # the reference names them
        if not table.num_rows:
            return LISTING_SCHEMA.empty_table()
        for flag in ("is_latest", "is_delete_marker"):
            if flag in table.column_names and not pa.types.is_boolean(table[flag].type):
                raise Unusual(f"{flag} of type {table[flag].type}")
        bucket, keys = table["bucket"].chunk(0), table["key"].chunk(0)
        if not (pa.types.is_string(bucket.type) and pa.types.is_string(keys.type)):
            raise Unusual("bucket or key not strings")
        latest = pc.fill_null(pc.not_equal(table["is_latest"].combine_chunks(), False), True) \
            if "is_latest" in table.column_names else pa.scalar(True)
        marker = pc.fill_null(table["is_delete_marker"].combine_chunks(), False) \
            if "is_delete_marker" in table.column_names else pa.scalar(False)
        sizes = pc.fill_null(pc.cast(table["size"].combine_chunks(), pa.int64()), 0)
        mtimes = _seconds_of(table["last_modified_date"].combine_chunks())
    mask = pc.and_(pc.and_(pc.equal(bucket, report.bucket), latest), pc.invert(marker))
    return _kept(keys, sizes, mtimes, mask, base=base, name=name, date="last-modified date")


def _flags(values: pa.Array | None, rows: int) -> tuple[pa.Array, pa.Array]:
    """(true, false) of a boolean field as ``inventory_azure._flag`` reads it (neither: empty or null)."""
    if values is None:
        none = pa.array([False] * rows, pa.bool_()) if rows else pa.array([], pa.bool_())
        return none, none
    if pa.types.is_boolean(values.type):
        return pc.fill_null(values, False), pc.fill_null(pc.invert(values), False)
    if not pa.types.is_string(values.type):
        raise Unusual(f"a flag of type {values.type}")
    text = pc.utf8_lower(pc.utf8_trim_whitespace(pc.fill_null(values, "")))
    if not pc.all(pc.is_in(text, value_set=pa.array(["true", "false", ""]))).as_py():
        raise Unusual("a flag neither true nor false")  # the reference refuses it
    return pc.equal(text, "true"), pc.equal(text, "false")


def _azure(report: Report, name: str, data: bytes) -> pa.Table:
    """An Azure Blob Inventory file (``inventory_azure._rows``): current blobs of the namespace's container (not a
    snapshot, an older version, deleted, nor a folder). A key named twice is left to the backend (its newest)."""
    manifest = report.manifest
    needed = ("Name", "Content-Length", "Last-Modified")
    if manifest.file_format == "csv":
        import pyarrow.csv as pacsv  # noqa: PLC0415

        text = data.decode("utf-8-sig").encode()
        first, _, rest = text.partition(b"\n")
        header = [c.strip() for c in next(csv.reader(io.StringIO(first.decode())), [])]
        if not rest.strip() or len(set(header)) != len(header):
            raise Unusual("no rows, or a schema row naming a field twice")
        wanted = [c for c in header if c in (*needed, "Snapshot", "IsCurrentVersion", "Deleted", "hdi_isfolder")]
        table = pacsv.read_csv(io.BytesIO(rest), read_options=pacsv.ReadOptions(column_names=header,
                                                                               use_threads=False),
                               parse_options=pacsv.ParseOptions(newlines_in_values=True),
                               convert_options=pacsv.ConvertOptions(
                                   column_types={c: pa.string() for c in header}, include_columns=wanted,
                                   strings_can_be_null=False, quoted_strings_can_be_null=False)).combine_chunks()
    else:
        table = parquet_bytes.read(data).combine_chunks()
    if not set(needed) <= set(table.column_names):
        raise Unusual("columns missing")  # the reference names them
    rows = table.num_rows
    if not rows:
        return LISTING_SCHEMA.empty_table()
    names = table["Name"].chunk(0)
    if not pa.types.is_string(names.type):
        raise Unusual(f"Name of type {names.type}")
    if not pc.all(pc.match_substring(names, "/")).as_py():
        raise Unusual("a Name without a container")  # the reference refuses it
    column = {c: table[c].chunk(0) if c in table.column_names else None
              for c in ("Snapshot", "IsCurrentVersion", "Deleted", "hdi_isfolder")}
    snapshot = column["Snapshot"]
    if snapshot is None:
        snapshotted = pa.array([False] * rows, pa.bool_())
    elif pa.types.is_string(snapshot.type):
        snapshotted = pc.fill_null(pc.greater(pc.utf8_length(snapshot), 0), False)
    else:
        snapshotted = snapshot.is_valid()
    _, older = _flags(column["IsCurrentVersion"], rows)
    deleted, _ = _flags(column["Deleted"], rows)
    folder, _ = _flags(column["hdi_isfolder"], rows)
    current = pc.invert(pc.or_(pc.or_(snapshotted, older), pc.or_(deleted, folder)))
    size = table["Content-Length"].chunk(0)
    if pa.types.is_string(size.type):
        size = pc.if_else(pc.equal(size, ""), "0", size)
    sizes = pc.fill_null(pc.cast(size, pa.int64()), 0)
    modified = table["Last-Modified"].chunk(0)
    if pa.types.is_string(modified.type):
        modified = pc.utf8_trim_whitespace(modified)
        if pc.any(pc.ends_with(modified, pattern="GMT")).as_py() or pc.any(pc.ends_with(modified, pattern="UTC")).as_py():
            raise Unusual("HTTP dates")  # the reference reads them
        mtimes = _text_seconds(modified)
    else:
        mtimes = _seconds_of(modified)
    container = report.bucket
    base = f"{container}/{report.prefix.strip('/')}/" if report.prefix.strip("/") else f"{container}/"
    return _kept(names, sizes, mtimes, current, base=base, name=name, date="Last-Modified")

