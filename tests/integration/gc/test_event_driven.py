"""Event-driven cleaning: commits reported by hooks are counted per repository; a run starts the count anew; a
per-run cap leaves the rest of the garbage for the next run."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta

import lakefs_sdk
import requests

from tests.integration.conftest import commit, upload
from tests.services import WEBHOOK_SECRET
from workers.gc.run import run
from workers.gc.store import GCRuns
from workers.gc.trigger import due


def hook(receiver, repo, commit_id, event_type="post-commit"):
    body = {"event_type": event_type, "event_time": datetime.now(UTC).isoformat(), "repository_id": repo,
            "branch_id": "main", "commit_id": commit_id}
    r = requests.post(f"{receiver.url}/webhooks/lakefs", json=body, timeout=5,
                      headers={"X-Lakefs-Janitor-Secret": WEBHOOK_SECRET})
    assert r.status_code == 200, r.text


def test_trigger_fires_after_n_commits_and_not_before(receiver, redis_client):
    repo = f"trig-{uuid.uuid4().hex[:8]}"
    runs = GCRuns(redis_client, "lakefs-janitor")
    for i in range(4):
        hook(receiver, repo, f"c{i}")
    hook(receiver, repo, "c3")  # a redelivered hook counts once
    hook(receiver, repo, "t1", event_type="post-create-tag")  # tags are not commits
    assert repo not in due(runs.commits_since_run(), 5)
    hook(receiver, repo, "m1", event_type="post-merge")
    assert repo in due(runs.commits_since_run(), 5)
    runs.run_started(repo)
    assert repo not in due(runs.commits_since_run(), 5)


def test_per_run_cap_leaves_the_rest_for_the_next_run(lakefs, repo, namespace, local_root):
    for i in range(4):
        upload(lakefs, repo, "main", "a.txt", f"v{i}".encode())
        commit(lakefs, repo, "main", f"v{i}", date=int(time.time()) - (30 - i) * 86400)
    lakefs.call("rules", lakefs.repositories.set_gc_rules, repo,
                lakefs_sdk.GarbageCollectionRules(default_retention_days=1, branches=[]))
    # three overwritten versions are garbage; one per run
    results = [run(lakefs, namespace, repo, min_age=timedelta(0), local_root=local_root, max_deletions=1)[0]
               for _ in range(4)]
    assert [(r.swept, r.capped) for r in results] == [(1, 2), (1, 1), (1, 0), (0, 0)]
