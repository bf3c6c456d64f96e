"""A full run from an S3 Inventory report instead of a listing (issue 28), on versitygw and a real lakeFS: the
report, written in AWS's documented format (manifest.json + gzipped CSV) into another bucket, plans exactly what a
listing plans for the objects it names; objects written after the report are never candidates; rows newer than the
report's time minus min-age are ignored; a report of another bucket or an altered file stops the run. On both
runners the run is planned as datasets (the driver reads the manifest; each data file is read, checked and filtered by
a thread or an executor), and plans what the object path (which reads the report on the driver) plans."""

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
                 config: str | None = None, stamp: str = "2026-11-26T00-00Z", complete: bool = True,
                 flip: bool = False, files: int = 1) -> str:
    """Inventory the store's bucket as S3 would (every object, the namespace's and its neighbours'), into REPORTS,
    in ``files`` data files; the manifest's URL. ``alter``: the last file written one byte longer than the manifest
    says; ``flip``: its last byte changed (its size right, its MD5 not)."""
    s3 = store.client()
    rows = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=store.bucket):
        for o in page.get("Contents", []):
            modified = o["LastModified"].strftime("%Y-%m-%dT%H:%M:%S.000Z")
            rows.append([store.bucket, quote_plus(o["Key"], safe="/"), "", "true", "false", str(o["Size"]),
                         modified, o["ETag"].strip('"')])
    folder = f"inv/{store.bucket}/{config or uuid.uuid4().hex[:8]}/{stamp}"
    listed = []
    for n in range(files):
        data = gzip.compress("".join(",".join(f'"{v}"' for v in row) + "\n" for row in rows[n::files]).encode())
        written = data + b"x" if alter and n == files - 1 else data
        if flip and n == files - 1:
            written = data[:-1] + bytes([data[-1] ^ 0xFF])
        s3.put_object(Bucket=REPORTS, Key=f"{folder}/data/part-{n}.csv.gz", Body=written)
        listed.append({"key": f"{folder}/data/part-{n}.csv.gz", "size": len(data),
                       "MD5checksum": hashlib.md5(data, usedforsecurity=False).hexdigest()})
    manifest = {"sourceBucket": source_bucket or store.bucket, "destinationBucket": f"arn:aws:s3:::{REPORTS}",
                "version": "2016-11-30", "creationTimestamp": str(int((created or time.time()) * 1000)),
                "fileFormat": "CSV", "fileSchema": ", ".join(SCHEMA), "files": listed}
    body = json.dumps(manifest).encode()
    s3.put_object(Bucket=REPORTS, Key=f"{folder}/manifest.json", Body=body)
    if complete:  # S3 writes the checksum last
        s3.put_object(Bucket=REPORTS, Key=f"{folder}/manifest.checksum",
                      Body=hashlib.md5(body, usedforsecurity=False).hexdigest().encode())
    return f"s3://{REPORTS}/{folder}/manifest.json"


def collector(server, store, runner: str, request, *, cache: bool = False) -> Collector:
    """A collector on ``runner``; ``cache=False``: the thread runner plans a repository of any size as datasets
    (with the mark cache, a small one goes the object path, which reads the report on the driver)."""
    chosen, name = runner_of(runner, request)
    return Collector(server.endpoint, {store.kind: store.fsspec_options()}, runner=chosen, runner_name=name,
                     cache=cache)


def refused_on_every_path(server, store, runner: str, request, repo: str, refused: list[tuple[str, str]],
                          damaged: tuple[str, ...]) -> None:
    """Each report of ``refused`` (its URL, what the refusal says) fails the run with that message on the dataset
    path and, on the thread runner, on the object path too (the mark cache on); the reason is ``inventory`` for a
    ``damaged`` report's data file, ``inventory`` or ``storage`` otherwise."""
    paths = [collector(server, store, runner, request)] + \
        ([collector(server, store, runner, request, cache=True)] if runner == "threads" else [])
    for gc in paths:
        for url, says in refused:
            with pytest.raises(GCError, match=says) as err:
                gc._go(repo, "full", min_age=timedelta(0), inventory=url)
            assert err.value.reason in (("inventory",) if says in damaged else ("inventory", "storage")), \
                (url, err.value.reason)


def read_as_datasets(summary, runner: str) -> bool:
    """Whether the run was planned as datasets, its report's data files read where its backend reads units (S3 and
    Azure reports alike)."""
    where = {"spark": ("spark", "executors"), "threads": ("arrow", "threads")}[runner]
    return summary.listing["kind"] == "inventory" and (summary.listing.get("plan"),
                                                       summary.listing.get("read_on")) == where


@pytest.mark.parametrize("runner", RUNNERS)
def test_a_run_from_an_inventory_report(s3_world, runner, request):
    store, server, lakefs = s3_world
    gc = collector(server, store, runner, request)
    repo = new_repo(lakefs, store)
    h = history(lakefs, store, repo)
    namespace = h["namespace"]
    fs = store.filesystem()
    sibling = store.fsspec_path(namespace).rstrip("/") + "2/data/x/not-ours"  # a prefix sharing the name
    fs.pipe_file(sibling, b"not ours")
    _, listed = gc._go(repo, "dry-run", min_age=timedelta(0))
    expected = {o.key for o in listed.deleted}
    assert expected == {h["v1"], h["s1"]}

    url = write_report(store, files=2)
    # written after the report: garbage (overwritten while staged), which S3 has not inventoried yet
    put(lakefs, repo, "late.txt", b"late-1")
    put(lakefs, repo, "late.txt", b"late-2")
    before = data_keys(store, namespace)

    # rows newer than the report's time minus min-age are ignored (everything here was written moments ago)
    young, _ = gc._go(repo, "dry-run", min_age=timedelta(hours=1), inventory=url)
    assert young.num_deleted_objects == 0 and young.too_new >= 2 and read_as_datasets(young, runner), young.listing

    summary, marked = gc._go(repo, "full", min_age=timedelta(0), inventory=url)
    assert summary.success and read_as_datasets(summary, runner) and summary.listing["files"] == 2
    assert {o.key for o in marked.deleted} == expected and summary.swept == 2
    assert data_keys(store, namespace) == before - expected  # the late garbage stays for the next report
    assert read(lakefs, repo, h["c1"], "tables/t1/a.txt") == 410 and read(lakefs, repo, "main", "staged.txt") == b"s2"
    assert read(lakefs, repo, "main", "late.txt") == b"late-2" and fs.cat_file(sibling) == b"not ours"

    # the next run lists what changed since the report's horizon, and so finds the late garbage
    listing_run, _ = gc._go(repo, "full", min_age=timedelta(0))
    assert listing_run.swept == 1 and listing_run.listing["kind"] == "incremental", listing_run.listing
    assert listing_run.listing["since"] == summary.cutoff_time  # the report's time minus min-age


@pytest.mark.parametrize("runner", RUNNERS)
def test_both_paths_plan_the_same_from_a_report(s3_world, runner, request):
    """The dataset plan (data files read by threads or executors) and the object path (the report read on the
    driver: a small repository with the mark cache on the thread runner) plan the same from one report."""
    store, server, lakefs = s3_world
    repo = new_repo(lakefs, store)
    h = history(lakefs, store, repo)
    url = write_report(store, files=3)
    objects, by_objects = gc_plan(collector(server, store, "threads", request, cache=True), repo, url)
    assert objects.listing["read_on"] == "driver" and "plan" not in objects.listing, objects.listing
    datasets, by_datasets = gc_plan(collector(server, store, runner, request), repo, url)
    assert read_as_datasets(datasets, runner), datasets.listing
    assert by_datasets == by_objects and set(by_objects["deleted"]) == {h["v1"], h["s1"]}
    assert datasets.listing["objects"] == objects.listing["objects"] and datasets.cutoff_time == objects.cutoff_time


@pytest.mark.parametrize("runner", RUNNERS)
def test_cleaning_policies_read_the_report_where_the_datasets_do(s3_world, runner, request):
    """Path policies, keep_versions and --by-path on the dataset plan read the report's files where the backend
    reads units (executors, threads); the thread runner's object path (a small lake, the mark cache on) reads it
    whole on the driver. Each plans and names what a listing plans and names under the same policies."""
    import lakefs_sdk  # noqa: PLC0415

    from spark_jobs.core.cleaning import METADATA_KEY  # noqa: PLC0415

    store, server, lakefs = s3_world
    repo = new_repo(lakefs, store)
    h = history(lakefs, store, repo)
    policies = [{"id": "t1", "patterns": ["*"], "paths": ["tables/t1/**"], "keep_commits": 1, "keep_versions": 3,
                 "override_gc_rules": True}]
    lakefs.call("metadata", lakefs.internal.set_repository_metadata, repo, lakefs_sdk.RepositoryMetadataSet(
        metadata={METADATA_KEY: json.dumps({"policies": policies})}))
    gc = collector(server, store, runner, request)
    listed, by_listing = gc._go(repo, "dry-run", min_age=timedelta(0), by_path=True)
    assert listed.listing["kind"] == "full" and listed.listing["plan"] == {"threads": "arrow"}.get(runner, runner)
    assert h["s1"] in {o.key for o in by_listing.deleted} and listed.by_path, listed.by_path
    summary, marked = gc._go(repo, "dry-run", min_age=timedelta(0), inventory=write_report(store), by_path=True)
    assert summary.listing["read_on"] == ("executors" if runner == "spark" else "threads"), summary.listing
    assert {o.key for o in marked.deleted} == {o.key for o in by_listing.deleted}
    assert summary.by_path == listed.by_path
    if runner == "threads":
        cached = collector(server, store, runner, request, cache=True)
        summary, marked = cached._go(repo, "dry-run", min_age=timedelta(0), inventory=write_report(store),
                                     by_path=True)
        assert (summary.listing["kind"], summary.listing["read_on"]) == ("inventory", "driver"), summary.listing
        assert {o.key for o in marked.deleted} == {o.key for o in by_listing.deleted}
        assert summary.by_path == listed.by_path


def gc_plan(gc: Collector, repo: str, url: str):
    from spark_jobs.core.report import plan_fingerprint  # noqa: PLC0415

    summary, marked = gc._go(repo, "dry-run", min_age=timedelta(0), inventory=url)
    return summary, plan_fingerprint(summary, [o.key for o in marked.deleted])


@pytest.mark.parametrize("runner", RUNNERS)
def test_a_report_that_cannot_be_trusted_deletes_nothing(s3_world, runner, request):
    """Refused on the driver (the manifest) or where a data file is read (its size, its MD5): the run fails with
    the report's reason and deletes nothing, on either runner, the dataset path and the object path alike."""
    store, server, lakefs = s3_world
    repo = new_repo(lakefs, store)
    h = history(lakefs, store, repo)
    before = data_keys(store, h["namespace"])
    damaged = "an incomplete or altered report"
    refused = ((write_report(store, source_bucket="someone-else"), "is a report of bucket 'someone-else'"),
               (write_report(store, alter=True, files=2), damaged),  # the wrong size
               (write_report(store, flip=True, files=2), damaged),  # the right size, another MD5
               (f"s3://{REPORTS}/nowhere/manifest.json", "does not exist"),
               ("gs://bucket/manifest.json", "named by its manifest's URL"))
    refused_on_every_path(server, store, runner, request, repo, refused, (damaged,))
    assert data_keys(store, h["namespace"]) == before


@pytest.mark.parametrize("runner", RUNNERS)
def test_a_configuration_folder_reads_its_newest_complete_report(s3_world, runner, request):
    """--inventory may name the inventory configuration's folder: the newest report S3 finished writing there."""
    store, server, lakefs = s3_world
    gc = collector(server, store, runner, request)
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
    assert read_as_datasets(summary, runner), summary.listing
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
