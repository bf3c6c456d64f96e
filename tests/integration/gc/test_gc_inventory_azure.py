"""A full run from an Azure Blob Inventory report instead of a listing, on Azurite and a real lakeFS: the report,
written in Microsoft's documented layout (``YYYY/MM/DD/HH-MM-SS/<rule>/`` in a destination container: the report
files, ``<rule>-manifest.json``, then ``<rule>-manifest.checksum``), in CSV and in Parquet, plans exactly what a
listing plans for the blobs it names; blobs written after the report, or newer than its time minus min-age, are
never candidates; nothing outside the namespace (a sibling prefix, another container) or under ``_lakefs/`` is
touched; snapshot, older-version and deleted rows are not blobs to delete; a report that cannot be trusted (another
account or container, a failed or unfinished run, an altered file, a schema without the sizes or times) stops the
run and deletes nothing. On both runners the run is planned as datasets (the driver reads the manifest; each report
file is read, checked and filtered by a thread or an executor), and plans what the object path (which reads the
report on the driver) plans."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.gc_engine import RUNNERS, Collector
from tests.integration.gc.test_gc_inventory import collector, read_as_datasets, refused_on_every_path
from tests.integration.gc.test_gc_stores import data_keys, history, new_repo, put, read, store_world
from tests.services import AZURITE_ACCOUNT

REPORTS = "inventory-reports"  # the rules' destination container
OTHER = "other-container"  # a container of the same account beside the namespace's
HEADER = ["Name", "Creation-Time", "Last-Modified", "Content-Length", "Content-MD5", "BlobType", "AccessTier",
          "Snapshot", "VersionId", "IsCurrentVersion", "Deleted"]
BASE = f"https://{AZURITE_ACCOUNT}.blob.core.windows.net"


@pytest.fixture(scope="module")
def azure_world() -> Iterator:
    for world in store_world("azure"):
        world[0].create_container(REPORTS)
        world[0].create_container(OTHER)
        yield world


def azure_time(when: datetime) -> str:
    """A time as the report's CSV gives it: ISO 8601 in UTC, seven fraction digits."""
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f") + "0Z"


def inventory_rows(store, extra: list[dict]) -> list[dict]:
    """Every blob of the account but the reports (the namespace's, its neighbours', another container's), as an
    inventory rule with versions, snapshots and deleted blobs included lists them; then ``extra``."""
    from azure.storage.blob import BlobServiceClient  # noqa: PLC0415

    rows = []
    with BlobServiceClient.from_connection_string(store.connection_string()) as service:
        for container in service.list_containers():
            if container.name == REPORTS:
                continue
            for blob in service.get_container_client(container.name).list_blobs():
                md5 = blob.content_settings.content_md5
                rows.append({"Name": f"{container.name}/{blob.name}", "Creation-Time": blob.creation_time,
                             "Last-Modified": blob.last_modified, "Content-Length": blob.size,
                             "Content-MD5": md5.hex() if md5 else "", "BlobType": "BlockBlob", "AccessTier": "Hot",
                             "Snapshot": None, "VersionId": None, "IsCurrentVersion": None, "Deleted": False})
    return rows + extra


def report_file(rows: list[dict], fmt: str) -> bytes:
    if fmt == "csv":  # the schema row first
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(HEADER)
        for row in rows:
            writer.writerow([azure_time(v) if isinstance(v, datetime) else "" if v is None
                             else str(v).lower() if isinstance(v, bool) else v for v in (row[c] for c in HEADER)])
        return out.getvalue().encode()
    stamp = pa.timestamp("ms", tz="UTC")  # timestamp_millis
    types = {"Creation-Time": stamp, "Last-Modified": stamp, "Content-Length": pa.int64(),
             "IsCurrentVersion": pa.bool_(), "Deleted": pa.bool_()}
    table = pa.table({c: pa.array([r[c] for r in rows], types.get(c, pa.string())) for c in HEADER})
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


def run_start() -> datetime:
    """When an inventory run starts, as its manifest and folder give it (whole seconds): the next second begun, so
    that every blob written before is older and the rows are listed after it, as in a real run."""
    time.sleep(1 - datetime.now(UTC).microsecond / 1e6)
    return datetime.now(UTC).replace(microsecond=0)


def write_report(store, *, fmt: str = "csv", rule: str | None = None, start: datetime | None = None,
                 endpoint: str = BASE, status: str = "Succeeded", complete: bool = True, alter: bool = False,
                 extra: list[dict] | None = None, filters: dict | None = None,
                 schema: list[str] | None = None, flip: bool = False) -> str:
    """An inventory run of ``rule`` as Azure writes it into REPORTS (two report files, the manifest, then the
    checksum); the manifest's URL. ``alter``: the second file one byte longer than the manifest says; ``flip``: its
    last byte changed (its size right: Azure's manifest gives no MD5, the file is refused only when unreadable)."""
    rule = rule or f"rule{uuid.uuid4().hex[:8]}"
    start = start or run_start()
    folder = f"{start:%Y/%m/%d/%H-%M-%S}/{rule}"
    rows = inventory_rows(store, extra or [])
    files = []
    with store.container_client(REPORTS) as reports:
        for n, part in enumerate((rows[::2], rows[1::2]), start=1):
            data = report_file(part, fmt)
            blob = f"{folder}/{rule}_{n}.{fmt}"
            written = data + (b"x" if alter and n == 2 else b"")
            if flip and n == 2:
                written = data[:-1] + bytes([data[-1] ^ 0xFF])
            reports.upload_blob(blob, written, overwrite=True)
            files.append({"blob": blob, "size": len(data)})
        manifest = {
            "destinationContainer": REPORTS, "endpoint": endpoint, "files": files,
            "inventoryCompletionTime": (start + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "inventoryStartTime": start.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "ruleDefinition": {"filters": {"blobTypes": ["blockBlob", "appendBlob"], "includeBlobVersions": True,
                                           "includeSnapshots": True, "includeDeleted": True, **(filters or {})},
                               "format": fmt, "objectType": "blob", "schedule": "daily",
                               "schemaFields": schema or HEADER},
            "ruleName": rule, "status": status,
            "summary": {"objectCount": len(rows), "totalObjectSize": sum(r["Content-Length"] for r in rows)},
            "version": "1.0"}
        body = json.dumps(manifest, indent=2).encode()
        reports.upload_blob(f"{folder}/{rule}-manifest.json", body, overwrite=True)
        if complete:  # written last: marks the run's completion
            reports.upload_blob(f"{folder}/{rule}-manifest.checksum",
                                hashlib.md5(body, usedforsecurity=False).hexdigest().encode(), overwrite=True)
    return f"{BASE}/{REPORTS}/{folder}/{rule}-manifest.json"


def not_blobs(store, namespace: str) -> list[dict]:
    """Rows of the namespace that are no blob to delete: a snapshot, an older version, a soft-deleted blob (none
    exists: a GC that took them would plan them)."""
    root = f"{store.fsspec_path(namespace)}/data/gzzz"
    old = datetime.now(UTC) - timedelta(days=30)
    row = {"Creation-Time": old, "Last-Modified": old, "Content-Length": 3, "Content-MD5": "", "BlobType": "BlockBlob",
           "AccessTier": "Hot", "Snapshot": None, "VersionId": None, "IsCurrentVersion": None, "Deleted": False}
    return [{**row, "Name": f"{root}/snapshot", "Snapshot": azure_time(old)},
            {**row, "Name": f"{root}/older-version", "VersionId": azure_time(old), "IsCurrentVersion": False},
            {**row, "Name": f"{root}/soft-deleted", "Deleted": True}]


def metadata_keys(store, namespace: str) -> set[str]:
    fs = store.filesystem()
    root = store.fsspec_path(namespace) + "/"
    return {p[len(root):] for p in fs.find(root + "_lakefs")}


@pytest.mark.parametrize(("fmt", "runner"), [("csv", "threads"), ("parquet", "threads"),
                                             pytest.param("csv", "spark", marks=pytest.mark.spark),
                                             pytest.param("parquet", "spark", marks=pytest.mark.spark)])
def test_a_run_from_an_azure_inventory_report(azure_world, fmt, runner, request):
    store, server, lakefs = azure_world
    gc = collector(server, store, runner, request)
    repo = new_repo(lakefs, store)
    h = history(lakefs, store, repo)
    namespace = h["namespace"]
    fs = store.filesystem()
    sibling = store.fsspec_path(namespace) + "2/data/x/not-ours"  # a prefix sharing the name
    elsewhere = f"{OTHER}/{repo}/data/gabc/not-ours"  # the same path in another container
    fs.pipe_file(sibling, b"not ours")
    fs.pipe_file(elsewhere, b"not ours")
    _, listed = gc._go(repo, "dry-run", min_age=timedelta(0))
    expected = {o.key for o in listed.deleted}
    assert expected == {h["v1"], h["s1"]}

    url = write_report(store, fmt=fmt, extra=not_blobs(store, namespace))
    # written after the report: garbage (overwritten while staged), which the inventory has not seen yet
    put(lakefs, repo, "late.txt", b"late-1")
    put(lakefs, repo, "late.txt", b"late-2")
    before, metadata = data_keys(store, namespace), metadata_keys(store, namespace)

    # rows newer than the report's time minus min-age are ignored (everything here was written moments ago)
    young, _ = gc._go(repo, "dry-run", min_age=timedelta(hours=1), inventory=url)
    assert young.num_deleted_objects == 0 and young.too_new >= 2 and read_as_datasets(young, runner), young.listing

    summary, marked = gc._go(repo, "full", min_age=timedelta(0), inventory=url)
    assert summary.success and read_as_datasets(summary, runner) and summary.listing["files"] == 2
    assert summary.listing["report"] == url
    assert {o.key for o in marked.deleted} == expected and summary.swept == 2
    assert data_keys(store, namespace) == before - expected  # the late garbage stays for the next report
    assert metadata <= metadata_keys(store, namespace)  # nothing under _lakefs/ deleted
    assert read(lakefs, repo, h["c1"], "tables/t1/a.txt") == 410 and read(lakefs, repo, "main", "staged.txt") == b"s2"
    assert read(lakefs, repo, "main", "late.txt") == b"late-2"
    assert fs.cat_file(sibling) == b"not ours" and fs.cat_file(elsewhere) == b"not ours"

    # the next run lists what changed since the report's horizon, and so finds the late garbage
    listing_run, _ = gc._go(repo, "full", min_age=timedelta(0))
    assert listing_run.swept == 1 and listing_run.listing["kind"] == "incremental", listing_run.listing
    assert listing_run.listing["since"] == summary.cutoff_time  # the report's time minus min-age


@pytest.mark.parametrize("runner", RUNNERS)
def test_nothing_newer_than_the_report_is_deleted(azure_world, runner, request):
    """A report started before the garbage was written: its rows are all newer than its time, so none is old
    enough, whatever the run's own cutoff."""
    store, server, lakefs = azure_world
    gc = collector(server, store, runner, request)
    repo = new_repo(lakefs, store)
    h = history(lakefs, store, repo)
    before = data_keys(store, h["namespace"])
    url = write_report(store, fmt="parquet", start=datetime.now(UTC) - timedelta(minutes=10))
    summary, marked = gc._go(repo, "full", min_age=timedelta(0), inventory=url)
    assert summary.success and marked.deleted == [] and summary.too_new >= 2 and read_as_datasets(summary, runner)
    assert data_keys(store, h["namespace"]) == before


@pytest.mark.parametrize("runner", RUNNERS)
def test_both_paths_plan_the_same_from_a_report(azure_world, runner, request):
    """The dataset plan (report files read by threads or executors) and the object path (the report read on the
    driver: a small repository with the mark cache on the thread runner) plan the same from one report, in CSV and
    in Parquet, a key named twice (an older duplicate row in the other file) keeping its newest row."""
    store, server, lakefs = azure_world
    repo = new_repo(lakefs, store)
    h = history(lakefs, store, repo)
    namespace = h["namespace"]
    old = datetime.now(UTC) - timedelta(days=30)
    twice = {"Name": f"{store.fsspec_path(namespace)}/{h['v1']}", "Creation-Time": old, "Last-Modified": old,
             "Content-Length": 99, "Content-MD5": "", "BlobType": "BlockBlob", "AccessTier": "Hot", "Snapshot": None,
             "VersionId": None, "IsCurrentVersion": None, "Deleted": False}
    for fmt in ("csv", "parquet"):
        url = write_report(store, fmt=fmt, extra=[*not_blobs(store, namespace), twice])
        objects, by_objects = gc_plan(collector(server, store, "threads", request, cache=True), repo, url)
        assert objects.listing["read_on"] == "driver" and "plan" not in objects.listing, objects.listing
        datasets, by_datasets = gc_plan(collector(server, store, runner, request), repo, url)
        assert read_as_datasets(datasets, runner), datasets.listing
        assert by_datasets == by_objects and set(by_objects["deleted"]) == {h["v1"], h["s1"]}
        assert datasets.listing["objects"] == objects.listing["objects"]
        assert datasets.cutoff_time == objects.cutoff_time and datasets.deleted_bytes == objects.deleted_bytes == 4


def gc_plan(gc: Collector, repo: str, url: str):
    from spark_jobs.core.report import plan_fingerprint  # noqa: PLC0415

    summary, marked = gc._go(repo, "dry-run", min_age=timedelta(0), inventory=url)
    return summary, plan_fingerprint(summary, [o.key for o in marked.deleted])


@pytest.mark.parametrize("runner", RUNNERS)
def test_a_report_that_cannot_be_trusted_deletes_nothing(azure_world, runner, request):
    """Refused on the driver (the manifest, its checksum, its coverage) or where a report file is read (its size,
    its rows): the run fails with the report's reason and deletes nothing, on either runner, the dataset path and
    the object path alike."""
    store, server, lakefs = azure_world
    repo = new_repo(lakefs, store)
    h = history(lakefs, store, repo)
    before = data_keys(store, h["namespace"])
    refused = [
        (write_report(store, endpoint="https://someoneelse.blob.core.windows.net"),
         "is a report of account 'someoneelse'"),
        (write_report(store).replace(AZURITE_ACCOUNT, "someoneelse", 1), "is in account 'someoneelse'"),
        (write_report(store, filters={"prefixMatch": [OTHER]}), f"is a report of \\['{OTHER}'\\]; it does not list"),
        (write_report(store, alter=True), "an incomplete or altered report"),
        (write_report(store, status="Failed"), "status 'Failed'"),
        (write_report(store, status="Pending", complete=False), "status Pending"),
        (write_report(store, complete=False), "the run has not finished writing the report"),
        (write_report(store, schema=[c for c in HEADER if c != "Last-Modified"]), r"lack \['Last-Modified'\]"),
        (f"{BASE}/{REPORTS}/2026/01/01/00-00-00/r/r-manifest.json", "does not exist"),
        (f"{BASE}/{REPORTS}/no-such-rule", "no complete Azure Blob Inventory report of rule 'no-such-rule'"),
        (f"{BASE}/{REPORTS}/2026/r-manifest", "an Azure Blob Inventory report is named by"),
        ("s3://bucket/manifest.json", "an Azure Blob Inventory report is named by"),
    ]
    damaged = ("an incomplete or altered report", "is not a readable parquet report file")
    refused.append((write_report(store, fmt="parquet", flip=True), damaged[1]))  # the right size, unreadable
    refused_on_every_path(server, store, runner, request, repo, refused, damaged)
    assert data_keys(store, h["namespace"]) == before


@pytest.mark.parametrize("runner", RUNNERS)
def test_a_rule_reads_its_newest_complete_report(azure_world, runner, request):
    """--inventory may name the rule (its destination container and name): the newest report whose run finished
    (checksum written) and succeeded."""
    store, server, lakefs = azure_world
    gc = collector(server, store, runner, request)
    repo = new_repo(lakefs, store)
    h = history(lakefs, store, repo)
    rule = f"lake{uuid.uuid4().hex[:6]}"
    now = run_start()
    # the oldest lists another container (it would fail the run); the newer ones failed or are still running
    write_report(store, rule=rule, start=now - timedelta(days=1), filters={"prefixMatch": [OTHER]})
    chosen = write_report(store, rule=rule, start=now, fmt="parquet")
    write_report(store, rule=rule, start=now + timedelta(seconds=1), status="Failed")
    write_report(store, rule=rule, start=now + timedelta(seconds=2), status="Pending", complete=False, alter=True)
    summary, marked = gc._go(repo, "dry-run", min_age=timedelta(0), inventory=f"{BASE}/{REPORTS}/{rule}/")
    assert summary.listing["report"] == chosen and {o.key for o in marked.deleted} == {h["v1"], h["s1"]}
    assert read_as_datasets(summary, runner), summary.listing


def test_the_cli_takes_an_azure_report(azure_world, redis_server):
    """`gc run --inventory https://<account>.blob.core.windows.net/<container>/<rule>`."""
    from click.testing import CliRunner  # noqa: PLC0415

    from tests.services import janitor_env  # noqa: PLC0415
    from workers.cli import main  # noqa: PLC0415

    store, server, lakefs = azure_world
    repo = new_repo(lakefs, store)
    h = history(lakefs, store, repo)
    rule = f"cli{uuid.uuid4().hex[:6]}"
    write_report(store, rule=rule)
    env = janitor_env(server, redis_server.url, **store.janitor_env())

    def cli(*args: str):
        return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)

    bad = cli("gc", "run", f"lakefs://{repo}", "--inventory", "https://example.com/inv/rule")
    assert bad.exit_code == 2 and "Azure Blob Inventory report" in bad.output
    planned = cli("gc", "run", f"lakefs://{repo}", "--min-age", "0s", "--dry-run", "--inventory",
                  f"{BASE}/{REPORTS}/{rule}")
    assert planned.exit_code == 0, planned.output
    assert "would delete 2 objects" in planned.output and f"{REPORTS}/" in planned.output
    ran = cli("gc", "run", f"lakefs://{repo}", "--min-age", "0s", "--json", "--inventory", f"{BASE}/{REPORTS}/{rule}")
    assert ran.exit_code == 0, ran.output
    summary = json.loads(ran.output)
    assert summary["listing"]["kind"] == "inventory" and summary["swept"] == 2
    assert read(lakefs, repo, h["c1"], "tables/t1/a.txt") == 410
