"""An inventory report's file read into Arrow columns (what the dataset plan's threads and executors do) gives the
rows the per-row reference gives, or the same InventoryError; the usual files are read by the columns themselves,
never a Python object per row."""

from __future__ import annotations

import gzip
import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from spark_jobs.engine.listing import inventory, inventory_azure, inventory_columns
from spark_jobs.engine.listing.arrow import newest_per_key
from spark_jobs.engine.listing.inventory import InventoryError, Report
from tests.unit.gc import test_inventory as s3
from tests.unit.gc import test_inventory_azure as az


def s3_report(fmt: str = "CSV", prefix: str = "repo") -> Report:
    raw = s3.manifest(fmt, **({} if fmt == "CSV" else {"fileSchema": "message s3.inventory { ... }"}))
    return Report("s3", inventory.parse_manifest(raw, "s3://reports/m.json"), "s3://reports", "lake", prefix)


def azure_report(fmt: str = "csv", prefix: str = "repo") -> Report:
    return Report("azure", inventory_azure.parse_manifest(az.manifest(fmt), az.URL), "https://acct/inv", "lake", prefix)


def rows_of(table: pa.Table) -> list[tuple[str, int, float]]:
    return sorted(zip(table["key"].to_pylist(), table["size"].to_pylist(), table["mtime"].to_pylist(), strict=True))


def same(report: Report, data: bytes, name: str = "a.csv.gz") -> list[tuple[str, int, float]]:
    """What the columns read of ``data``, asserted equal to the reference (rows, or the InventoryError's message)."""
    try:
        expected = sorted((o.key, o.size, o.mtime) for o in report.objects({name: data}))
    except InventoryError as exc:
        with pytest.raises(InventoryError) as err:
            inventory_columns.file_table(report, name, data)
        assert str(err.value) == str(exc) and err.value.reason == "inventory"
        return []
    table = inventory_columns.file_table(report, name, data)
    got = rows_of(newest_per_key(table) if report.kind == "azure" else table)
    assert got == expected
    return got


def s3_parquet(rows: list[list[str]]) -> bytes:
    columns = list(zip(*rows, strict=True))
    table = pa.table({
        "bucket": list(columns[0]), "key": [k.replace("%2B", "+").replace("+x", " x") for k in columns[1]],
        "version_id": list(columns[2]), "is_latest": [v == "true" for v in columns[3]],
        "is_delete_marker": [v == "true" for v in columns[4]], "size": [int(v) for v in columns[5]],
        "last_modified_date": pa.array([s3.datetime(2026, 11, 20, 10, tzinfo=s3.UTC)] * len(rows), pa.timestamp("ms"))})
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


@pytest.mark.parametrize("prefix", ["repo", "repo/"])
def test_s3_files_read_by_the_columns_themselves(local_zone, prefix):
    csv_report, parquet_report = s3_report(prefix=prefix), s3_report("Parquet", prefix=prefix)
    expected = [("data/gabc/obj+1 x", 5, s3.T), ("legacy-object", 6, s3.T)]
    assert same(csv_report, s3.csv_file(s3.ROWS)) == expected
    assert same(parquet_report, s3_parquet(s3.ROWS), "a.parquet") == expected
    assert rows_of(inventory_columns._s3(csv_report, "a", s3.csv_file(s3.ROWS))) == expected  # no fallback
    assert rows_of(inventory_columns._s3(parquet_report, "a", s3_parquet(s3.ROWS))) == expected
    assert rows_of(inventory_columns._s3(csv_report, "a", gzip.decompress(s3.csv_file(s3.ROWS)))) == expected


@pytest.mark.parametrize("data", [
    s3.csv_file([["lake", "repo/x", "", "true", "false", "1", "", "e"]]),  # no date
    s3.csv_file([["lake", "repo/x"]]),  # a row of 2 fields
    s3.csv_file([["lake", "repo/x", "", "true", "false", "abc", s3.WHEN, "e"]]),
    s3.csv_file([["lake", "repo/x", "", "true", "false", "1", "yesterday", "e"]]),
    gzip.compress(b'"lake","repo/x"', mtime=0)[:-6],
    b"\xff\xfe not text",
    s3.csv_file([["lake", "repo/x", "", "true", "false", "1", "2026-11-20T10:00:00", "e"]]),  # no zone: UTC
    s3.csv_file([["lake", "repo/data/g/x", "", "TRUE", "FALSE", "", "2026-11-20T10:00:00.1234567+01:00", "e"]]),
    s3.csv_file([]),
    gzip.compress(b"\n", mtime=0),
])
def test_s3_files_read_as_the_reference_reads_them(local_zone, data):
    same(s3_report(), data)


@pytest.mark.parametrize("unit", ["ms", "int"])
def test_azure_files_read_by_the_columns_themselves(local_zone, unit):
    assert same(azure_report(), az.csv_file(az.ROWS)) == az.EXPECTED
    assert same(azure_report("parquet", "repo/"), az.parquet_file(unit), "a.parquet") == az.EXPECTED
    assert rows_of(inventory_columns._azure(azure_report(), "a", az.csv_file(az.ROWS))) == az.EXPECTED
    assert rows_of(inventory_columns._azure(azure_report("parquet"), "a", az.parquet_file(unit))) == az.EXPECTED
    twice = [az.row("lake/repo/x", "1", modified="2026-11-18T10:00:00Z"), az.row("lake/repo/x", "2", modified=az.WHEN),
             az.row("lake/repo/x", "3", modified="2026-11-19T10:00:00Z")]
    assert same(azure_report(), az.csv_file(twice)) == [("x", 2, az.T)]  # the newest, as the backends keep it
    root = [az.row("lake/data/g1/a"), az.row("lake/top"), az.row("lake/_lakefs/x"), az.row("lakes/data/g1/b")]
    assert [k for k, _, _ in same(azure_report(prefix=""), az.csv_file(root))] == ["data/g1/a", "top"]
    folders = az.csv_file([["lake/repo/data/g1/sub", az.WHEN, "0", "true"], ["lake/repo/data/g1/a", az.WHEN, "3",
                                                                             "false"]],
                          ["Name", "Last-Modified", "Content-Length", "hdi_isfolder"])
    assert rows_of(inventory_columns._azure(azure_report(), "a", folders)) == [("data/g1/a", 3, az.T)]


@pytest.mark.parametrize("data", [
    az.csv_file([az.row("lake/repo/x", modified=t)]) for t in (
        "2026-11-20T10:00:00Z", "2026-11-20T10:00:00.1234567Z", "2026-11-20T11:00:00+01:00",
        "Fri, 20 Nov 2026 10:00:00 GMT", "2026-11-20T10:00:00", "", "yesterday")] + [
    az.csv_file([az.row("lake/repo/x", "abc")]),
    az.csv_file([az.row("lake/repo/x", deleted="maybe")]),
    az.csv_file([az.row("lake/repo/x", current="yes")]),
    az.csv_file([az.row("lake/repo/x", current=" TRUE ", deleted="False")]),
    az.csv_file([["lake/repo/x", az.WHEN]]),
    az.csv_file([az.row("no-container")]),
    az.csv_file([["lake/repo/x", az.WHEN]], ["Name", "Last-Modified"]),
    az.csv_file([]),
    b"",
    b"\xff\xfe not text",
])
def test_azure_files_read_as_the_reference_reads_them(local_zone, data):
    same(azure_report(), data)
