"""Shim for ``celery -A workers.celery.worker worker|beat``."""

from workers.celery.app import create_celery
from workers.settings import load_settings

app = create_celery(load_settings())
