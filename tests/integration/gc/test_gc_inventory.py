"""A full run from an S3 Inventory report instead of a listing (issue 28), on versitygw and a real lakeFS: the
report, written in AWS's documented format (manifest.json + gzipped CSV) into another bucket, plans exactly what a
listing plans for the objects it names; objects written after the report are never candidates; rows newer than the
report's time minus min-age are ignored; a report of another bucket or an altered file stops the run."""

from __future__ import annotations

import gzip
import hashlib
import json
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from urllib.parse import quote_plus

import pytest

from spark_jobs.engine.runtime.context import GCError
from tests.gc_engine import RUNNERS, Collector, runner_of
from tests.integration.gc.test_gc_stores import data_keys, history, new_repo, put, read, store_world

REPORTS = "inventory-reports"
SCHEMA = ["Bucket", "Key", "VersionId", "IsLatest", "IsDeleteMarker", "Size", "LastModifiedDate", "ETag"]


@pytest.fixture(scope="module")
def s3_world() -> Iterator:
    for world in store_world("s3"):
        world[0].create_bucket(REPORTS)
        yield world


def write_report(store, *, source_bucket: str | None = None, created: float | None = None, alter: bool = False,
                 config: str | None = None, stamp: str = "2026-11-26T00-00Z", complete: bool = True) -> str:
    """Inventory the store's bucket as S3 would (every object, the namespace's and its neighbours'), into REPORTS;
    the manifest's URL."""
    s3 = store.client()
    rows = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=store.bucket):
        for o in page.get("Contents", []):
            modified = o["LastModified"].strftime("%Y-%m-%dT%H:%M:%S.000Z")
            rows.append([store.bucket, quote_plus(o["Key"], safe="/"), "", "true", "false", str(o["Size"]),
                         modified, o["ETag"].strip('"')])
    data = gzip.compress("".join(",".join(f'"{v}"' for v in row) + "\n" for row in rows).encode())
    folder = f"inv/{store.bucket}/{config or uuid.uuid4().hex[:8]}/{stamp}"
    s3.put_object(Bucket=REPORTS, Key=f"{folder}/data/part-0.csv.gz", Body=data + (b"x" if alter else b""))
    manifest = {"sourceBucket": source_bucket or store.bucket, "destinationBucket": f"arn:aws:s3:::{REPORTS}",
                "version": "2016-11-30", "creationTimestamp": str(int((created or time.time()) * 1000)),
                "fileFormat": "CSV", "fileSchema": ", ".join(SCHEMA),
                "files": [{"key": f"{folder}/data/part-0.csv.gz", "size": len(data),
                           "MD5checksum": hashlib.md5(data, usedforsecurity=False).hexdigest()}]}
    body = json.dumps(manifest).encode()
    s3.put_object(Bucket=REPORTS, Key=f"{folder}/manifest.json", Body=body)
    if complete:  # S3 writes the checksum last
        s3.put_object(Bucket=REPORTS, Key=f"{folder}/manifest.checksum",
                      Body=hashlib.md5(body, usedforsecurity=False).hexdigest().encode())
    return f"s3://{REPORTS}/{folder}/manifest.json"


@pytest.mark.parametrize("runner", RUNNERS)
def test_a_run_from_an_inventory_report(s3_world, runner, request):
    store, server, lakefs = s3_world
    gc = Collector(server.endpoint, {"s3": store.fsspec_options()}, runner=runner_of(runner, request)[0])
    repo = new_repo(lakefs, store)
    h = history(lakefs, store, repo)
    namespace = h["namespace"]
    fs = store.filesystem()
    sibling = store.fsspec_path(namespace).rstrip("/") + "2/data/x/not-ours"  # a prefix sharing the name
    fs.pipe_file(sibling, b"not ours")
    _, listed = gc._go(repo, "dry-run", min_age=timedelta(0))
    expected = {o.key for o in listed.deleted}
    assert expected == {h["v1"], h["s1"]}

    url = write_report(store)
    # written after the report: garbage (overwritten while staged), which S3 has not inventoried yet
    put(lakefs, repo, "late.txt", b"late-1")
    put(lakefs, repo, "late.txt", b"late-2")
    before = data_keys(store, namespace)

    # rows newer than the report's time minus min-age are ignored (everything here was written moments ago)
    young, _ = gc._go(repo, "dry-run", min_age=timedelta(hours=1), inventory=url)
    assert young.num_deleted_objects == 0 and young.too_new >= 2 and young.listing["kind"] == "inventory"

    summary, marked = gc._go(repo, "full", min_age=timedelta(0), inventory=url)
    assert summary.success and summary.listing["kind"] == "inventory" and summary.listing["files"] == 1
    assert {o.key for o in marked.deleted} == expected and summary.swept == 2
    assert data_keys(store, namespace) == before - expected  # the late garbage stays for the next report
    assert read(lakefs, repo, h["c1"], "tables/t1/a.txt") == 410 and read(lakefs, repo, "main", "staged.txt") == b"s2"
    assert read(lakefs, repo, "main", "late.txt") == b"late-2" and fs.cat_file(sibling) == b"not ours"

    # the next run lists what changed since the report's horizon, and so finds the late garbage
    listing_run, _ = gc._go(repo, "full", min_age=timedelta(0))
    assert listing_run.swept == 1 and listing_run.listing["kind"] == "incremental", listing_run.listing
    assert listing_run.listing["since"] == summary.cutoff_time  # the report's time minus min-age


def test_a_report_that_cannot_be_trusted_deletes_nothing(s3_world, request):
    store, server, lakefs = s3_world
    gc = Collector(server.endpoint, {"s3": store.fsspec_options()}, runner=runner_of("threads", request)[0])
    repo = new_repo(lakefs, store)
    h = history(lakefs, store, repo)
    before = data_keys(store, h["namespace"])
    for url, says in ((write_report(store, source_bucket="someone-else"), "is a report of bucket 'someone-else'"),
                      (write_report(store, alter=True), "an incomplete or altered report"),
                      (f"s3://{REPORTS}/nowhere/manifest.json", "does not exist"),
                      ("gs://bucket/manifest.json", "named by its manifest's URL")):
        with pytest.raises(GCError, match=says) as err:
            gc._go(repo, "full", min_age=timedelta(0), inventory=url)
        assert err.value.reason in ("inventory", "storage"), err.value.reason
    assert data_keys(store, h["namespace"]) == before


def test_a_configuration_folder_reads_its_newest_complete_report(s3_world, request):
    """--inventory may name the inventory configuration's folder: the newest report S3 finished writing there."""
    store, server, lakefs = s3_world
    gc = Collector(server.endpoint, {"s3": store.fsspec_options()}, runner=runner_of("threads", request)[0])
    repo = new_repo(lakefs, store)
    h = history(lakefs, store, repo)
    config = f"cfg-{uuid.uuid4().hex[:6]}"
    # the oldest names another bucket (it would fail the run), the newest is still being written (no checksum)
    write_report(store, config=config, stamp="2026-11-24T00-00Z", source_bucket="someone-else")
    chosen = write_report(store, config=config, stamp="2026-11-25T00-00Z")
    write_report(store, config=config, stamp="2026-11-26T00-00Z", complete=False, alter=True)
    folder = f"s3://{REPORTS}/inv/{store.bucket}/{config}/"
    summary, marked = gc._go(repo, "dry-run", min_age=timedelta(0), inventory=folder)
    assert summary.listing["report"] == chosen and {o.key for o in marked.deleted} == {h["v1"], h["s1"]}
    with pytest.raises(GCError, match="no complete S3 Inventory report"):
        gc._go(repo, "dry-run", min_age=timedelta(0), inventory=f"s3://{REPORTS}/inv/{store.bucket}/none/")


def test_the_cli_and_the_setting_take_a_report(s3_world, redis_server):
    """`gc run --inventory URL`, and gc.inventory's entry for the repository when no flag is given."""
    from click.testing import CliRunner  # noqa: PLC0415

    from tests.services import janitor_env  # noqa: PLC0415
    from workers.cli import main  # noqa: PLC0415

    store, server, lakefs = s3_world
    repo = new_repo(lakefs, store)
    h = history(lakefs, store, repo)
    url = write_report(store)
    env = janitor_env(server, redis_server.url, **store.janitor_env())

    def cli(*args: str, extra: dict | None = None):
        return CliRunner().invoke(main, list(args), env={**env, **(extra or {})}, catch_exceptions=False)

    bad = cli("gc", "run", f"lakefs://{repo}", "--inventory", "gs://b/manifest.json")
    assert bad.exit_code == 2 and "S3 Inventory report" in bad.output
    refused = cli("gc", "run", f"lakefs://{repo}", "--plan", "x", "--inventory", url)
    assert refused.exit_code == 2 and "--inventory do not apply" in refused.output
    planned = cli("gc", "run", f"lakefs://{repo}", "--min-age", "0s", "--dry-run", "--inventory", url)
    assert planned.exit_code == 0, planned.output
    assert "would delete 2 objects" in planned.output and "from the S3 Inventory report of" in planned.output
    setting = json.dumps({repo: url})
    ran = cli("gc", "run", f"lakefs://{repo}", "--min-age", "0s", "--json", extra={"LAKEFS_JANITOR_GC__INVENTORY": setting})
    assert ran.exit_code == 0, ran.output
    summary = json.loads(ran.output)
    assert summary["listing"]["kind"] == "inventory" and summary["swept"] == 2
    assert read(lakefs, repo, h["c1"], "tables/t1/a.txt") == 410
    wrong = cli("gc", "run", f"lakefs://{repo}", extra={"LAKEFS_JANITOR_GC__INVENTORY": '{"r": "https://x/m"}'})
    assert wrong.exit_code != 0 and "gc.inventory['r']" in wrong.output
