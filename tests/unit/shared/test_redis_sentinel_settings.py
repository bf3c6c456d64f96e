"""The Redis settings, plain or Sentinel: parsing, validation naming the setting, Celery's options."""

import pytest

from spark_jobs.engine.runtime.redis_connect import SentinelURL, parse_sentinel_url
from workers.shared.redis_clients import celery_options
from workers.shared.settings import SettingsError, load_settings

LAKEFS = {"lakefs": {"endpoint_url": "http://127.0.0.1:8000", "access_key_id": "a", "secret_access_key": "s"}}
SENTINELS = "sentinel://:redis%40pw@10.0.0.1:26379/2;sentinel://10.0.0.2:26380/2;sentinel://h3"


def test_a_sentinel_url_in_celerys_form_is_parsed():
    where = parse_sentinel_url(SENTINELS)
    assert where == SentinelURL(sentinels=(("10.0.0.1", 26379), ("10.0.0.2", 26380), ("h3", 26379)),
                                master_name=None, db=2, username=None, password="redis@pw")


def test_the_self_contained_form_round_trips_with_master_and_sentinel_password():
    where = SentinelURL((("h1", 1), ("h2", 2)), "mymaster", 3, None, "p w", "s;p&w")
    assert parse_sentinel_url(where.to_url()) == where


@pytest.mark.parametrize(("url", "says"), [
    ("sentinel://", "names no host"),
    ("sentinel://h1:26379;redis://h2:6379", "every ';'-separated part"),
    ("sentinel://h1:x", "h1:x"),
    ("sentinel://h1/abc", "database must be a number"),
    ("sentinel://h1?master_name=a;sentinel://h2", "after the last"),
    ("sentinel://h1?bogus=1", "unknown option"),
])
def test_a_bad_sentinel_url_says_what_is_wrong(url, says):
    with pytest.raises(ValueError, match=says):
        parse_sentinel_url(url)


def test_plain_redis_url_keeps_working_unchanged():
    s = load_settings(**LAKEFS, redis_url="redis://:pw@127.0.0.1:6390/1")
    options = celery_options(s)
    assert s.redis_client_url() == "redis://:pw@127.0.0.1:6390/1"
    assert options["broker_url"] == options["result_backend"] == "redis://:pw@127.0.0.1:6390/1"
    assert "master_name" not in options["broker_transport_options"]


def test_sentinel_settings_give_celery_its_documented_options_and_our_client_one_string():
    s = load_settings(**LAKEFS, redis_url=SENTINELS, redis_sentinel_master="janitor",
                      redis_sentinel_password="sentinel-pw")
    options = celery_options(s)
    assert options["broker_url"] == options["result_backend"] == SENTINELS
    vt = options["visibility_timeout"]
    for key in ("broker_transport_options", "result_backend_transport_options"):
        assert options[key] == {"visibility_timeout": vt, "master_name": "janitor",
                                "sentinel_kwargs": {"password": "sentinel-pw"}}
    where = parse_sentinel_url(s.redis_client_url())
    assert (where.master_name, where.sentinel_password, where.password, where.db) == \
        ("janitor", "sentinel-pw", "redis@pw", 2)


@pytest.mark.parametrize(("overrides", "names"), [
    ({"redis_url": SENTINELS}, "LAKEFS_JANITOR_REDIS_SENTINEL_MASTER"),
    ({"redis_sentinel_master": "janitor"}, "LAKEFS_JANITOR_REDIS_SENTINEL_MASTER"),
    ({"redis_url": "sentinel://h1?master_name=x", "redis_sentinel_master": "x"}, "LAKEFS_JANITOR_REDIS_URL"),
    ({"redis_url": "sentinel://h1:bad"}, "LAKEFS_JANITOR_REDIS_URL"),
    ({"broker_url": "amqp://h1"}, "LAKEFS_JANITOR_BROKER_URL"),
])
def test_a_bad_redis_setting_is_named_at_start_up(overrides, names):
    with pytest.raises(SettingsError, match=names) as raised:
        load_settings(**LAKEFS, **overrides)
    assert "redis@pw" not in str(raised.value)


def test_a_sentinel_broker_beside_a_plain_redis_gets_the_master_name():
    s = load_settings(**LAKEFS, broker_url="sentinel://h1;sentinel://h2", redis_sentinel_master="m")
    options = celery_options(s)
    assert options["broker_transport_options"]["master_name"] == "m"
    assert "master_name" not in options["result_backend_transport_options"]


def test_empty_sentinel_variables_are_unset(monkeypatch):
    # compose passes ${JANITOR_REDIS_SENTINEL_MASTER:-} and the password as "" when they are left out
    monkeypatch.setenv("LAKEFS_JANITOR_REDIS_SENTINEL_MASTER", "")
    monkeypatch.setenv("LAKEFS_JANITOR_REDIS_SENTINEL_PASSWORD", "")
    s = load_settings(**LAKEFS)
    assert s.redis_sentinel_master is None and s.redis_sentinel_password is None
    with pytest.raises(SettingsError, match="LAKEFS_JANITOR_REDIS_SENTINEL_MASTER"):
        load_settings(**LAKEFS, redis_url=SENTINELS)


def test_locks_and_leases_wait_for_the_replicas_a_hook_waits_for():
    """One rule for a hook's 200, a lock and a GC lease: ``redis_durability`` (1 replica with Sentinel, 0 for a
    plain Redis), handed to every store an entry point builds; a lock waits for replicas only when there are some."""
    import redis  # noqa: PLC0415
    from redis.lock import Lock  # noqa: PLC0415

    from spark_jobs.engine.runtime.redis_ack import Acknowledged  # noqa: PLC0415
    from workers.branch_lifecycle.store import LifecycleRecords  # noqa: PLC0415
    from workers.gc.history import GCRuns  # noqa: PLC0415
    from workers.idle_clock.store import ClockStore  # noqa: PLC0415
    from workers.object_lifecycle.store import ObjectLifecycleRecords  # noqa: PLC0415
    from workers.shared.locks import AcknowledgedLock, named_lock  # noqa: PLC0415
    from workers.shared.services import Services  # noqa: PLC0415

    sentinel = load_settings(**LAKEFS, redis_url=SENTINELS, redis_sentinel_master="janitor")
    assert sentinel.redis_durability == Acknowledged(replicas=1, budget_seconds=3.0)
    assert load_settings(**LAKEFS).redis_durability == Acknowledged(replicas=0, budget_seconds=3.0)
    assert load_settings(**LAKEFS, redis_url=SENTINELS, redis_sentinel_master="janitor", redis_replica_acks=0,
                         redis_retry_seconds=5).redis_durability == Acknowledged(replicas=0, budget_seconds=5.0)

    services = Services(sentinel, redis_client=redis.Redis())  # never connects: nothing is sent
    locks = [ClockStore.of(services).reconcile_lock("r", 60), LifecycleRecords.of(services).run_lock("r", 60),
             ObjectLifecycleRecords.of(services).run_lock(None, 60), GCRuns.of(services).edit_lock("r"),
             LifecycleRecords.beside(ClockStore.of(services)).edit_lock("r")]
    assert all(isinstance(lock, AcknowledgedLock) and lock.durability.replicas == 1 for lock in locks)
    assert GCRuns.of(services).lease("r", 60).ref().replica_acks == 1
    for durability in (None, Acknowledged(0, 3.0)):
        assert type(named_lock(redis.Redis(), "p", "n", seconds=5, durability=durability)) is Lock
