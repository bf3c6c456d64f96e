"""Settings tests start from an empty environment: no LAKEFS_JANITOR_* or LAKECTL_* of the machine's, and a HOME
without ~/.lakectl.yaml. Import ``clean_env`` into a test module to apply it there."""

from __future__ import annotations

import os

import pytest

LAKECTL = {"LAKECTL_SERVER_ENDPOINT_URL": "http://127.0.0.1:8000/api/v1",
           "LAKECTL_CREDENTIALS_ACCESS_KEY_ID": "AKIA", "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY": "s"}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for key in list(os.environ):
        if key.startswith(("LAKEFS_JANITOR_", "LAKECTL_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", str(tmp_path))
