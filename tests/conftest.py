"""Session-wide: a stopped test run still stops the servers it started.

A CI runner or a person ending a run sends SIGTERM, whose default ends pytest at once: no fixture is torn down, so
the lakeFS, Redis and object-store servers the session started (each in a session of its own, tests/services.py)
live on. As a KeyboardInterrupt, pytest stops the run and tears its fixtures down, and those servers with them."""

from __future__ import annotations

from tests.services import stop_on_sigterm


def pytest_configure(config) -> None:
    stop_on_sigterm()
