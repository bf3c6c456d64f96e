"""lakeFS on an S3 blockstore (versitygw on loopback): hooks and the reconciler work the same."""

from __future__ import annotations

import time

import lakefs_sdk
import pytest

from tests.integration.conftest import commit, create_branch, eventually
from tests.services import ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY, WEBHOOK_SECRET, LakeFSServer, VersityGW
from workers.idle_clock.reconcile import reconcile_repository
from workers.shared.lakefs.client import make_lakefs_for


@pytest.fixture(scope="module")
def s3_lakefs():
    s3 = VersityGW(bucket="janitor-data").start()
    server = LakeFSServer({"LAKEFSACTION_JANITOR_SECRET": WEBHOOK_SECRET}, store=s3).start()
    s3.create_bucket("janitor-data")
    client = make_lakefs_for(server.endpoint, ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY)
    yield s3, server, client
    client.close()
    server.cleanup()
    s3.cleanup()


def test_s3_backed_repository_feeds_the_idle_clock(s3_lakefs, clock, receiver):
    from workers.idle_clock.hooks_install import action_file, install  # noqa: PLC0415

    s3, server, lakefs = s3_lakefs
    lakefs.call("create repository", lakefs.repositories.create_repository,
                lakefs_sdk.RepositoryCreation(name="s3-repo", storage_namespace="s3://janitor-data/s3-repo"))
    install(lakefs, "s3-repo", action_file(receiver.url))
    time.sleep(8)  # lakeFS caches a ref's action files for up to 7.5 s: until then no hook fires (README)
    create_branch(lakefs, "s3-repo", "feature-s3")
    eventually(lambda: clock.get("s3-repo", "feature-s3").created_at)
    reconcile_repository(lakefs, clock, "s3-repo", now=clock_now())
    time.sleep(1.1)
    lakefs.upload("s3-repo", "feature-s3", "data/part-0.parquet", data=b"PAR1")
    report = reconcile_repository(lakefs, clock, "s3-repo", now=clock_now())
    assert [(w.branch_id, w.kind) for w in report.writes] == [("feature-s3", "staged")]
    c = commit(lakefs, "s3-repo", "feature-s3", "on s3")
    eventually(lambda: clock.get("s3-repo", "feature-s3").head == c.id)
    keys = [o["Key"] for o in s3.client().list_objects_v2(Bucket="janitor-data", Prefix="s3-repo/")["Contents"]]
    assert any(k.startswith("s3-repo/data/") for k in keys)  # the object really lives in the S3 server


def clock_now():
    from datetime import UTC, datetime  # noqa: PLC0415

    return datetime.now(UTC)
