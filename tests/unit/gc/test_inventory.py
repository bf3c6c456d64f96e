"""S3 Inventory reports read instead of a listing: the manifest checked, and only the namespace's current objects
kept (its bucket, under its prefix and not a sibling's, no delete marker or older version, nothing under _lakefs/)."""

from __future__ import annotations

import gzip
import io
import json
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_jobs.engine.listing.inventory import InventoryError, namespace_objects, parse_manifest

SCHEMA = "Bucket, Key, VersionId, IsLatest, IsDeleteMarker, Size, LastModifiedDate, ETag"
WHEN = "2026-11-20T10:00:00.000Z"
T = datetime(2026, 11, 20, 10, tzinfo=UTC).timestamp()


def manifest(fmt: str = "CSV", **extra) -> bytes:
    doc = {"sourceBucket": "lake", "destinationBucket": "arn:aws:s3:::reports", "version": "2016-11-30",
           "creationTimestamp": "1763632800000", "fileFormat": fmt, "fileSchema": SCHEMA,
           "files": [{"key": "inv/lake/cfg/data/a.csv.gz", "size": 10, "MD5checksum": "00"}], **extra}
    return json.dumps(doc).encode()


def csv_file(rows: list[list[str]]) -> bytes:
    # mtime 0: the same bytes in every process, so that tests parametrized by them get the same ids in every worker
    return gzip.compress("".join(",".join(f'"{v}"' for v in row) + "\n" for row in rows).encode(), mtime=0)


ROWS = [
    ["lake", "repo/data/gabc/obj%2B1+x", "", "true", "false", "5", WHEN, "e"],  # key URL-encoded: "obj+1 x"
    ["lake", "repo/legacy-object", "", "true", "false", "6", WHEN, "e"],
    ["lake", "repo/_lakefs/abc", "", "true", "false", "7", WHEN, "e"],  # metadata: never
    ["lake", "repo/dummy", "", "true", "false", "1", WHEN, "e"],
    ["lake", "repo2/data/gabc/sibling", "", "true", "false", "8", WHEN, "e"],  # a sibling prefix: never
    ["lake", "repo/data/gabc/old-version", "v1", "false", "false", "9", WHEN, "e"],  # not the current version
    ["lake", "repo/data/gabc/deleted", "v2", "true", "true", "0", WHEN, "e"],  # a delete marker
    ["other", "repo/data/gabc/other-bucket", "", "true", "false", "3", WHEN, "e"],
    ["lake", "repo/data/loose-file", "", "true", "false", "4", WHEN, "e"],  # not in a slice: a listing skips it
    ["lake", "repo/exports/x.csv", "", "true", "false", "4", WHEN, "e"],  # neither data/ nor the root
]


def test_only_the_namespace_s_current_objects_are_kept():
    m = parse_manifest(manifest(), "s3://reports/inv/lake/cfg/2026-11-20T10-00Z/manifest.json")
    assert (m.source_bucket, m.destination_bucket, m.created, m.file_format) == ("lake", "reports", 1763632800.0, "CSV")
    got = namespace_objects(m, {"a.csv.gz": csv_file(ROWS)}, bucket="lake", prefix="repo")
    assert [(o.key, o.size, o.mtime) for o in got] == [("data/gabc/obj+1 x", 5, T), ("legacy-object", 6, T)]


def test_a_parquet_report_reads_the_same(local_zone):
    m = parse_manifest(manifest("Parquet", fileSchema="message s3.inventory { ... }"), "s3://reports/m.json")
    columns = list(zip(*ROWS, strict=True))
    table = pa.table({
        "bucket": list(columns[0]), "key": [k.replace("%2B", "+").replace("+x", " x") for k in columns[1]],
        "version_id": list(columns[2]), "is_latest": [v == "true" for v in columns[3]],
        "is_delete_marker": [v == "true" for v in columns[4]], "size": [int(v) for v in columns[5]],
        "last_modified_date": pa.array([datetime(2026, 11, 20, 10, tzinfo=UTC)] * len(ROWS), pa.timestamp("ms"))})
    out = io.BytesIO()
    pq.write_table(table, out)
    got = namespace_objects(m, {"a.parquet": out.getvalue()}, bucket="lake", prefix="repo/")
    assert [(o.key, o.size, o.mtime) for o in got] == [("data/gabc/obj+1 x", 5, T), ("legacy-object", 6, T)]


@pytest.mark.parametrize(("raw", "says"), [
    (b"not json", "not JSON"),
    (b"[]", "a JSON object"),
    (manifest("ORC"), "fileFormat 'ORC'"),
    (manifest(fileSchema="Bucket, Key"), "add Size and Last modified date"),
    (json.dumps({"fileFormat": "CSV", "fileSchema": SCHEMA}).encode(), "needs sourceBucket"),
])
def test_a_manifest_that_cannot_be_used_says_why(raw, says):
    with pytest.raises(InventoryError, match=says) as err:
        parse_manifest(raw, "s3://reports/m.json")
    assert err.value.reason == "inventory"


def test_a_row_without_a_date_or_with_missing_fields_stops_the_listing():
    m = parse_manifest(manifest(), "s3://reports/m.json")
    with pytest.raises(InventoryError, match="no last-modified date"):
        namespace_objects(m, {"a": csv_file([["lake", "repo/x", "", "true", "false", "1", "", "e"]])},
                          bucket="lake", prefix="repo")
    with pytest.raises(InventoryError, match="a row of 2 fields"):
        namespace_objects(m, {"a": csv_file([["lake", "repo/x"]])}, bucket="lake", prefix="repo")


def test_the_summary_says_how_the_namespace_was_found():
    from spark_jobs.core.report import describe_listing  # noqa: PLC0415

    assert describe_listing({}) == ""
    assert describe_listing({"kind": "full", "slices": 2, "objects": 1200}) == \
        "listing: full, 1,200 objects in 2 slices and the root"
    line = describe_listing({"kind": "inventory", "objects": 5, "files": 1, "report": "s3://r/m.json",
                             "report_time": "2026-11-20T10:00:00+00:00"})
    assert line == "listing: none, 5 objects from the S3 Inventory report of 2026-11-20T10:00:00+00:00 (1 files, " \
                   "s3://r/m.json)"


@pytest.mark.parametrize(("data", "says"), [
    (csv_file([["lake", "repo/x", "", "true", "false", "abc", WHEN, "e"]]), "ValueError"),  # a size that is no number
    (csv_file([["lake", "repo/x", "", "true", "false", "1", "yesterday", "e"]]), "ValueError"),
    (gzip.compress(b'"lake","repo/x"', mtime=0)[:-6], "EOFError"),  # a truncated gzip
    (b"\xff\xfe not text", "UnicodeDecodeError"),
])
def test_an_unreadable_report_file_is_an_inventory_error(data, says):
    m = parse_manifest(manifest(), "s3://reports/m.json")
    with pytest.raises(InventoryError, match=f"is not a readable CSV report file: {says}") as err:
        namespace_objects(m, {"a.csv.gz": data}, bucket="lake", prefix="repo")
    assert err.value.reason == "inventory"


def test_a_csv_date_without_a_zone_is_utc(local_zone):
    m = parse_manifest(manifest(), "s3://reports/m.json")
    row = ["lake", "repo/x", "", "true", "false", "1", "2026-11-20T10:00:00", "e"]
    assert namespace_objects(m, {"a": csv_file([row])}, bucket="lake", prefix="repo")[0].mtime == T
