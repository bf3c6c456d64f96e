"""What every ``lakefs-janitor`` command shares: the lazily built runtime, error handling, argument types.

A shared module (not under ``workers.cli``, the click group that adds every domain's commands), so that each domain's
``cli`` module uses it without importing the group."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import UTC, datetime
from functools import cached_property, wraps
from typing import Any

import click
import redis
from rich import box
from rich.console import Console
from rich.table import Table

from workers.lakefs.client import LakeFS, LakeFSError
from workers.services import Services
from workers.settings import Settings, SettingsError, load_settings
from workers.uris import URIError, parse_repository_uri

# Piped output is not cut to 80 columns: tables stay readable in logs and CI.
console = Console(width=None if sys.stdout.isatty() else 200)


class Runtime:
    """Settings and clients, built on first use so that `--help` and usage errors need neither."""

    @cached_property
    def settings(self) -> Settings:
        return load_settings()

    @cached_property
    def services(self) -> Services:
        return Services(self.settings)

    @property
    def lakefs(self) -> LakeFS:
        return self.services.lakefs


pass_runtime = click.make_pass_decorator(Runtime, ensure=True)


def table(*headers: str) -> Table:
    """A table that stays readable in an 80-column terminal: compact borders, and cells that wrap instead of
    being cut with an ellipsis."""
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, expand=False)
    for header in headers:
        t.add_column(header, overflow="fold")
    return t


def short_time(value: datetime | None) -> str:
    """UTC to the minute, one format everywhere in tables: 2026-01-31 12:00Z."""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%MZ") if value else "-"


def friendly_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn the errors a person can act on into one clear line and exit 1, never a traceback."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (SettingsError, LakeFSError, URIError) as exc:
            raise click.ClickException(str(exc)) from None
        except redis.RedisError as exc:
            raise click.ClickException(f"Redis is unavailable: {exc}") from None

    return wrapper


def repository_argument(fn: Callable[..., Any]) -> Callable[..., Any]:
    def convert(ctx: click.Context, param: click.Parameter, value: str) -> str:
        try:
            return parse_repository_uri(value).repository_id
        except URIError as exc:
            raise click.BadParameter(str(exc)) from None

    return click.argument("repository", metavar="lakefs://REPOSITORY", callback=convert)(fn)


def parse_now(value: str | None) -> datetime:
    if value is None:
        return datetime.now(UTC)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not an ISO-8601 time (e.g. 2026-01-31T12:00:00Z)",
                                 param_hint="--now") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
