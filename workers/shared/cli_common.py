"""What every ``lakefs-janitor`` command shares: the lazily built runtime (``pass_runtime``, with the error handling),
argument types, tables, the file of a policy document (``-f/--file``), and the commands of a policy document stored
on the repository.

A shared module (not under ``workers.cli``, the click group that adds every domain's commands), so that each domain's
``cli`` module uses it without importing the group."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from functools import cached_property, wraps
from pathlib import Path
from typing import Any

import click
import redis
import yaml
from rich import box
from rich.console import Console
from rich.table import Table

from spark_jobs.engine.runtime.redis_ack import NotReplicated
from workers.shared.lakefs.client import LakeFS, LakeFSError
from workers.shared.lakefs.documents import PolicyDocument, StaleETag, Stored
from workers.shared.locks import EditLocks
from workers.shared.services import Services
from workers.shared.settings import Settings, SettingsError, load_settings
from workers.shared.uris import URIError, parse_repository_uri

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


_pass_runtime = click.make_pass_decorator(Runtime, ensure=True)


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
        except NotReplicated as exc:  # a lock or lease not confirmed: its message says what happened
            raise click.ClickException(str(exc)) from None
        except redis.RedisError as exc:
            raise click.ClickException(f"Redis is unavailable: {exc}") from None

    return wrapper


def pass_runtime(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A command that takes the ``Runtime`` as its first argument, with ``friendly_errors``: what every command that
    talks to lakeFS or Redis needs."""
    return _pass_runtime(friendly_errors(fn))


def repository_argument(fn: Callable[..., Any]) -> Callable[..., Any]:
    def convert(ctx: click.Context, param: click.Parameter, value: str) -> str:
        try:
            return parse_repository_uri(value).repository_id
        except URIError as exc:
            raise click.BadParameter(str(exc)) from None

    return click.argument("repository", metavar="lakefs://REPOSITORY", callback=convert)(fn)


def etag_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`--force` and `--if-match ETAG` of a command that writes a stored policy document."""
    fn = click.option("--if-match", default=None, help="Write only if the stored policies still have this ETag.")(fn)
    return click.option("--force", is_flag=True,
                        help="Skip the ETag precondition (overwrite concurrent edits).")(fn)


def parse_now(value: str | None) -> datetime:
    if value is None:
        return datetime.now(UTC)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not an ISO-8601 time (e.g. 2026-01-31T12:00:00Z)",
                                 param_hint="--now") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def document_file_option(help_text: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``-f/--file PATH`` of a command that reads a policy document ('-' for standard input); the command gets
    ``path``, and reads it with ``read_document_file``."""
    return click.option("-f", "--file", "path", required=True, type=click.Path(dir_okay=False, allow_dash=True),
                        help=help_text)


def read_document_file(path: str) -> str:
    """The text of ``--file`` (standard input for '-'); a file that cannot be read is a one-line error."""
    try:
        with click.open_file(path) as file:  # '-': click's standard input, left open
            return file.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise click.ClickException(f"cannot read {path}: {exc}") from None


def load_yaml_file(path: Path, param_hint: str) -> Any:
    """A JSON or YAML file's document; a file that cannot be read or parsed is a usage error naming the option."""
    try:
        return yaml.safe_load(path.read_text())
    except OSError as exc:
        raise click.BadParameter(f"cannot read {path}: {exc.strerror}", param_hint=param_hint) from None
    except yaml.YAMLError as exc:
        raise click.BadParameter(f"{path} is not JSON or YAML: {exc}", param_hint=param_hint) from None


class DocumentCommands:
    """`get`, `clear` and the write of `set` for a policy document stored on the repository
    (``workers.shared.lakefs.documents.PolicyDocument``), the same for every domain that has one: ``locks(services)`` is
    the domain's store whose ``edit_lock`` its other writers hold too, ``cleared`` what `clear` says
    (``{repository}`` filled in)."""

    def __init__(self, document: PolicyDocument, *, locks: Callable[[Services], EditLocks], cleared: str):
        self.document = document
        self.locks = locks
        self.cleared = cleared

    def lock(self, rt: Runtime, repository: str) -> AbstractContextManager:
        return self.locks(rt.services).edit_lock(repository)

    def echo(self, stored: Stored) -> None:
        click.echo(json.dumps(self.document.body(stored.policies), indent=2))

    def write(self, rt: Runtime, repository: str, policies: Sequence, *, force: bool, if_match: str | None) -> None:
        """Store the policies and print what was stored. Like lakectl: the ETag just read is the precondition,
        unless --force (none) or --if-match (that one)."""
        precondition = None if force else (if_match or self.document.get(rt.lakefs, repository).etag)
        try:
            stored = self.document.set(rt.lakefs, repository, policies, if_match=precondition,
                                       lock=self.lock(rt, repository))
        except StaleETag as exc:
            raise click.ClickException(f"{exc} (--force to overwrite)") from None
        self.echo(stored)

    def add_get_and_clear(self, group: click.Group, *, get_help: str | None = None,
                          clear_help: str | None = None) -> None:
        @group.command("get", help=get_help)
        @repository_argument
        @click.option("--etag", "show_etag", is_flag=True, help="Also print the ETag (to stderr).")
        @pass_runtime
        def get(rt: Runtime, repository: str, show_etag: bool) -> None:
            stored = self.document.get(rt.lakefs, repository)
            self.echo(stored)
            if show_etag:
                click.echo(f"ETag: {stored.etag}", err=True)

        @group.command("clear", help=clear_help)
        @repository_argument
        @pass_runtime
        def clear(rt: Runtime, repository: str) -> None:
            self.document.clear(rt.lakefs, repository, lock=self.lock(rt, repository))
            click.echo(self.cleared.format(repository=repository))
