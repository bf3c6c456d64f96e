"""Entry point for gunicorn: ``gunicorn webhook.wsgi:app``."""

from webhook import create_app
from workers.settings import load_settings

app = create_app(load_settings())
