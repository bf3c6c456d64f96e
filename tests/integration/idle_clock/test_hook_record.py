"""What one hook changes in Redis, on a real Redis: the idle clock, the repository's summary and GC's commit count,
in one atomic call (one round trip, seen with MONITOR); and duplicated or reordered deliveries end where in-order
delivery does."""

from __future__ import annotations

import os
import random
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import pytest
import redis

from webhook.hook_record import record
from workers.gc.history import GCRuns
from workers.idle_clock.events import LakeFSEvent, parse_event
from workers.idle_clock.store import ClockStore

T = 1_800_000_000
SEED = int(os.environ.get("LAKEFS_JANITOR_HOOK_SEED", random.randrange(1 << 30)))
HISTORIES = int(os.environ.get("LAKEFS_JANITOR_HOOK_HISTORIES", "150"))


def hook(event_type: str, repo: str, branch: str, t: int, commit: str | None = None) -> LakeFSEvent:
    return parse_event({"event_type": event_type, "event_time": datetime.fromtimestamp(t, UTC).isoformat(),
                        "repository_id": repo, "branch_id": branch, "commit_id": commit})


@pytest.fixture
def stores(redis_client: redis.Redis) -> tuple[ClockStore, GCRuns]:
    prefix = f"hook-test-{uuid.uuid4().hex[:8]}"
    return ClockStore(redis_client, prefix), GCRuns(redis_client, prefix)


@contextmanager
def monitor(url: str, client: redis.Redis) -> Iterator[list[tuple[str, str]]]:
    """(who, command name) of every command Redis runs inside the block: who is "client" for ``client``'s own
    connection, "lua" for a script's commands, "other" for anyone else's."""
    me = client.client_info()["addr"]
    seen: list[tuple[str, str]] = []
    started = threading.Event()
    sentinel = f"monitor-end-{uuid.uuid4().hex}"

    def listen() -> None:
        with redis.Redis.from_url(url).monitor() as m:
            started.set()
            while (c := m.next_command())["command"] != f"ECHO {sentinel}":
                who = "lua" if c["client_type"] == "lua" else (
                    "client" if f"{c['client_address']}:{c['client_port']}" == me else "other")
                seen.append((who, c["command"].split(" ", 1)[0].lower()))

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    assert started.wait(10)
    yield seen
    with redis.Redis.from_url(url) as control:
        control.echo(sentinel)
    listener.join(10)
    assert not listener.is_alive()


def test_one_hook_is_one_round_trip_that_changes_clock_summary_and_gc_count(redis_server, redis_client, stores):
    clock, runs = stores
    record(hook("post-commit", "repo-a", "warm", T, "c0"), clock=clock, runs=runs)  # the script is loaded once
    with monitor(redis_server.url, redis_client) as seen:
        assert record(hook("post-commit", "repo-a", "feature", T + 10, "c1"), clock=clock, runs=runs) == "recorded"
    assert [name for who, name in seen if who == "client"] == ["evalsha"]
    assert {name for who, name in seen if who == "lua"} >= {"hset", "sadd"}
    got = clock.get("repo-a", "feature")
    assert (got.last_write_at, got.last_write_src, got.head) == (datetime.fromtimestamp(T + 10, UTC), "webhook", "c1")
    assert clock.activity_many("repo-a", ["feature"])["feature"].last_write_at == got.last_write_at
    assert runs.commits_since_run()["repo-a"] == 2

    with monitor(redis_server.url, redis_client) as seen:
        assert record(hook("post-merge", "repo-a", "feature", T + 5, "m1"), clock=clock, runs=runs) == "stale"
        assert record(hook("post-create-tag", "repo-a", "feature", T + 20, "t1"), clock=clock, runs=runs) \
            == "ignored"
    assert [name for who, name in seen if who == "client"] == ["evalsha"]  # a tag sends nothing at all
    assert runs.commits_since_run()["repo-a"] == 3  # a merge older than the clock is still a merge
    assert clock.get("repo-a", "feature").last_write_at == datetime.fromtimestamp(T + 10, UTC)


def test_only_commits_and_merges_count_for_gc(stores):
    clock, runs = stores
    for event_type, commit in (("post-create-branch", "base"), ("post-commit", "c1"), ("post-commit", "c1"),
                               ("post-merge", "m1"), ("post-revert", "r1"), ("post-cherry-pick", "p1")):
        record(hook(event_type, "repo-b", "main", T, commit), clock=clock, runs=runs)
    record(hook("post-delete-branch", "repo-b", "gone", T), clock=clock, runs=runs)
    assert runs.commits_since_run() == {"repo-b": 2}  # c1 once, m1
    runs.run_started("repo-b")
    assert runs.commits_since_run() == {}


def test_a_script_flush_costs_one_reload_not_an_error(redis_client, stores):
    clock, runs = stores
    redis_client.script_flush()
    assert record(hook("post-commit", "repo-c", "main", T, "c1"), clock=clock, runs=runs) == "recorded"
    assert runs.commits_since_run() == {"repo-c": 1}


def history(rng: random.Random, branch: str) -> list[tuple[str, int, str | None]]:
    """One branch's hooks in the order lakeFS fires them: lives of create, writes, delete; every event at its own
    second (within one second arrival order decides, by design: test_clock_store covers that)."""
    events: list[tuple[str, int, str | None]] = []
    t = T
    for life in range(rng.randint(1, 3)):
        t += rng.randint(1, 50)
        events.append(("post-create-branch", t, f"{branch}-base{life}"))
        for w in range(rng.randint(0, 4)):
            t += rng.randint(1, 50)
            kind = rng.choice(["post-commit", "post-commit", "post-merge", "post-revert", "post-cherry-pick"])
            events.append((kind, t, f"{branch}-l{life}w{w}"))
        if rng.random() < 0.6:
            t += rng.randint(1, 50)
            events.append(("post-delete-branch", t, None))
    return events


def outcome(clock: ClockStore, repo: str, branch: str) -> tuple:
    full = clock.get(repo, branch)
    summary = clock.activity_many(repo, [branch])[branch]
    assert (summary.created_at, summary.last_write_at) == (full.created_at, full.last_write_at), "summary drifted"
    return full.created_at, full.last_activity, full.head


def test_duplicated_and_reordered_deliveries_end_where_in_order_delivery_does(stores):
    """Random histories; each delivered in order to one repository and shuffled, some hooks twice, to another: the
    creation time, last activity (what lifecycle policies read), HEAD, summary and GC count end the same.
    Replay a failure with LAKEFS_JANITOR_HOOK_SEED=<seed>; more histories with LAKEFS_JANITOR_HOOK_HISTORIES."""
    clock, runs = stores
    rng = random.Random(SEED)
    expected: dict[int, int] = {}
    for h in range(HISTORIES):
        branches = [f"b{i}" for i in range(rng.randint(1, 3))]
        events = [(branch, *e) for branch in branches for e in history(rng, branch)]
        delivered = events + rng.sample(events, rng.randint(0, len(events)))  # some twice
        rng.shuffle(delivered)
        in_order, shuffled = f"ordered-{h}", f"shuffled-{h}"
        for branch, event_type, t, commit in sorted(events, key=lambda e: e[2]):
            assert record(hook(event_type, in_order, branch, t, commit), clock=clock, runs=runs) == "recorded"
        for branch, event_type, t, commit in delivered:
            record(hook(event_type, shuffled, branch, t, commit), clock=clock, runs=runs)
        for branch in branches:
            assert outcome(clock, shuffled, branch) == outcome(clock, in_order, branch), \
                f"seed {SEED}, history {h}, branch {branch}: delivered {delivered}"
        expected[h] = len({c for _, event_type, _, c in events if event_type in ("post-commit", "post-merge")})
    counts = runs.commits_since_run()  # one SCAN at the end: the key space grows with the histories
    for h, n in expected.items():
        assert counts.get(f"shuffled-{h}") == counts.get(f"ordered-{h}") == (n or None), f"seed {SEED}, history {h}"
