"""What a job tells its submitter on stdout: one JSON event per line behind a fixed prefix, so the events stay
apart from anything else that prints (Spark logs go to stderr; user code may print)."""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from collections.abc import Callable
from typing import Any, NoReturn

EVENT_PREFIX = "lakefs-janitor-event "


def emit(kind: str, **fields: Any) -> None:
    """Print one event (``progress``, ``result`` or ``error``) and flush, so the submitter sees it now."""
    sys.stdout.write(EVENT_PREFIX + json.dumps({"event": kind, **fields}, default=str, sort_keys=True) + "\n")
    sys.stdout.flush()


def parse_job_event(line: str) -> dict[str, Any] | None:
    """The event on this line, or None for any other output."""
    if not line.startswith(EVENT_PREFIX):
        return None
    try:
        event = json.loads(line[len(EVENT_PREFIX):])
    except ValueError:
        return None
    return event if isinstance(event, dict) and "event" in event else None


class JobArgumentParser(argparse.ArgumentParser):
    """Bad arguments become an ``error`` event the submitter shows, not just a usage line lost in Spark's logs."""

    def error(self, message: str) -> NoReturn:
        emit("error", reason="bad-arguments", message=f"{self.prog}: {message}")
        self.exit(2)


def run_main(main: Callable[[list[str]], int], argv: list[str]) -> int:
    """Run a job's main; an exception becomes an ``error`` event (with its type and message) and exit status 1."""
    try:
        return main(argv)
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001 - reported, then the job fails
        emit("error", reason=getattr(exc, "reason", type(exc).__name__), message=f"{type(exc).__name__}: {exc}")
        traceback.print_exc()
        return 1
