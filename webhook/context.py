"""Accessors for what create_app put on the app, so views stay short."""

from __future__ import annotations

from typing import Any

from flask import current_app


def janitor(name: str) -> Any:
    return current_app.extensions["janitor"][name]
