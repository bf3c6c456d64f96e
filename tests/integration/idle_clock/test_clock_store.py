"""The idle-clock store on a real Redis: the summary used by lifecycle runs always agrees with the branch records."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from workers.idle_clock.store import ClockStore

T = 1_800_000_000


def at(t: int) -> datetime:
    return datetime.fromtimestamp(t, UTC)


@pytest.fixture
def store(redis_client, request) -> ClockStore:
    return ClockStore(redis_client, f"clock-test-{request.node.name}")


def agree(store: ClockStore, repo: str, branch: str) -> None:
    full = store.get(repo, branch)
    summary = store.activity_many(repo, [branch])[branch]
    assert (summary.created_at, summary.last_write_at, summary.first_seen_at) == \
        (full.created_at, full.last_write_at, full.first_seen_at)


def test_summary_follows_every_update(store):
    store.observe("r", "b", head="h0", fingerprint="", now=at(T - 50))
    agree(store, "r", "b")
    store.record_created("r", "b", at(T), head="h1")
    agree(store, "r", "b")
    store.record_write("r", "b", at(T + 10), head="h2")
    agree(store, "r", "b")
    store.record_write("r", "b", at(T + 5))  # stale: nothing moves
    agree(store, "r", "b")
    assert store.known_branches("r") == {"b"}
    store.record_deleted("r", "b", at(T + 20))
    agree(store, "r", "b")
    assert store.activity_many("r", ["b"])["b"].created_at is None and store.known_branches("r") == set()


def test_a_look_that_started_before_a_deletion_does_not_resurrect(store):
    store.record_created("r", "b", at(T))
    store.record_deleted("r", "b", at(T + 100))
    assert store.observe("r", "b", head="h", fingerprint="", now=at(T + 50)) is False
    assert store.record_write("r", "b", at(T + 60)) is False  # a late write of the old life stays dead
    assert store.get("r", "b").first_seen_at is None and store.known_branches("r") == set()
    assert store.redis.ttl(store._key("r", "b")) > 0  # the tombstone still expires


def test_observe_does_not_overwrite_a_newer_head(store):
    store.record_write("r", "b", at(T + 100), head="newer")
    store.observe("r", "b", head="older", fingerprint="fp", now=at(T + 50))
    got = store.get("r", "b")
    assert (got.head, got.staged_fingerprint) == ("newer", "fp")


def test_delete_and_recreate_in_one_second_delivered_in_order_keep_the_new_life(store):
    at = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
    store.record_created("r", "same-second", at - timedelta(seconds=5))
    assert store.record_deleted("r", "same-second", at)
    assert store.record_created("r", "same-second", at)
    assert store.get("r", "same-second").created_at == at
    assert not store.record_deleted("r", "same-second", at - timedelta(seconds=1))  # a stale delete


def test_hook_head_wins_within_the_second_of_a_look(store):
    look = datetime(2026, 3, 1, 12, 0, 0, 800000, tzinfo=UTC)
    store.observe("r", "h", head="observed", fingerprint="", now=look)
    store.record_write("r", "h", look.replace(microsecond=0), head="hooked")  # event_time has whole seconds
    assert store.get("r", "h").head == "hooked"
    store.record_write("r", "h", look - timedelta(seconds=2), head="older")
    assert store.get("r", "h").head == "hooked"
