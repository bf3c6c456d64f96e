"""Shim for ``celery -A workers.celery.worker worker|beat``."""

from workers.celery.app import create_celery
from workers.shared.redis_clients import check_redis
from workers.shared.settings import SettingsError, load_settings

try:
    check_redis(_settings := load_settings())  # a wrong password stops here, named, not in a retry loop
except SettingsError as exc:
    raise SystemExit(f"lakefs-janitor: {exc}") from None
app = create_celery(_settings)
