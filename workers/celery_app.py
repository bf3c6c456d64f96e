"""Shim for ``celery -A workers.celery_app worker|beat``."""

from workers.celery_factory import create_celery
from workers.settings import load_settings

app = create_celery(load_settings())
