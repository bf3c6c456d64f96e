"""The app's typed services, so views stay short."""

from __future__ import annotations

from flask import current_app

from workers.shared.services import Services


def app_services() -> Services:
    return current_app.extensions["janitor"]
