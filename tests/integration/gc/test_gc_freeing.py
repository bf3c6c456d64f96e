"""Bytes really freed, on real servers: a versioned S3 bucket (versitygw with --versioning-dir) × both runners —
a run leaves noncurrent versions and says so (bytes pending, not freed); GC__PURGE_NONCURRENT removes the versions
of exactly the keys the run deleted (the oracle: the bucket's version listing before and after); an unversioned
bucket frees at once; an identity that may not read the bucket's settings gets a verdict that says so, not a
failure; `gc doctor` from the CLI. GCS generations (fake-gcs-server's memory backend) × both runners, and an
Azurite account with blob soft delete on (lakeFS #6807) × both runners.

versitygw v1.8.0 stores versioning (Get/PutBucketVersioning, ListObjectVersions, DeleteObjects with VersionId)
but answers NotImplemented to Get/PutBucketLifecycleConfiguration, and fake-gcs-server stores no lifecycle: the
lifecycle half of the doctor is covered by the unit tests of spark_jobs.core.freeing, and here as "cannot read
the lifecycle rules" (S3) or a versioned bucket without rules (GCS)."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator

import lakefs_sdk
import pytest
import requests

from spark_jobs.engine.stores import StorageConfig, open_namespace
from tests.gc_engine import RUNNERS, Collector, runner_of
from tests.integration.gc.test_gc_stores import history, read, store_world
from tests.integration.gc.test_gc_stores import new_repo as stores_new_repo
from tests.services import (
    ADMIN_ACCESS_KEY,
    ADMIN_SECRET_KEY,
    FakeGCS,
    LakeFSServer,
    VersityGW,
    janitor_env,
    store_binary,
    wait_until,
)
from workers.shared.lakefs.client import LakeFS

VERSIONED, PLAIN = "versioned", "plain"


@pytest.fixture(scope="module")
def world() -> Iterator[tuple[VersityGW, LakeFSServer, LakeFS]]:
    yield from store_world("s3", VersityGW(bucket=VERSIONED, versioning=True))


def buckets(store: VersityGW) -> None:
    """The two buckets, one versioned (both calls are idempotent)."""
    store.create_bucket(VERSIONED)
    store.create_bucket(PLAIN)
    store.client().put_bucket_versioning(Bucket=VERSIONED, VersioningConfiguration={"Status": "Enabled"})


def new_repo(store: VersityGW, lakefs: LakeFS, bucket: str) -> str:
    buckets(store)
    name = f"f-{uuid.uuid4().hex[:10]}"
    lakefs.call("create repository", lakefs.repositories.create_repository,
                lakefs_sdk.RepositoryCreation(name=name, storage_namespace=f"s3://{bucket}/{name}",
                                              default_branch="main"))
    lakefs.call("rules", lakefs.repositories.set_gc_rules, name,
                lakefs_sdk.GarbageCollectionRules(default_retention_days=1, branches=[]))
    return name


def versions(store: VersityGW, bucket: str) -> set[tuple[str, str, bool]]:
    """Every version and delete marker in the bucket: (key, version id, is a delete marker)."""
    found = set()
    for page in store.client().get_paginator("list_object_versions").paginate(Bucket=bucket):
        found |= {(v["Key"], v["VersionId"], False) for v in page.get("Versions", [])}
        found |= {(m["Key"], m["VersionId"], True) for m in page.get("DeleteMarkers", [])}
    return found


def setup(store: VersityGW, lakefs: LakeFS, bucket: str) -> tuple[str, dict, str]:
    """A repository with two garbage objects (v1, s1), a kept object given a noncurrent version of its own, and
    an object outside the namespace with two versions."""
    repo = new_repo(store, lakefs, bucket)
    store.bucket = bucket
    h = history(lakefs, store, repo)
    kept = lakefs.call("stat", lakefs.objects.stat_object, repo, "main", "keep.txt").physical_address
    kept_key = kept.split(f"s3://{bucket}/", 1)[1]
    s3 = store.client()
    s3.put_object(Bucket=bucket, Key=kept_key, Body=b"keep")  # its first version is now noncurrent
    for body in (b"outside 1", b"outside 2"):
        s3.put_object(Bucket=bucket, Key=f"{repo}-outside/x.bin", Body=body)
    return repo, h, kept_key


def collector(world, runner: str, request) -> Collector:
    store, server, _ = world
    chosen, name = runner_of(runner, request)
    return Collector(server.endpoint, {"s3": store.fsspec_options()}, runner=chosen, runner_name=name)


@pytest.mark.parametrize("runner", RUNNERS)
def test_a_run_on_a_versioned_bucket_leaves_noncurrent_versions_and_says_so(world, runner, request):
    store, _, lakefs = world
    repo, h, kept_key = setup(store, lakefs, VERSIONED)
    before = versions(store, VERSIONED)
    summary, _ = collector(world, runner, request).run(repo)
    assert summary.success and summary.swept == 2
    assert summary.freeing["state"] == "unknown" and summary.freeing["versioned"] is True
    assert "s3:GetLifecycleConfiguration" in summary.freeing["notes"][0]
    assert json.loads(summary.freeing["fix"])["Rules"][0]["Filter"] == {"Prefix": f"{repo}/"}
    assert (summary.bytes_freed, summary.bytes_pending, summary.pending_until) == (0, 4, None)
    after = versions(store, VERSIONED)
    # nothing lost a version; each deleted key got a delete marker
    assert before <= after
    assert {k for k, _, marker in after - before if marker} == {f"{repo}/{h['v1']}", f"{repo}/{h['s1']}"}
    assert read(lakefs, repo, h["c1"], "tables/t1/a.txt") == 410


@pytest.mark.parametrize("runner", RUNNERS)
def test_the_purge_removes_the_versions_of_exactly_the_deleted_keys(world, runner, request):
    store, _, lakefs = world
    repo, h, kept_key = setup(store, lakefs, VERSIONED)
    deleted = {f"{repo}/{h['v1']}", f"{repo}/{h['s1']}"}
    before = versions(store, VERSIONED)
    assert len({v for v in before if v[0] == kept_key}) == 2
    summary, _ = collector(world, runner, request).run(repo, purge_noncurrent=True)
    assert summary.success and summary.swept == 2
    assert (summary.purged_versions, summary.purged_bytes, summary.purge_failed) == (2, 4, [])
    assert (summary.bytes_freed, summary.bytes_pending) == (4, 0)
    after = versions(store, VERSIONED)
    # the oracle: every version of every other key (a kept key's noncurrent one, the outside object's) is there;
    # what is new is the run's own record under _lakefs/
    assert {v for v in before if v[0] not in deleted} <= after
    assert all(v[0].startswith(f"{repo}/_lakefs/") for v in after - before)
    assert not {v for v in after if v[0] in deleted}
    assert read(lakefs, repo, "main", "keep.txt") == b"keep"
    assert read(lakefs, repo, "main", "staged.txt") == b"s2"


def test_an_unversioned_bucket_frees_at_once(world, request):
    store, _, lakefs = world
    repo, _, _ = setup(store, lakefs, PLAIN)
    summary, _ = collector(world, "threads", request).run(repo)
    assert summary.freeing["state"] == "freed" and summary.freeing["versioned"] is False
    assert (summary.bytes_freed, summary.bytes_pending) == (4, 0)


def test_an_identity_that_may_not_read_the_settings_gets_a_verdict(world):
    store = world[0]
    subprocess.run([store_binary("versitygw", "VERSITYGW_BIN"), "admin", "--access", store.access_key, "--secret",
                    store.secret_key, "--endpoint-url", store.endpoint, "create-user", "--access", "gc-reader",
                    "--secret", "gc-reader-secret", "--role", "user"], check=True, capture_output=True, timeout=30)
    options = {**store.fsspec_options(), "key": "gc-reader", "secret": "gc-reader-secret"}
    ns = open_namespace(StorageConfig(f"s3://{VERSIONED}/any", None, json.dumps({"s3": options})))
    verdict = ns.freeing()
    assert verdict.state == "unknown" and "needs s3:GetBucketVersioning" in verdict.message, verdict
    assert "AccessDenied" in verdict.message


def test_gc_doctor_from_the_cli(world, redis_server):
    from click.testing import CliRunner  # noqa: PLC0415

    from workers.cli import main  # noqa: PLC0415

    store, server, lakefs = world
    env = janitor_env(server, redis_server.url, **store.janitor_env())
    versioned, plain = new_repo(store, lakefs, VERSIONED), new_repo(store, lakefs, PLAIN)
    result = CliRunner().invoke(main, ["gc", "doctor", f"lakefs://{versioned}"], env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "versioning is enabled" in result.output and "needs s3:GetLifecycleConfiguration" in result.output
    assert "rule to add" in result.output and f'"Prefix": "{versioned}/"' in result.output
    result = CliRunner().invoke(main, ["gc", "doctor", f"lakefs://{plain}", "--json"], env=env,
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["state"] == "freed"


@pytest.fixture(scope="module")
def azure_world():
    yield from store_world("azure")


@pytest.mark.parametrize("runner", RUNNERS)
def test_a_run_on_an_azure_account_with_soft_delete(azure_world, runner, request):
    """lakeFS #6807: lakeFS's own GC cannot run on an account with blob soft delete. Ours runs, and says the bytes
    stay billed for the retention days. Azurite stores the setting but does not implement soft delete (the blob is
    gone at once): this proves the run and the verdict, not what a real account bills."""
    from azure.storage.blob import BlobServiceClient, RetentionPolicy  # noqa: PLC0415

    store, server, lakefs = azure_world
    service = BlobServiceClient.from_connection_string(store.connection_string())
    service.set_service_properties(delete_retention_policy=RetentionPolicy(enabled=True, days=3))
    repo = stores_new_repo(lakefs, store)
    h = history(lakefs, store, repo)
    chosen, name = runner_of(runner, request)
    gc = Collector(server.endpoint, {"azure": store.fsspec_options()}, runner=chosen, runner_name=name)
    summary, _ = gc.run(repo)
    assert summary.success and summary.swept == 2
    assert (summary.freeing["state"], summary.freeing["days"], summary.freeing["rule"]) == \
        ("delayed", 3, "blob soft delete")
    assert (summary.bytes_freed, summary.bytes_pending) == (0, 4) and summary.pending_until
    assert read(lakefs, repo, h["c1"], "tables/t1/a.txt") == 410
    assert read(lakefs, repo, "main", "keep.txt") == b"keep"
    service.set_service_properties(delete_retention_policy=RetentionPolicy(enabled=False))
    assert open_namespace(StorageConfig(h["namespace"], None, json.dumps({"azure": store.fsspec_options()}))) \
        .freeing().state == "freed"


class VersionedGCS(FakeGCS):
    """fake-gcs-server on its memory backend, every bucket versioned: its filesystem backend refuses versioning
    ("not implemented"). The memory backend stores no lifecycle and no soft-delete policy."""

    def start(self) -> VersionedGCS:
        self._spawn([store_binary("fake-gcs-server", "FAKE_GCS_SERVER_BIN"), "-scheme", "http", "-host", "127.0.0.1",
                     "-port", str(self.port), "-backend", "memory", "-public-host", f"127.0.0.1:{self.port}",
                     "-external-url", self.endpoint, "-log-level", "warn"])
        wait_until(lambda: requests.get(f"{self.endpoint}/storage/v1/b", timeout=1).ok, 30, "fake-gcs-server",
                   self.proc, self.log)
        return self

    def create_bucket(self, name: str) -> None:
        if name not in self._buckets:
            requests.post(f"{self.endpoint}/storage/v1/b", params={"project": self.project}, timeout=10,
                          json={"name": name, "versioning": {"enabled": True}}).raise_for_status()
            self._buckets.add(name)


@pytest.fixture(scope="module")
def gcs_world():
    yield from store_world("gcs", VersionedGCS(bucket="versioned"))


@pytest.mark.parametrize("runner", RUNNERS)
def test_a_run_on_a_versioned_gcs_bucket_purges_exactly_its_generations(gcs_world, runner, request):
    store, server, lakefs = gcs_world
    repo = stores_new_repo(lakefs, store)
    h = history(lakefs, store, repo)
    deleted = {f"{repo}/{h['v1']}", f"{repo}/{h['s1']}"}
    before = generations(store.endpoint, store.bucket)
    chosen, name = runner_of(runner, request)
    gc = Collector(server.endpoint, {"gcs": store.fsspec_options()}, runner=chosen, runner_name=name)
    summary, _ = gc.run(repo, purge_noncurrent=True)
    assert summary.success and summary.swept == 2
    assert summary.freeing["state"] == "never" and summary.freeing["versioned"] is True
    assert (summary.purged_versions, summary.purged_bytes, summary.bytes_freed, summary.bytes_pending) == (2, 4, 4, 0)
    after = generations(store.endpoint, store.bucket)
    assert {g for g in before if g[0] not in deleted} <= after and not {g for g in after if g[0] in deleted}
    assert all(g[0].startswith(f"{repo}/_lakefs/") for g in after - before)
    assert read(lakefs, repo, h["c1"], "tables/t1/a.txt") == 410
    assert read(lakefs, repo, "main", "keep.txt") == b"keep"


def generations(endpoint: str, bucket: str) -> set[tuple[str, str]]:
    items = requests.get(f"{endpoint}/storage/v1/b/{bucket}/o", params={"versions": "true"}, timeout=10).json()
    return {(i["name"], i["generation"]) for i in items.get("items", [])}


def test_gcs_generations_doctor_and_purge(gcs_world):
    store = gcs_world[0]
    endpoint, bucket = store.endpoint, f"v{uuid.uuid4().hex[:8]}"
    store.create_bucket(bucket)

    def put(name: str, body: bytes) -> None:
        requests.post(f"{endpoint}/upload/storage/v1/b/{bucket}/o", params={"uploadType": "media", "name": name},
                      data=body, timeout=10).raise_for_status()

    for name in ("repo/data/s/a", "repo/data/s/a", "repo/data/s/kept", "repo/data/s/kept", "repo/data/s/b",
                 "repo/data/s/a-longer", "outside/x"):
        put(name, b"12345")
    ns = open_namespace(StorageConfig(f"gs://{bucket}/repo", None, json.dumps(
        {"gcs": {"endpoint_url": endpoint, "token": "anon", "project": "p"}})))
    verdict = ns.freeing()
    # fake-gcs-server keeps no lifecycle: a versioned bucket without rules
    assert (verdict.state, verdict.versioned) == ("never", True)
    assert json.loads(verdict.fix)["lifecycle"]["rule"][0]["condition"]["matchesPrefix"] == ["repo/"]
    assert ns.delete(["data/s/a", "data/s/b"]).deleted == 2
    put("repo/data/s/b", b"again")  # written again after the deletion: not garbage any more
    before = generations(endpoint, bucket)
    purged = ns.purge_noncurrent(["data/s/a", "data/s/b"])
    assert (purged.deleted, purged.freed_bytes, purged.failed) == (2, 10, [])
    # the oracle: exactly a's generations are gone; the kept key's noncurrent one, b's, a-longer's stay
    assert generations(endpoint, bucket) == {g for g in before if g[0] != "repo/data/s/a"}


def test_the_purge_setting_through_a_production_run(world, redis_client):
    """GC__PURGE_NONCURRENT as an operator sets it, through the wrapper of production runs (the run's lease held
    and checked before each purge), with the metrics of the split."""
    from prometheus_client import CollectorRegistry  # noqa: PLC0415

    from workers.gc.history import GCRuns  # noqa: PLC0415
    from workers.gc.run import GCRequest, execute  # noqa: PLC0415
    from workers.shared.metrics import Metrics  # noqa: PLC0415
    from workers.shared.settings import GCSettings, LakeFSConnection  # noqa: PLC0415

    store, server, lakefs = world
    repo, h, _ = setup(store, lakefs, VERSIONED)
    deleted = {f"{repo}/{h['v1']}", f"{repo}/{h['s1']}"}
    prefix = "LAKEFS_JANITOR_GC__"
    fields = {k[len(prefix):].lower(): v for k, v in store.janitor_env().items() if k.startswith(prefix)}
    gc = GCSettings(min_age="0s", runner="threads", purge_noncurrent=True, **fields)
    connection = LakeFSConnection(endpoint_url=server.endpoint, access_key_id=ADMIN_ACCESS_KEY,
                                  secret_access_key=ADMIN_SECRET_KEY)
    registry = CollectorRegistry()
    summary = execute(gc, GCRequest(repo), connection=connection, metrics=Metrics(registry),
                      runs=GCRuns(redis_client, f"f-{uuid.uuid4().hex[:6]}"))
    assert summary.success and (summary.purged_versions, summary.bytes_freed, summary.bytes_pending) == (2, 4, 0)
    assert not {v for v in versions(store, VERSIONED) if v[0] in deleted}
    assert registry.get_sample_value("lakefs_janitor_gc_bytes_freed_total", {"repository": repo}) == 4
    assert registry.get_sample_value("lakefs_janitor_gc_bytes_pending_total", {"repository": repo}) == 0
