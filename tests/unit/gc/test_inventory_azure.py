"""Azure Blob Inventory reports read instead of a listing: the manifest checked (status, schema, the rule's
coverage of the namespace, file sizes, checksum), and only the namespace's current blobs kept (its container, under
its prefix and not a sibling's, no snapshot, older version, deleted blob or folder, nothing under _lakefs/)."""

from __future__ import annotations

import base64
import hashlib
import io
import json
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_jobs.engine.listing.inventory import InventoryError
from spark_jobs.engine.listing.inventory_azure import (
    check_checksum,
    check_coverage,
    check_files,
    namespace_objects,
    parse_manifest,
    parse_url,
)

URL = "https://acct.blob.core.windows.net/inv/2026/11/20/10-00-00/lake/lake-manifest.json"
HEADER = ["Name", "Creation-Time", "Last-Modified", "Content-Length", "BlobType", "Snapshot", "VersionId",
          "IsCurrentVersion", "Deleted"]
WHEN = "2026-11-20T10:00:00.0000000Z"
T = datetime(2026, 11, 20, 10, tzinfo=UTC).timestamp()


def manifest(fmt: str = "csv", *, filters: dict | None = None, **extra) -> bytes:
    doc = {"destinationContainer": "inv", "endpoint": "https://acct.blob.core.windows.net",
           "files": [{"blob": "2026/11/20/10-00-00/lake/lake_1.csv", "size": 10}],
           "inventoryCompletionTime": "2026-11-20T10:10:00Z", "inventoryStartTime": "2026-11-20T10:00:00Z",
           "ruleDefinition": {"filters": {"blobTypes": ["blockBlob"], "includeBlobVersions": True,
                                          "includeSnapshots": True, "includeDeleted": True, **(filters or {})},
                              "format": fmt, "objectType": "blob", "schedule": "daily", "schemaFields": HEADER},
           "ruleName": "lake", "status": "Succeeded", "summary": {"objectCount": 10, "totalObjectSize": 60},
           "version": "1.0", **extra}
    return json.dumps(doc).encode()


def csv_file(rows: list[list[str]], header: list[str] = HEADER) -> bytes:
    return "".join(",".join(f'"{v}"' for v in row) + "\r\n" for row in [header, *rows]).encode()


def row(name: str, size: str = "5", *, modified: str = WHEN, snapshot: str = "", version: str = "",
        current: str = "", deleted: str = "false") -> list[str]:
    return [name, WHEN, modified, size, "BlockBlob", snapshot, version, current, deleted]


ROWS = [
    row("lake/repo/data/gabc/obj 1,x"),  # a comma and a space: CSV quoting, no URL decoding
    row("lake/repo/legacy-object", "6"),
    row("lake/repo/_lakefs/abc", "7"),  # metadata: never
    row("lake/repo/dummy", "1"),
    row("lake/repo2/data/gabc/sibling", "8"),  # a sibling prefix: never
    row("lake/repo/data/gabc/old-version", "9", version="v1", current="false"),  # not the current version
    row("lake/repo/data/gabc/snap", "9", snapshot="2026-11-19T10:00:00.0000000Z"),  # a snapshot
    row("lake/repo/data/gabc/deleted", "9", deleted="true"),  # soft-deleted
    row("other/repo/data/gabc/other-container", "3"),
    row("lake/repo/data/loose-file", "4"),  # not in a slice: a listing skips it
    row("lake/repo/exports/x.csv", "4"),  # neither data/ nor the root
]
EXPECTED = [("data/gabc/obj 1,x", 5, T), ("legacy-object", 6, T)]


def objects(got) -> list[tuple[str, int, float]]:
    return sorted((o.key, o.size, o.mtime) for o in got)


def test_only_the_namespace_s_current_blobs_are_kept():
    m = parse_manifest(manifest(), URL)
    assert (m.account, m.destination_container, m.created, m.file_format) == ("acct", "inv", T, "csv")
    assert m.files == (("2026/11/20/10-00-00/lake/lake_1.csv", 10),)
    got = namespace_objects(m, {"lake_1.csv": csv_file(ROWS)}, container="lake", prefix="repo")
    assert objects(got) == EXPECTED


def parquet_file(unit: str) -> bytes:
    """ROWS as Azure writes a Parquet report: dates as timestamp_millis ("ms") or as plain milliseconds ("int")."""
    columns = list(zip(*ROWS, strict=True))
    modified = [int(T * 1000)] * len(ROWS)
    table = pa.table({
        "Name": list(columns[0]), "Creation-Time": pa.array(modified, pa.int64()),
        "Last-Modified": pa.array(modified, pa.timestamp("ms")) if unit == "ms" else pa.array(modified, pa.int64()),
        "Content-Length": [int(v) for v in columns[3]], "BlobType": list(columns[4]),
        "Snapshot": [v or None for v in columns[5]], "VersionId": [v or None for v in columns[6]],
        "IsCurrentVersion": [{"true": True, "false": False}.get(v) for v in columns[7]],
        "Deleted": [v == "true" for v in columns[8]]})
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


@pytest.mark.parametrize("unit", ["ms", "int"])
def test_a_parquet_report_reads_the_same(local_zone, unit):
    """Parquet dates are timestamp_millis (milliseconds since the epoch, UTC), booleans are booleans."""
    m = parse_manifest(manifest("parquet"), URL)
    got = namespace_objects(m, {"lake_1.parquet": parquet_file(unit)}, container="lake", prefix="repo/")
    assert objects(got) == EXPECTED


@pytest.mark.parametrize("text", ["2026-11-20T10:00:00Z", "2026-11-20T10:00:00.1234567Z", "2026-11-20T11:00:00+01:00",
                                  "Fri, 20 Nov 2026 10:00:00 GMT"])
def test_csv_times_with_a_zone_are_read(local_zone, text):
    m = parse_manifest(manifest(), URL)
    got = namespace_objects(m, {"a": csv_file([row("lake/repo/x", modified=text)])}, container="lake", prefix="repo")
    assert int(got[0].mtime) == int(T)


def test_a_key_listed_twice_keeps_its_newest_time():
    """Duplicates happen (the docs say so); a key's newest time wins, so it never looks older than it is."""
    m = parse_manifest(manifest(), URL)
    rows = [row("lake/repo/x", "1", modified="2026-11-18T10:00:00Z"), row("lake/repo/x", "2", modified=WHEN),
            row("lake/repo/x", "3", modified="2026-11-19T10:00:00Z")]
    assert objects(namespace_objects(m, {"a": csv_file(rows)}, container="lake", prefix="repo")) == [("x", 2, T)]


def test_a_namespace_at_the_container_root():
    m = parse_manifest(manifest(), URL)
    rows = [row("lake/data/g1/a"), row("lake/top"), row("lake/_lakefs/x"), row("lakes/data/g1/b")]
    got = namespace_objects(m, {"a": csv_file(rows)}, container="lake", prefix="")
    assert [o.key for o in sorted(got, key=lambda o: o.key)] == ["data/g1/a", "top"]


def test_folders_of_a_hierarchical_namespace_are_skipped():
    header = ["Name", "Last-Modified", "Content-Length", "hdi_isfolder"]
    data = csv_file([["lake/repo/data/g1/sub", WHEN, "0", "true"], ["lake/repo/data/g1/a", WHEN, "3", "false"]],
                    header)
    m = parse_manifest(manifest(), URL)
    assert objects(namespace_objects(m, {"a": data}, container="lake", prefix="repo")) == [("data/g1/a", 3, T)]


def rule(**changes) -> bytes:
    doc = json.loads(manifest())
    for key, value in changes.items():
        if value is None:
            doc["ruleDefinition"].pop(key)
        else:
            doc["ruleDefinition"][key] = value
    return json.dumps(doc).encode()


def without(*fields: str) -> list[str]:
    return [f for f in HEADER if f not in fields]


@pytest.mark.parametrize(("raw", "says"), [
    (b"not json", "not JSON"),
    (b"[]", "a JSON object"),
    (b"{}", "no status"),
    (manifest(status="Pending"), "status Pending: the inventory run is still writing"),
    (manifest(status="Failed"), "status 'Failed'"),
    (manifest(status="PartiallySucceeded"), "status 'PartiallySucceeded'"),
    (manifest("orc"), "format 'orc'"),
    (rule(objectType="container"), "an inventory of containers"),
    (rule(schemaFields=without("Content-Length")), r"lack \['Content-Length'\]"),
    (rule(schemaFields=without("Last-Modified", "Name")), r"lack \['Name', 'Last-Modified'\]"),
    (rule(schemaFields=without("Snapshot")), r"lack \['Snapshot'\]"),  # snapshots included, not told apart
    (rule(schemaFields=without("IsCurrentVersion")), r"lack \['IsCurrentVersion'\]"),
    (rule(schemaFields=without("Deleted")), r"lack \['Deleted'\]"),
    (manifest(endpoint="https://example.com"), "is not https://<account>.blob.core.windows.net"),
    (manifest(inventoryStartTime="2026-11-20T10:00:00"), "needs endpoint"),  # a time without a zone
    (rule(schemaFields=None), "needs endpoint"),
])
def test_a_manifest_that_cannot_be_used_says_why(raw, says):
    with pytest.raises(InventoryError, match=says) as err:
        parse_manifest(raw, URL)
    assert err.value.reason == "inventory"


def test_fields_the_rule_does_not_need_may_be_left_out():
    raw = manifest(filters={"includeBlobVersions": False, "includeSnapshots": False, "includeDeleted": False})
    doc = json.loads(raw)
    doc["ruleDefinition"]["schemaFields"] = ["Name", "Content-Length", "Last-Modified"]
    m = parse_manifest(json.dumps(doc).encode(), URL)
    data = csv_file([["lake/repo/x", WHEN, "4"]], ["Name", "Last-Modified", "Content-Length"])
    assert objects(namespace_objects(m, {"a": data}, container="lake", prefix="repo")) == [("x", 4, T)]


@pytest.mark.parametrize(("filters", "says"), [
    ({"prefixMatch": ["other"]}, r"is a report of \['other'\]; it does not list lake/repo/"),
    ({"prefixMatch": ["lake/repo/data/g1"]}, "it does not list lake/repo/"),  # only part of it
    ({"excludePrefix": ["lake/repo/data"]}, "excludes"),
    ({"excludePrefix": ["lake/re"]}, "excludes"),
    ({"blobTypes": ["appendBlob"]}, "add blockBlob"),
])
def test_a_rule_that_leaves_out_part_of_the_namespace_is_refused(filters, says):
    m = parse_manifest(manifest(filters=filters), URL)
    with pytest.raises(InventoryError, match=says):
        check_coverage(m, container="lake", prefix="repo")


@pytest.mark.parametrize("filters", [
    {}, {"prefixMatch": ["lake"]}, {"prefixMatch": ["other", "lake/re"]}, {"prefixMatch": [""]},
    {"excludePrefix": ["lake/repo2", "other", "lake/repo/_lakefs"]},
])
def test_a_rule_that_covers_the_namespace_is_taken(filters):
    check_coverage(parse_manifest(manifest(filters=filters), URL), container="lake", prefix="repo")


def test_files_of_another_size_and_an_altered_manifest_are_refused():
    m = parse_manifest(manifest(), URL)
    check_files(m, {"2026/11/20/10-00-00/lake/lake_1.csv": b"x" * 10})
    with pytest.raises(InventoryError, match="an incomplete or altered report"):
        check_files(m, {"2026/11/20/10-00-00/lake/lake_1.csv": b"x" * 11})
    raw = manifest()
    digest = hashlib.md5(raw, usedforsecurity=False).digest()
    for good in (digest.hex().encode(), digest.hex().upper().encode() + b"\n", base64.b64encode(digest),
                 b"something else"):  # the encoding is not documented: compared only when it reads as an MD5
        check_checksum(raw, good, URL)
    for bad in (hashlib.md5(b"x", usedforsecurity=False).hexdigest().encode(),
                base64.b64encode(hashlib.md5(b"x", usedforsecurity=False).digest())):
        with pytest.raises(InventoryError, match="checksum file does not match"):
            check_checksum(raw, bad, URL)


@pytest.mark.parametrize(("data", "says"), [
    (csv_file([row("lake/repo/x", "abc")]), "ValueError"),  # a size that is no number
    (csv_file([row("lake/repo/x", modified="yesterday")]), "ValueError"),
    (b"\xff\xfe not text", "UnicodeDecodeError"),
])
def test_an_unreadable_report_file_is_an_inventory_error(data, says):
    m = parse_manifest(manifest(), URL)
    with pytest.raises(InventoryError, match=f"is not a readable csv report file: {says}") as err:
        namespace_objects(m, {"lake_1.csv": data}, container="lake", prefix="repo")
    assert err.value.reason == "inventory"


@pytest.mark.parametrize(("data", "says"), [
    (csv_file([row("lake/repo/x", modified="2026-11-20T10:00:00")]), "names no time zone"),
    (csv_file([row("lake/repo/x", modified="")]), "has no Last-Modified"),
    (csv_file([row("lake/repo/x", deleted="maybe")]), "Deleted 'maybe' is neither true nor false"),
    (csv_file([row("lake/repo/x", current="yes")]), "IsCurrentVersion 'yes'"),
    (csv_file([["lake/repo/x", WHEN]]), "a row of 2 fields"),
    (csv_file([row("no-container")]), "is not <container>/<blob name>"),
    (csv_file([["lake/repo/x", WHEN]], ["Name", "Last-Modified"]), r"lacks \['Content-Length'\]"),
    (b"", r"lacks \['Name', 'Content-Length', 'Last-Modified'\]"),
])
def test_rows_that_cannot_be_interpreted_stop_the_listing(data, says):
    m = parse_manifest(manifest(), URL)
    with pytest.raises(InventoryError, match=says):
        namespace_objects(m, {"a": data}, container="lake", prefix="repo")


def test_a_parquet_file_without_the_needed_columns_is_refused():
    m = parse_manifest(manifest("parquet"), URL)
    out = io.BytesIO()
    pq.write_table(pa.table({"Name": ["lake/repo/x"], "Content-Length": [1]}), out)
    with pytest.raises(InventoryError, match=r"lacks the columns \['Last-Modified'\]"):
        namespace_objects(m, {"a.parquet": out.getvalue()}, container="lake", prefix="repo")


def test_the_url_forms():
    assert parse_url(URL) == ("acct", "inv", "2026/11/20/10-00-00/lake/lake-manifest.json")
    assert parse_url("https://acct.blob.core.windows.net/inv/lake/") == ("acct", "inv", "lake")
    assert parse_url("https://acct.dfs.core.windows.net/inv/lake") == ("acct", "inv", "lake")
    for url in ("s3://bucket/manifest.json", "https://example.com/inv/lake", "az://inv/lake", "gs://b/x"):
        with pytest.raises(InventoryError, match="an Azure Blob Inventory report is named by"):
            parse_url(url)
