"""The receiver over HTTP (gunicorn, real Redis): ordering, duplicates, authentication, bad bodies, outages."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
import redis
import requests

from tests.services import WEBHOOK_SECRET, ReceiverServer, RedisServer, janitor_env
from workers.idle_clock.store import ClockStore

HEADERS = {"X-Lakefs-Janitor-Secret": WEBHOOK_SECRET}


def event(event_type: str, at: int, branch: str = "feature-x", repo: str = "ordering-repo", **extra) -> dict:
    body = {"event_type": event_type, "event_time": datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z"),
            "action_name": "lakefs-janitor", "hook_id": "h", "repository_id": repo, "branch_id": branch,
            "source_ref": "main", "commit_id": f"c{at}"}
    return {**body, **extra}


def post(receiver, body, headers=HEADERS, **kw) -> requests.Response:
    return requests.post(f"{receiver.url}/webhooks/lakefs", json=body, headers=headers, timeout=5, **kw)


def at(t: int) -> datetime:
    return datetime.fromtimestamp(t, UTC)


@pytest.fixture
def fresh(clock):
    repo = f"ord-{uuid.uuid4().hex[:12]}"
    return repo


def test_duplicates_and_reordering_only_move_forward(receiver, clock, fresh):
    t = 1_700_000_000
    assert post(receiver, event("post-create-branch", t + 10, repo=fresh)).json()["status"] == "recorded"
    assert post(receiver, event("post-create-branch", t + 10, repo=fresh)).json()["status"] == "stale"  # duplicate
    assert post(receiver, event("post-commit", t + 50, repo=fresh)).json()["status"] == "recorded"
    assert post(receiver, event("post-commit", t + 30, repo=fresh)).json()["status"] == "stale"  # late arrival
    assert post(receiver, event("post-merge", t + 50, repo=fresh)).json()["status"] == "stale"
    c = clock.get(fresh, "feature-x")
    assert (c.created_at, c.last_write_at, c.head) == (at(t + 10), at(t + 50), f"c{t + 50}")


def test_late_events_from_before_a_deletion_do_not_resurrect(receiver, clock, fresh):
    t = 1_700_000_000
    post(receiver, event("post-create-branch", t, repo=fresh))
    assert post(receiver, event("post-delete-branch", t + 100, repo=fresh)).status_code == 200
    assert post(receiver, event("post-commit", t + 60, repo=fresh)).json()["status"] == "stale"
    assert post(receiver, event("post-create-branch", t, repo=fresh)).json()["status"] == "stale"
    assert clock.get(fresh, "feature-x").created_at is None
    # a new life after the deletion starts from scratch
    assert post(receiver, event("post-create-branch", t + 200, repo=fresh)).json()["status"] == "recorded"
    assert clock.get(fresh, "feature-x").created_at == at(t + 200)
    # a delayed delete of the previous life does not forget the new one
    assert post(receiver, event("post-delete-branch", t + 100, repo=fresh)).json()["status"] == "stale"
    assert clock.get(fresh, "feature-x").created_at == at(t + 200)


def test_pre_hooks_and_tags_are_accepted_and_ignored(receiver, clock, fresh):
    for event_type in ("pre-commit", "pre-merge", "pre-delete-branch", "post-create-tag"):
        response = post(receiver, event(event_type, 1_700_000_000, repo=fresh))
        assert (response.status_code, response.json()["status"]) == (200, "ignored")
    assert clock.get(fresh, "feature-x").created_at is None and clock.known_branches(fresh) == set()


def test_secret_in_query_parameter_is_accepted(receiver, clock, fresh):
    r = requests.post(f"{receiver.url}/webhooks/lakefs?secret={WEBHOOK_SECRET}",
                      json=event("post-create-branch", 1_700_000_000, repo=fresh), timeout=5)
    assert r.status_code == 200 and clock.get(fresh, "feature-x").created_at == at(1_700_000_000)


@pytest.mark.parametrize("headers", [{}, {"X-Lakefs-Janitor-Secret": "wrong"}, {"X-Lakefs-Janitor-Secret": ""}])
def test_wrong_or_missing_secret_is_401_and_records_nothing(receiver, clock, fresh, headers):
    r = post(receiver, event("post-create-branch", 1_700_000_000, repo=fresh), headers=headers)
    assert r.status_code == 401 and "secret" in r.json()["error"]
    assert clock.get(fresh, "feature-x").created_at is None


@pytest.mark.parametrize(("body", "status", "needle"), [
    (b"{not json", 400, "not JSON"),
    (b"[1, 2]", 422, "expected a JSON object"),
    (b'{"event_type": "post-commit"}', 422, "repository_id"),
    (b'{"event_type": "post-explode", "event_time": "2026-01-01T00:00:00Z", "repository_id": "r"}', 422,
     "unknown event type"),
    (b'{"event_type": "post-commit", "event_time": "yesterday", "repository_id": "r"}', 422, "event_time"),
    (b'{"event_type": "post-commit", "event_time": "2026-01-01T00:00:00", "repository_id": "r"}', 422, "timezone"),
    (b'{"event_type": "post-commit", "event_time": "2026-01-01T00:00:00Z", "repository_id": 7}', 422,
     "repository_id"),
])
def test_garbage_bodies_get_a_json_4xx(receiver, body, status, needle):
    r = requests.post(f"{receiver.url}/webhooks/lakefs", data=body, timeout=5,
                      headers={**HEADERS, "Content-Type": "application/json"})
    assert r.status_code == status, r.text
    assert needle in r.text
    assert "Traceback" not in r.text


def test_oversized_body_is_413(receiver):
    big = event("post-commit", 1_700_000_000, commit_message="x" * (300 * 1024))
    r = post(receiver, big)
    assert r.status_code == 413 and "larger than" in r.json()["error"]


def test_metrics_count_events_by_type_and_outcome(receiver, fresh):
    post(receiver, event("post-commit", 1_700_000_001, repo=fresh))
    post(receiver, event("post-commit", 1_700_000_001, repo=fresh), headers={})
    text = requests.get(f"{receiver.url}/metrics", timeout=5).text
    assert 'lakefs_janitor_webhook_events_total{event_type="post-commit",outcome="recorded"}' in text
    assert 'lakefs_janitor_webhook_events_total{event_type="unknown",outcome="unauthorized"}' in text


def test_redis_stopped_mid_test_gives_503_then_recovers(lakefs_server):
    own_redis = RedisServer().start()
    server = ReceiverServer(janitor_env(lakefs_server, own_redis.url), workers=1).start()
    try:
        body = event("post-create-branch", 1_700_000_000, repo="outage-repo")
        assert post(server, body).status_code == 200
        own_redis.stop()
        down = post(server, event("post-commit", 1_700_000_100, repo="outage-repo"))
        assert down.status_code == 503 and "Redis" in down.json()["error"]
        assert requests.get(f"{server.url}/healthz", timeout=5).status_code == 503
        own_redis.start()
        assert requests.get(f"{server.url}/healthz", timeout=5).status_code == 200
        assert post(server, event("post-commit", 1_700_000_100, repo="outage-repo")).json()["status"] == "recorded"
        store = ClockStore(redis.Redis.from_url(own_redis.url))
        # Redis was started without persistence: only what arrived after the restart is there
        assert store.get("outage-repo", "feature-x").last_write_at == at(1_700_000_100)
    finally:
        server.cleanup()
        own_redis.cleanup()


def test_a_hook_in_the_same_second_still_moves_the_head(receiver, clock, fresh):
    t = 1_700_000_000
    post(receiver, event("post-create-branch", t, repo=fresh))
    clock.record_write(fresh, "feature-x", at(t + 5), source="reconciler")  # the reconciler dated the staged write
    r = post(receiver, event("post-commit", t + 5, repo=fresh, commit_id="the-commit"))
    assert r.json()["status"] == "stale"  # no newer time...
    assert clock.get(fresh, "feature-x").head == "the-commit"  # ...but the new HEAD is remembered
