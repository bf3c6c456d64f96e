"""Fixtures the GC's unit tests share."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["UTC", "America/New_York"])
def local_zone(request, monkeypatch):
    """The machine's zone must not matter: inventory reports' times are UTC."""
    import time  # noqa: PLC0415

    monkeypatch.setenv("TZ", request.param)
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()
