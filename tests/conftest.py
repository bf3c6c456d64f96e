"""Session-wide: a stopped test run still stops the servers it started.

A CI runner or a person ending a run sends SIGTERM, whose default ends pytest at once: no fixture is torn down, so
the lakeFS, Redis and object-store servers the session started (each in a session of its own, tests/services.py)
live on. As a KeyboardInterrupt, pytest stops the run and tears its fixtures down, and those servers with them."""

from __future__ import annotations

import signal
import threading


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure(config) -> None:
    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        signal.signal(signal.SIGTERM, _interrupted)
