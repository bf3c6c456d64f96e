"""Every bad request to the real receiver (gunicorn + Redis) is a JSON 4xx that changes nothing; the secret never
reaches a log line."""

from __future__ import annotations

import json
import socket
from datetime import UTC, datetime, timedelta

import pytest
import requests

from tests.services import WEBHOOK_SECRET

HEADERS = {"X-Lakefs-Janitor-Secret": WEBHOOK_SECRET}


def good(**over) -> dict:
    body = {"event_type": "post-commit", "event_time": datetime.now(UTC).isoformat(), "repository_id": "hard-repo",
            "branch_id": "feature-h", "commit_id": "c1"}
    return {**body, **over}


def raw_request(receiver, data: bytes, *, half_close: bool = False) -> tuple[int, bytes]:
    host, port = receiver.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(data)
        if half_close:  # nothing more will come: the server sees the end of the body early
            sock.shutdown(socket.SHUT_WR)
        chunks = []
        while True:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    response = b"".join(chunks)
    status = int(response.split(b" ", 2)[1]) if response.startswith(b"HTTP/") else 0
    return status, response


def snapshot(redis_client) -> dict:
    return {k: redis_client.dump(k) for k in redis_client.scan_iter("lakefs-janitor:*hard-repo*")}


@pytest.mark.parametrize("body", [
    b"[" * 1000 + b"]" * 1000,
    b'{"a":' * 1000 + b"1" + b"}" * 1000,
])
def test_deeply_nested_json_is_400(receiver, body):
    r = requests.post(f"{receiver.url}/webhooks/lakefs", data=body, headers={**HEADERS,
                      "Content-Type": "application/json"}, timeout=5)
    assert r.status_code == 400 and "nested too deeply" in r.json()["error"]


@pytest.mark.parametrize("chunked", [
    b"zz\r\nabc\r\n0\r\n\r\n",  # chunk size not hex
    b"5\r\nabc\r\n0\r\n\r\n",  # chunk shorter than announced, no terminator where expected
    b"3\r\nabcXX0\r\n\r\n",  # missing CRLF after the chunk
])
def test_broken_chunked_framing_is_400(receiver, redis_client, chunked):
    before = snapshot(redis_client)
    head = (f"POST /webhooks/lakefs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"X-Lakefs-Janitor-Secret: {WEBHOOK_SECRET}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
    status, response = raw_request(receiver, head.encode() + chunked)
    assert 400 <= status < 500, response[:500]
    assert snapshot(redis_client) == before


@pytest.mark.parametrize("missing", [1, 40])
def test_a_body_shorter_than_its_content_length_is_400_and_changes_nothing(receiver, redis_client, missing):
    before = snapshot(redis_client)
    body = json.dumps(good(branch_id="short-body")).encode()
    head = (f"POST /webhooks/lakefs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"X-Lakefs-Janitor-Secret: {WEBHOOK_SECRET}\r\nContent-Length: {len(body) + missing}\r\n"
            f"Connection: close\r\n\r\n")
    status, response = raw_request(receiver, head.encode() + body, half_close=True)
    assert status == 400 and b'"error":"the body ended after' in response, response[-500:]
    assert snapshot(redis_client) == before


def test_non_utf8_charset_and_bytes_are_refused(receiver, redis_client):
    before = snapshot(redis_client)
    body = json.dumps(good()).encode("utf-16")
    r = requests.post(f"{receiver.url}/webhooks/lakefs", data=body, timeout=5,
                      headers={**HEADERS, "Content-Type": "application/json; charset=utf-16"})
    assert r.status_code == 415 and "UTF-8" in r.json()["error"]
    r = requests.post(f"{receiver.url}/webhooks/lakefs", data=b'{"event_type": "\xff"}', timeout=5,
                      headers={**HEADERS, "Content-Type": "application/json"})
    assert r.status_code == 400 and "UTF-8" in r.json()["error"]
    assert snapshot(redis_client) == before


def test_options_is_405_json(receiver):
    r = requests.options(f"{receiver.url}/webhooks/lakefs", headers=HEADERS, timeout=5)
    assert r.status_code == 405 and "error" in r.json()


@pytest.mark.parametrize(("over", "field"), [
    ({"event_time": "0001-01-01T00:00:00+01:00"}, "event_time"),
    ({"event_time": "1960-01-01T00:00:00Z"}, "event_time"),
    ({"event_time": (datetime.now(UTC) + timedelta(days=2)).isoformat()}, "event_time"),
    ({"branch_id": "\ud800"}, "branch_id"),
    ({"repository_id": "hard-repo:branch:main"}, "repository_id"),
    ({"branch_id": "x:y"}, "branch_id"),
])
def test_bad_fields_are_422_and_change_nothing(receiver, redis_client, over, field):
    before = snapshot(redis_client)
    body = json.dumps(good(**over))  # json.dumps escapes the lone surrogate, as a sender would
    r = requests.post(f"{receiver.url}/webhooks/lakefs", data=body, timeout=5,
                      headers={**HEADERS, "Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    assert any(d["field"] == field for d in r.json()["details"])
    assert snapshot(redis_client) == before


def test_query_secret_never_reaches_the_log(receiver):
    url = f"{receiver.url}/webhooks/lakefs?secret={WEBHOOK_SECRET}&x=1"
    assert requests.post(url, json=good(), timeout=5).status_code == 200
    assert requests.post(f"{receiver.url}/webhooks/lakefs?secret={WEBHOOK_SECRET}x", json=good(),
                         timeout=5).status_code == 401
    # and in an error-log line: a request line gunicorn cannot parse
    raw_request(receiver, f"POST /webhooks/lakefs?secret={WEBHOOK_SECRET} HTTP/9.9\r\n\r\n".encode())
    log = receiver.log.read_text()
    assert "secret=[REDACTED]" in log
    assert WEBHOOK_SECRET not in log
