"""Property test of the receiver against generated requests (Flask test client on a real Redis; the real gunicorn
for HTTP framing).

Properties, for any request: never a 5xx; every 4xx is JSON with an ``error``; a rejected request changes nothing
in Redis; an accepted one never moves a branch's clock backwards (only a delete event may forget a branch).

`make test` runs the ``ci`` profile (2,000 requests); ``HYPOTHESIS_PROFILE=deep`` runs 50,000.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from datetime import UTC, datetime, timedelta

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.services import WEBHOOK_SECRET
from webhook import create_app
from workers.idle_clock.store import ClockStore
from workers.shared.settings import Settings

settings.register_profile("ci", max_examples=2000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("deep", max_examples=50_000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")

REPOS = ["fuzz-repo", "fuzz-other"]
BRANCHES = ["main", "feature-a", "b_2"]
EVENT_TYPES = ["post-create-branch", "post-delete-branch", "post-commit", "post-merge", "post-revert",
               "post-cherry-pick", "pre-commit", "post-create-tag", "post-boom"]
NOW = datetime.now(UTC)
SEEN: dict[int, int] = {}  # responses by status, over the whole run

odd_text = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["", ":", "a:b", "fuzz-repo:branch:main", "\ud800", "x\udfffy", "-x", "café", "A" * 300,
                     "../etc", "main\n", "\x00", "😀"]),
)
times = st.one_of(
    st.datetimes(timezones=st.timezones(), allow_imaginary=False).map(lambda d: d.isoformat()),
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)).map(
        lambda d: d.isoformat() + st_offset_cache[hash(d) % len(st_offset_cache)]),
    st.integers(min_value=-10**6, max_value=10**6).map(lambda s: (NOW + timedelta(seconds=s)).isoformat()),
    st.sampled_from(["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "1969-12-31T23:59:59Z",
                     "2026-02-30T00:00:00Z", "now", "", "2026-03-01T10:00:00"]),
    st.integers(), st.floats(allow_nan=True), st.none(), st.lists(st.integers(), max_size=2),
)
st_offset_cache = ["Z", "+00:00", "+14:00", "-12:00", "+23:59", ""]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@st.composite
def events(draw) -> object:
    body = {
        "event_type": draw(st.sampled_from(EVENT_TYPES) | json_values),
        "event_time": draw(times),
        "repository_id": draw(st.sampled_from(REPOS) | odd_text | json_values),
        "branch_id": draw(st.sampled_from(BRANCHES) | odd_text | st.none() | json_values),
        "commit_id": draw(st.text(alphabet="0123456789abcdef", min_size=1, max_size=64) | odd_text | json_values),
        "commit_metadata": draw(st.none() | st.dictionaries(odd_text, odd_text, max_size=3) | json_values),
        "hook_id": draw(odd_text),
    }
    drop = draw(st.sets(st.sampled_from(sorted(body)), max_size=3))
    return {k: v for k, v in body.items() if k not in drop}


good_events = st.fixed_dictionaries({
    "event_type": st.sampled_from(EVENT_TYPES[:6]),
    "event_time": st.integers(min_value=-10**6, max_value=0).map(lambda s: (NOW + timedelta(seconds=s)).isoformat()),
    "repository_id": st.sampled_from(REPOS),
    "branch_id": st.sampled_from(BRANCHES),
    "commit_id": st.text(alphabet="0123456789abcdef", min_size=1, max_size=64),
})


def nested(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


bodies = st.one_of(
    good_events.map(lambda e: json.dumps(e).encode()),
    good_events.map(lambda e: json.dumps(e).encode()),
    good_events.map(lambda e: json.dumps(e).encode()),
    events().map(lambda e: json.dumps(e).encode()),
    events().map(lambda e: json.dumps(e).encode()),
    events().map(lambda e: json.dumps(e).encode()),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=200),
    st.integers(min_value=100, max_value=5000).map(nested),
    st.integers(min_value=100, max_value=5000).map(lambda d: b"[" * d + b"]" * d),
    events().map(lambda e: json.dumps(e).encode("utf-16")),
)
headers = st.fixed_dictionaries({}, optional={
    "Content-Type": st.sampled_from(["application/json"] * 4 + ["application/json; charset=utf-8", "text/plain",
                                     "application/json; charset=latin-1", "application/json; charset=utf-16",
                                     "multipart/form-data; boundary=x", ""]),
})
secrets = st.sampled_from(["header", "header", "header", "query", "wrong", "none"])
methods = st.sampled_from(["POST"] * 20 + ["GET", "PUT", "DELETE", "OPTIONS", "PATCH"])


@pytest.fixture(scope="module")
def app_and_redis(redis_server):
    prefix = f"fuzz-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(redis_server.url)
    s = Settings(lakefs={"endpoint_url": "http://127.0.0.1:9", "access_key_id": "a", "secret_access_key": "b"},
                 redis_url=redis_server.url, key_prefix=prefix, webhook_secret=WEBHOOK_SECRET)
    app = create_app(s, redis_client=client)
    yield app.test_client(), client, prefix
    for key in client.scan_iter(f"{prefix}:*"):
        client.delete(key)
    client.close()


def snapshot(client: redis.Redis, prefix: str) -> dict[bytes, bytes]:
    return {k: client.dump(k) for k in client.scan_iter(f"{prefix}:*")}


def clocks(store: ClockStore) -> dict[tuple[str, str], tuple]:
    out = {}
    for repo in REPOS:
        for branch, activity in store.activity_many(repo, BRANCHES).items():
            out[(repo, branch)] = (activity.created_at, activity.last_write_at)
    return out


@settings(settings.get_profile(PROFILE))
@given(method=methods, body=bodies, extra=headers, secret=secrets)
def test_any_request_is_answered_sanely(app_and_redis, method, body, extra, secret):
    client, r, prefix = app_and_redis
    store = ClockStore(r, prefix)
    hdrs = dict(extra)
    url = "/webhooks/lakefs"
    if secret == "header":
        hdrs["X-Lakefs-Janitor-Secret"] = WEBHOOK_SECRET
    elif secret == "query":
        url += f"?secret={WEBHOOK_SECRET}"
    elif secret == "wrong":
        hdrs["X-Lakefs-Janitor-Secret"] = WEBHOOK_SECRET + "x"
    before, clocks_before = snapshot(r, prefix), clocks(store)
    response = client.open(url, method=method, data=body, headers=hdrs)
    SEEN[response.status_code] = SEEN.get(response.status_code, 0) + 1
    assert response.status_code < 500, (response.status_code, response.data[:300])
    if response.status_code >= 400:
        assert response.is_json and "error" in response.get_json(), response.data[:300]
        assert snapshot(r, prefix) == before
        return
    payload = json.loads(body)
    deleted = payload.get("event_type") == "post-delete-branch"
    for key, (created, written) in clocks(store).items():
        old_created, old_written = clocks_before[key]
        if deleted and key == (payload.get("repository_id"), payload.get("branch_id")):
            continue
        assert (created or datetime.min.replace(tzinfo=UTC)) >= (old_created or datetime.min.replace(tzinfo=UTC))
        assert (written or datetime.min.replace(tzinfo=UTC)) >= (old_written or datetime.min.replace(tzinfo=UTC))


def test_the_generated_requests_reached_every_outcome():
    # A fuzz run that only ever produced 401s would prove nothing: recorded, ignored and each 4xx class occurred.
    print("fuzz outcomes by status:", dict(sorted(SEEN.items())))
    assert {200, 400, 401, 405, 415, 422} <= SEEN.keys(), SEEN


framing = st.one_of(
    st.binary(max_size=40).map(lambda b: b"Transfer-Encoding: chunked\r\n\r\n" + b),
    st.tuples(st.integers(0, 300), st.binary(max_size=60)).map(
        lambda t: b"Content-Length: %d\r\n\r\n" % t[0] + t[1]),
    st.tuples(st.text(alphabet="0123456789abcdefxyz;", max_size=6), st.binary(max_size=20)).map(
        lambda t: b"Transfer-Encoding: chunked\r\n\r\n" + t[0].encode() + b"\r\n" + t[1] + b"\r\n0\r\n\r\n"),
)


@settings(max_examples=60 if PROFILE == "ci" else 1000, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # the client is stateless
@given(tail=framing)
def test_broken_http_framing_through_gunicorn_is_never_5xx(receiver, redis_client, tail):
    before = {k: redis_client.dump(k) for k in redis_client.scan_iter("lakefs-janitor:*fuzz-frame*")}
    host, port = receiver.url.removeprefix("http://").split(":")
    head = (f"POST /webhooks/lakefs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n"
            f"X-Lakefs-Janitor-Secret: {WEBHOOK_SECRET}\r\n").encode()
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(head + tail)
        try:
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        data = b""
        try:
            while chunk := sock.recv(65536):
                data += chunk
        except (TimeoutError, ConnectionResetError):
            pass
    if data.startswith(b"HTTP/"):
        status = int(data.split(b" ", 2)[1])
        assert status < 500, data[:400]
    after = {k: redis_client.dump(k) for k in redis_client.scan_iter("lakefs-janitor:*fuzz-frame*")}
    assert after == before
