"""Event-driven cleaning: commits reported by hooks are counted per repository; a run starts the count anew; a
per-run cap leaves the rest of the garbage for the next run."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta

import lakefs_sdk
import redis
import requests

from tests.integration.conftest import commit, upload
from tests.services import WEBHOOK_SECRET
from workers.gc.history import GCRuns
from workers.gc.trigger import due
from workers.shared.lakefs.errors import LakeFSError


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


def test_per_run_cap_leaves_the_rest_for_the_next_run(lakefs, gc, repo, namespace, local_root):
    for i in range(4):
        upload(lakefs, repo, "main", "a.txt", f"v{i}".encode())
        commit(lakefs, repo, "main", f"v{i}", date=int(time.time()) - (30 - i) * 86400)
    lakefs.call("rules", lakefs.repositories.set_gc_rules, repo,
                lakefs_sdk.GarbageCollectionRules(default_retention_days=1, branches=[]))
    # three overwritten versions are garbage; one per run
    results = [gc.run(repo, min_age=timedelta(0), max_deletions=1)[0] for _ in range(4)]
    assert [(r.swept, r.capped) for r in results] == [(1, 2), (1, 1), (1, 0), (0, 0)]
    assert [r.num_deleted_objects for r in results] == [3, 2, 1, 0]  # each run's plan: what is garbage then


def test_beat_starts_a_clean_after_n_commits_on_a_real_worker(env, receiver, redis_server, lakefs, repo):
    """The whole loop: lakeFS-shaped hooks through the real receiver count commits; a real worker with beat
    embedded checks every second, queues the repository's GC once the count reaches 3 and runs it; the old
    version reads 410 afterwards and the count starts again. Its own broker keeps the session's worker away."""
    from tests.services import CeleryWorker, free_port  # noqa: PLC0415

    upload(lakefs, repo, "main", "a.txt", b"v1")
    first = commit(lakefs, repo, "main", "old", date=int(time.time()) - 30 * 86400)
    upload(lakefs, repo, "main", "a.txt", b"v2")
    commit(lakefs, repo, "main", "newer", date=int(time.time()) - 20 * 86400)
    lakefs.call("rules", lakefs.repositories.set_gc_rules, repo,
                lakefs_sdk.GarbageCollectionRules(default_retention_days=1, branches=[]))
    metrics_port = free_port()
    worker = CeleryWorker({**env, "LAKEFS_JANITOR_BROKER_URL": redis_server.url.rsplit("/", 1)[0] + "/7",
                           "LAKEFS_JANITOR_GC__TRIGGER_COMMITS": "3", "LAKEFS_JANITOR_GC__TRIGGER_CHECK_SECONDS": "1",
                           "LAKEFS_JANITOR_GC__MIN_AGE": "0s",
                           "LAKEFS_JANITOR_WORKER_METRICS_PORT": str(metrics_port)}, beat=True).start()
    try:
        runs = GCRuns(redis.Redis.from_url(redis_server.url), "lakefs-janitor")
        for i in range(2):
            hook(receiver, repo, f"early-{i}")
        time.sleep(3)  # three checks with two commits: nothing starts
        assert runs.history(repo) == [] and read_status(lakefs, repo, first.id) == 200
        hook(receiver, repo, "third", event_type="post-merge")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not runs.history(repo):
            time.sleep(0.5)
        (entry,) = runs.history(repo)
        assert entry["success"] and entry["swept"] == 1, entry
        assert read_status(lakefs, repo, first.id) == 410
        assert repo not in due(runs.commits_since_run(), 3)  # the run started the count anew
        body = requests.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).text
        assert f'lakefs_janitor_gc_triggers_total{{repository="{repo}"}} 1.0' in body
    finally:
        worker.cleanup()


def read_status(lakefs, repo, ref) -> int:
    try:
        lakefs.call("get", lakefs.objects.get_object, repo, ref, "a.txt")
    except LakeFSError as exc:
        return exc.status or 0
    return 200
