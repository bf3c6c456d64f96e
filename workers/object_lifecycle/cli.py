"""``lakefs-janitor object-lifecycle rules get|set|clear`` and ``object-lifecycle preview`` (mirrors lakectl)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import click

from spark_jobs.core.durations import format_duration
from workers.cli_common import (
    DocumentCommands,
    Runtime,
    console,
    etag_options,
    friendly_errors,
    parse_now,
    pass_runtime,
    repository_argument,
    short_time,
    table,
)
from workers.document_text import DocumentTextError, load_document_text
from workers.lakefs.client import LakeFS
from workers.lakefs.documents import Stored
from workers.object_lifecycle.evaluation import Evaluation, ObjectInfo, applicable_rules, evaluate
from workers.object_lifecycle.rules import Rule, RulesValidationError, needing_confirmation, parse_rules
from workers.object_lifecycle.store import RULES, ObjectLifecycleRecords, StoredRulesInvalid
from workers.uris import URIError, parse_uri


@click.group("object-lifecycle")
def object_lifecycle() -> None:
    """Rules that expire committed objects by path and age, and their preview."""


@object_lifecycle.group("rules")
def rules_group() -> None:
    """The repository's object lifecycle rules (stored on the repository, with an ETag)."""


_RULES = DocumentCommands(RULES, locks=ObjectLifecycleRecords.of,
                          cleared="cleared object lifecycle rules of lakefs://{repository}")
_RULES.add_get_and_clear(rules_group, get_help="Print the repository's rules (JSON, the canonical shape).",
                         clear_help="Remove every rule (idempotent).")


@rules_group.command("set")
@repository_argument
@click.option("-f", "--file", "path", required=True, type=click.Path(dir_okay=False, allow_dash=True),
              help="Rules as YAML or JSON ('-' for standard input).")
@click.option("--yes", is_flag=True, help="Confirm rules that expire every object on their branches (paths: ['**']).")
@etag_options
@pass_runtime
@friendly_errors
def set_cmd(rt: Runtime, repository: str, path: str, yes: bool, force: bool, if_match: str | None) -> None:
    """Replace the rules; prints the canonical list. The file is checked whole before lakeFS is contacted."""
    rules = _load(path)
    try:
        stored = RULES.get(rt.lakefs, repository)
    except StoredRulesInvalid:
        if not force:
            raise
        stored = Stored([], "")  # --force replaces what cannot be read; every rule is confirmed as new
    sweeping = needing_confirmation(rules, stored.policies)
    if sweeping and not yes:
        names = ", ".join(repr(r.id) for r in sweeping)
        raise click.ClickException(
            f"rule{'s' if len(sweeping) > 1 else ''} {names} would expire every object older than its max_age on "
            "the branches it selects (paths [\"**\"] with no exclusion); nothing was stored. Run again with --yes "
            "to confirm, or narrow the paths (\"!keep/**\" excludes)")
    # The ETag read for the confirmation is the precondition (so what was confirmed is what is replaced).
    _RULES.write(rt, repository, rules, force=force, if_match=if_match or stored.etag or None)


def _load(path: str) -> list[Rule]:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise click.ClickException(f"cannot read {path}: {exc}") from None
    try:
        return parse_rules(load_document_text(text, expected="a mapping with a 'rules' list"))
    except DocumentTextError as exc:
        raise click.ClickException(f"{path}: {exc}") from None
    except RulesValidationError as exc:
        raise click.ClickException(f"{path}: invalid object lifecycle rules:\n{exc}") from None


# --- preview -----------------------------------------------------------------------------------------------


def listing_prefixes(rules: list[Rule]) -> list[str]:
    """The fewest prefixes whose listings hold every path the rules can select ([""]: the whole branch)."""
    kept: list[str] = []
    for prefix in sorted({p for r in rules for p in r.listing_prefixes()}):
        if not any(prefix.startswith(k) for k in kept):
            kept.append(prefix)
    return kept


def branch_objects(lakefs: LakeFS, repository: str, branch: str, *, prefixes: list[str],
                   amount: int = 1000) -> Iterator[ObjectInfo]:
    """Every object of the branch under the prefixes (paginated listings, ``amount`` a page; no per-object
    request)."""
    for prefix in prefixes:
        for stat in lakefs.paginate_json(f"list objects of {branch}", lakefs.objects.list_objects_with_http_info,
                                         repository, branch, prefix=prefix, user_metadata=False, amount=amount):
            if stat.get("path_type", "object") == "object":
                yield ObjectInfo(stat["path"], datetime.fromtimestamp(stat["mtime"], UTC), stat.get("size_bytes") or 0)


def _target(text: str) -> tuple[str, str | None]:
    try:
        uri = parse_uri(text)
    except URIError as exc:
        raise click.BadParameter(str(exc), param_hint="lakefs://REPOSITORY[/BRANCH]") from None
    if uri.path:
        raise click.BadParameter(f"{text!r}: expected lakefs://REPOSITORY or lakefs://REPOSITORY/BRANCH, not a path",
                                 param_hint="lakefs://REPOSITORY[/BRANCH]")
    return uri.repository_id, uri.ref


def _due(at: datetime | None, now: datetime) -> str:
    if at is None:
        return "-"
    return f"{short_time(at)} (in {format_duration(timedelta(seconds=max(1, int((at - now).total_seconds()))))})"


@object_lifecycle.command("preview")
@click.argument("target", metavar="lakefs://REPOSITORY[/BRANCH]")
@click.option("--now", "now_text", default=None, help="Evaluate as of this ISO-8601 time instead of now.")
@click.option("--depth", default=1, show_default=True, type=click.IntRange(1, 32),
              help="Folders of the path that make a prefix in the breakdown.")
@click.option("--json", "as_json", is_flag=True)
@pass_runtime
@friendly_errors
def preview_cmd(rt: Runtime, target: str, now_text: str | None, depth: int, as_json: bool) -> None:
    """Per branch, rule and prefix: the objects and bytes the rules would expire now, and when the next are due.
    Changes nothing."""
    repository, only = _target(target)
    now = parse_now(now_text)
    rules = RULES.get(rt.lakefs, repository).policies
    default = rt.lakefs.call("get repository", rt.lakefs.repositories.get_repository, repository).default_branch
    branches = [only] if only else [b for b, _ in rt.lakefs.branch_heads(repository)]
    results: list[Evaluation] = []
    for branch in branches:
        applying = applicable_rules(rules, branch, is_default=branch == default)
        objects = branch_objects(rt.lakefs, repository, branch, prefixes=listing_prefixes(applying)) if applying else iter(())
        results.append(evaluate(rules, objects, branch_id=branch, is_default=branch == default, now=now, depth=depth,
                                keep_expired=False))
    if as_json:
        click.echo(json.dumps({"repository_id": repository, "now": now.isoformat(), "depth": depth,
                               "branches": [e.document() for e in results]}, indent=2))
        return
    if not rules:
        click.echo(f"lakefs://{repository} has no object lifecycle rules")
        return
    rows = table("branch", "rule", "prefix", "objects", "bytes", "next due")
    for e in results:
        for (rule_id, prefix), t in sorted(e.by_prefix.items()):
            rows.add_row(e.branch_id, rule_id, prefix or "/", f"{t.objects:,}", f"{t.bytes:,}", _due(t.next_due, now))
    if rows.row_count:
        console.print(rows)
    for e in results:
        if not e.rule_ids:
            click.echo(f"lakefs://{repository}/{e.branch_id}: no enabled rule selects this branch")
            continue
        click.echo(f"lakefs://{repository}/{e.branch_id}: {e.objects:,} object{'s' if e.objects != 1 else ''}, "
                   f"{e.bytes:,} byte{'s' if e.bytes != 1 else ''} would expire (rules {', '.join(e.rule_ids)})")


COMMANDS = (object_lifecycle,)
