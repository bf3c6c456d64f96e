"""A run request (``spark_jobs.engine.engine.RunRequest``) on a Spark job's command line: ``to_args`` writes it as
the submitter starts the job, ``from_args`` reads it back in the job, both from the one list ARGUMENTS."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from spark_jobs.engine.engine import MODES, RunRequest


@dataclass(frozen=True)
class Argument:
    """How one field of a RunRequest is written to a job's command line and read back."""

    write: Callable[[Any], str] = str
    read: Callable[[str], Any] = str
    choices: tuple[str, ...] | None = None


def _time(text: str) -> datetime:
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _yes_no(yes: bool) -> str:
    return "true" if yes else "false"


def _boolean(text: str) -> bool:
    if text not in ("true", "false"):
        raise ValueError(text)  # argparse names the argument and the value
    return text == "true"


# The fields that travel as arguments, each with its text form both ways. A RunRequest's other fields are the job's
# own: the runner's name ("spark"), and the partition counts and the lease, which are settings (and the lease a
# secret) and so arrive with the job's configuration (spark_jobs/jobs/config.py).
ARGUMENTS: dict[str, Argument] = {
    "repository_id": Argument(),
    "mode": Argument(choices=MODES),
    "now": Argument(datetime.isoformat, _time),
    "run_id": Argument(),
    "mark_id": Argument(),
    "min_age": Argument(lambda age: str(age.total_seconds()), lambda text: timedelta(seconds=float(text))),
    "max_deletions": Argument(read=int),
    "prefix_depth": Argument(read=int),
    "by_path": Argument(_yes_no, _boolean),
    "metadata_from": Argument(choices=("storage", "lakefs")),
    "cache": Argument(_yes_no, _boolean),
}


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def to_args(request: RunRequest) -> list[str]:
    """``--field-name VALUE`` for each field of ARGUMENTS that is set."""
    args: list[str] = []
    for name, argument in ARGUMENTS.items():
        value = getattr(request, name)
        if value is not None:
            args += [_flag(name), argument.write(value)]
    return args


def from_args(argv: Sequence[str], *, parser: argparse.ArgumentParser, **given: Any) -> RunRequest:
    """The request ``to_args`` wrote, with ``given`` for fields that are not arguments; ``parser`` reports bad
    arguments (a job's turns them into an error event)."""
    for name, argument in ARGUMENTS.items():
        parser.add_argument(_flag(name), dest=name, type=argument.read, choices=argument.choices,
                            required=name == "repository_id")
    parsed = {name: value for name, value in vars(parser.parse_args(list(argv))).items() if value is not None}
    return RunRequest(**parsed, **given)
