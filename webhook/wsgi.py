"""Entry point for gunicorn: ``gunicorn webhook.wsgi:app``."""

import gc

from webhook import create_app
from workers.shared.settings import load_settings

app = create_app(load_settings())
# The app's long-lived objects never become garbage: keep the collector from walking them on every full
# collection (bench/webhook saw 100-250 ms pauses without this).
gc.collect()
gc.freeze()
