"""Committed GC on lakeFS's S3 blockstore (moto on loopback): batches of 1,000 keys, aliases inside the namespace
kept, objects outside it never touched, a re-run on a collected namespace succeeds."""

from __future__ import annotations

import time
from datetime import timedelta

import lakefs_sdk
import pytest

from tests.integration.conftest import commit, upload
from tests.services import ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY, WEBHOOK_SECRET, LakeFSServer, MotoS3Server
from workers.gc.run import run
from workers.gc.storage import S3Namespace
from workers.lakefs.client import make_lakefs_for
from workers.lakefs.errors import LakeFSError

BUCKET = "janitor-gc"
DAY = 86400


@pytest.fixture(scope="module")
def s3_lakefs():
    s3 = MotoS3Server().start()
    server = LakeFSServer({"LAKEFSACTION_JANITOR_SECRET": WEBHOOK_SECRET}, s3=s3).start()
    s3.client().create_bucket(Bucket=BUCKET)
    s3.client().create_bucket(Bucket="imported-data")
    client = make_lakefs_for(server.endpoint, ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY)
    yield s3, client
    client.close()
    server.cleanup()
    s3.cleanup()


def status(lakefs, repo, ref, path):
    try:
        lakefs.call("get", lakefs.objects.get_object, repo, ref, path)
        return 200
    except LakeFSError as exc:
        return exc.status


def test_gc_on_s3(s3_lakefs):
    s3, lakefs = s3_lakefs
    repo = "gc-s3-repo"
    lakefs.call("create", lakefs.repositories.create_repository, lakefs_sdk.RepositoryCreation(
        name=repo, storage_namespace=f"s3://{BUCKET}/{repo}", default_branch="main"))
    client = s3.client()
    upload(lakefs, repo, "main", "a.txt", b"v1")
    first = commit(lakefs, repo, "main", "old", date=int(time.time()) - 30 * DAY)
    upload(lakefs, repo, "main", "a.txt", b"v2")
    live = lakefs.call("stat", lakefs.objects.stat_object, repo, "main", "a.txt").physical_address
    # an alias: a full address inside the namespace, pointing at the live object
    lakefs.call("stage", lakefs.internal.stage_object, repo, "main", "alias.txt", lakefs_sdk.ObjectStageCreation(
        physical_address=live if "://" in live else f"s3://{BUCKET}/{repo}/{live}", checksum="x", size_bytes=2))
    # imported data outside the namespace
    client.put_object(Bucket="imported-data", Key="ext/file.csv", Body=b"a,b")
    lakefs.call("stage", lakefs.internal.stage_object, repo, "main", "ext.csv", lakefs_sdk.ObjectStageCreation(
        physical_address="s3://imported-data/ext/file.csv", checksum="y", size_bytes=3))
    commit(lakefs, repo, "main", "new", date=int(time.time()) - 20 * DAY)
    # 2,500 unlinked uploads (written, never committed): garbage once past the cutoff
    for i in range(2500):
        client.put_object(Bucket=BUCKET, Key=f"{repo}/data/gorphans/{i:05d}", Body=b"o")
    lakefs.call("rules", lakefs.repositories.set_gc_rules, repo,
                lakefs_sdk.GarbageCollectionRules(default_retention_days=1, branches=[]))
    ns = S3Namespace(f"s3://{BUCKET}/{repo}", s3.client)
    summary, _ = run(lakefs, ns, repo, min_age=timedelta(0))
    assert summary.swept == 2501
    assert ns.delete_requests == 3  # 1,000 keys per DeleteObjects request
    assert status(lakefs, repo, first.id, "a.txt") == 410
    assert status(lakefs, repo, "main", "a.txt") == 200 and status(lakefs, repo, "main", "alias.txt") == 200
    assert client.get_object(Bucket="imported-data", Key="ext/file.csv")["Body"].read() == b"a,b"
    keys = [o["Key"] for p in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=f"{repo}/")
            for o in p.get("Contents", [])]
    assert any(k.startswith(f"{repo}/_lakefs/retention/gc/unified/{summary.run_id}/") for k in keys)
    again, _ = run(lakefs, ns, repo, min_age=timedelta(0))  # nothing left to collect: still a success
    assert again.success and again.swept == 0
