"""What one GC run is asked to do (``RunRequest``), and how it travels to a Spark job: ``to_args`` writes it on the
job's command line, ``from_args`` reads it back there, both from the one list ARGUMENTS."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from spark_jobs.engine.runtime.range_cache import RangeCacheSettings
from spark_jobs.engine.sweep.lease_watch import LeaseRef

MODES = ("full", "mark", "sweep", "dry-run")
LISTINGS = ("auto", "full")


@dataclass(frozen=True)
class RunRequest:
    repository_id: str
    mode: str = "full"
    now: datetime | None = None
    run_id: str | None = None
    mark_id: str | None = None  # the plan a sweep executes
    min_age: timedelta | None = None  # None: lakeFS's own grace period
    max_deletions: int | None = None
    prefix_depth: int = 2  # folders of the plan's by-prefix breakdown
    by_path: bool = False  # name what the plan deletes by the path it had in lakeFS (reads the expired history)
    runner: str = "threads"  # the runner's name (threads | spark), for the record
    metadata_from: str = "storage"
    range_partitions: int = 50
    address_partitions: int = 200
    # a daily run's touched ranges (dead and new) compared on the driver, more by executors (None: lean_mark's own)
    driver_ranges: int | None = None
    lease: LeaseRef | None = None  # checked before each batch of deletions (None: no lease, e.g. a benchmark)
    range_cache: RangeCacheSettings | None = None  # copies of the ranges a daily run compares (None: none kept)
    cache: bool = True  # the mark cache (engine/reach/mark_cache.py); False: every range and metarange read
    inventory: str | None = None  # an S3 Inventory report's manifest.json, read instead of listing the namespace
    # "auto": list only what changed since the previous run when its state is trusted and a full listing is not
    # due (engine/listing/incremental.py); "full": list the whole namespace (or read the inventory)
    listing: str = "auto"
    full_listing_every: timedelta = timedelta(days=7)  # how old the last full listing may be before another
    # after deleting, remove the noncurrent versions of exactly the keys deleted (S3 versions, GCS generations)
    purge_noncurrent: bool = False

    @property
    def dry_run(self) -> bool:
        return self.mode == "dry-run"

    def to_args(self) -> list[str]:
        """The request on a Spark job's command line: ``--field-name VALUE`` for each field of ARGUMENTS that is
        set."""
        args: list[str] = []
        for name, argument in ARGUMENTS.items():
            value = getattr(self, name)
            if value is not None:
                args += [_flag(name), argument.write(value)]
        return args

    @classmethod
    def from_args(cls, argv: Sequence[str], *, parser: argparse.ArgumentParser, **given: Any) -> RunRequest:
        """The request ``to_args`` wrote, with ``given`` for the fields that are not arguments; ``parser`` reports
        bad arguments (a job's turns them into an error event)."""
        for name, argument in ARGUMENTS.items():
            parser.add_argument(_flag(name), dest=name, type=argument.read, choices=argument.choices,
                                required=name == "repository_id")
        parsed = {name: value for name, value in vars(parser.parse_args(list(argv))).items() if value is not None}
        return cls(**parsed, **given)


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


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


# The fields of a RunRequest that travel to a Spark job (spark_jobs/jobs/gc.py) as arguments, each with its text
# form both ways. The others are the job's own: the runner's name ("spark"), and the partition counts, the daily run's
# driver_ranges, the range cache and the lease, which are settings (the lease a secret too) and so arrive with the
# job's configuration (jobs/config.py).
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
    "inventory": Argument(),
    "listing": Argument(choices=LISTINGS),
    "full_listing_every": Argument(lambda age: str(age.total_seconds()), lambda text: timedelta(seconds=float(text))),
    "purge_noncurrent": Argument(_yes_no, _boolean),
}
