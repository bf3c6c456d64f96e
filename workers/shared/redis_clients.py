"""Every Redis connection the service makes, from the settings: our own client (idle clock, history, locks, GC
leases), Celery's broker and result backend, and the start-up check.

A plain ``redis://`` URL or a Redis watched by Sentinel (``sentinel://…`` with ``redis_sentinel_master``): the same
settings give redis-py's ``Sentinel(...).master_for(...)`` for our keys and Celery's ``sentinel://`` URLs with
``master_name`` and ``sentinel_kwargs`` in its transport options, so a failover moves all of them to the new
primary. The URL forms are parsed in ``spark_jobs.engine.runtime.redis_connect``, and writes that count only once replicas
acknowledged them are ``spark_jobs.engine.runtime.redis_ack``'s (the Spark job's lease watch needs both without
``workers``).
"""

from __future__ import annotations

from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from spark_jobs.engine.runtime.redis_connect import connect, is_sentinel, parse_sentinel_url
from workers.shared.settings import Settings, SettingsError

# Celery's Redis caveat: the same visibility timeout in the broker's and the result backend's transport options
# and in ``visibility_timeout`` itself, or a task still running is redelivered to another worker.
MIN_VISIBILITY_SECONDS = 7200


def redis_client(settings: Settings, *, timeout_seconds: float = 10.0, retries: bool = True) -> redis.Redis:
    return connect(settings.redis_client_url(), socket_timeout=timeout_seconds,
                   socket_connect_timeout=min(timeout_seconds, 5), retries=retries)


def visibility_timeout(settings: Settings) -> int:
    """Unacked tasks are redelivered after this: above the longest run, a GC on Spark included."""
    return max(settings.lifecycle_lock_seconds * 2, settings.object_lifecycle_lock_seconds * 2,
               settings.spark.submit_timeout_seconds, MIN_VISIBILITY_SECONDS)


def _transport_options(settings: Settings, url: str) -> dict[str, Any]:
    options: dict[str, Any] = {"visibility_timeout": visibility_timeout(settings)}
    if is_sentinel(url):
        options["master_name"] = settings.redis_sentinel_master
        if settings.redis_sentinel_password:
            options["sentinel_kwargs"] = {"password": settings.redis_sentinel_password.get_secret_value()}
    return options


def celery_options(settings: Settings) -> dict[str, Any]:
    """Celery's broker and result backend settings for the settings' Redis, plain or Sentinel."""
    broker, backend = settings.celery_broker_url, settings.redis_url
    return {
        "broker_url": broker,
        "result_backend": backend,
        "broker_transport_options": _transport_options(settings, broker),
        "result_backend_transport_options": _transport_options(settings, backend),
        "visibility_timeout": visibility_timeout(settings),
        # A worker whose broker connection drops (a failover, a reset) reconnects for as long as it takes,
        # instead of giving up after 100 tries and staying up without consuming (celery #6348).
        "broker_connection_retry": True,
        "broker_connection_retry_on_startup": True,
        "broker_connection_max_retries": None,
        "broker_channel_error_retry": True,
        "redis_backend_health_check_interval": 15,
        # Publishing a task rides over a failover (~2–5 s) instead of failing after Celery's default 0.6 s.
        "task_publish_retry_policy": {"max_retries": 10, "interval_start": 0, "interval_step": 0.5,
                                      "interval_max": 2},
    }


def check_redis(settings: Settings) -> None:
    """At start-up: a wrong password or an unknown master name is a SettingsError naming the setting; Redis
    merely unreachable is not (the receiver answers 503 and recovers when it comes back)."""
    if is_sentinel(settings.redis_url):
        _check_sentinels(settings)
    client = redis_client(settings, timeout_seconds=5)
    try:
        client.ping()
    except (redis.AuthenticationError, redis.AuthenticationWrongNumberOfArgsError) as exc:
        raise SettingsError(f"Redis refused the password in LAKEFS_JANITOR_REDIS_URL: {exc}") from None
    except redis.ResponseError as exc:
        if "NOAUTH" not in str(exc):
            raise
        raise SettingsError(f"Redis needs a password in LAKEFS_JANITOR_REDIS_URL: {exc}") from None
    except redis.ConnectionError:
        pass  # down or failing over: not a setting's fault
    finally:
        client.close()


def _check_sentinels(settings: Settings) -> None:
    where = parse_sentinel_url(settings.redis_client_url())
    answered = 0
    for host, port in where.sentinels:
        sentinel = redis.Redis(host=host, port=port, password=where.sentinel_password, socket_timeout=5,
                               socket_connect_timeout=5, retry=Retry(NoBackoff(), 0))
        try:
            known = sentinel.sentinel_get_master_addr_by_name(where.master_name)
            answered += 1
            if known:
                return
        except redis.AuthenticationError as exc:
            raise SettingsError(f"the Sentinel at {host}:{port} refused LAKEFS_JANITOR_REDIS_SENTINEL_PASSWORD: "
                                f"{exc}") from None
        except redis.ResponseError as exc:
            if "NOAUTH" not in str(exc):
                raise
            raise SettingsError(f"the Sentinel at {host}:{port} needs a password "
                                f"(LAKEFS_JANITOR_REDIS_SENTINEL_PASSWORD): {exc}") from None
        except redis.ConnectionError:
            continue  # that one is down; another may answer
        finally:
            sentinel.close()
    if answered:
        raise SettingsError(f"no Sentinel monitors a master named {where.master_name!r} "
                            "(LAKEFS_JANITOR_REDIS_SENTINEL_MASTER)")
