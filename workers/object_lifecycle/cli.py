"""``lakefs-janitor object-lifecycle rules get|set|clear`` and ``object-lifecycle preview`` (mirrors lakectl)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import click

from spark_jobs.core.durations import format_duration
from workers.gc.lakefs_rules import when_collectable
from workers.object_lifecycle.evaluation import Evaluation, applicable_rules, evaluate
from workers.object_lifecycle.outcomes import RunReport
from workers.object_lifecycle.restore import restore
from workers.object_lifecycle.rules import Rule, RulesValidationError, needing_confirmation, parse_rules
from workers.object_lifecycle.run import RunOptions, branch_objects, listing_prefixes, run_repository
from workers.object_lifecycle.scheduled import options_from
from workers.object_lifecycle.store import RULES, ObjectLifecycleRecords, StoredRulesInvalid
from workers.shared.cli_common import (
    DocumentCommands,
    Runtime,
    console,
    document_file_option,
    etag_options,
    parse_now,
    pass_runtime,
    read_document_file,
    repository_argument,
    short_time,
    table,
)
from workers.shared.document_text import DocumentTextError, load_document_text
from workers.shared.lakefs.documents import Stored
from workers.shared.runs import FutureRunRefused
from workers.shared.uris import URIError, parse_uri


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
@document_file_option("Rules as YAML or JSON ('-' for standard input).")
@click.option("--yes", is_flag=True, help="Confirm rules that expire every object on their branches (paths: ['**']).")
@etag_options
@pass_runtime
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
    text = read_document_file(path)
    try:
        return parse_rules(load_document_text(text, expected="a mapping with a 'rules' list"))
    except DocumentTextError as exc:
        raise click.ClickException(f"{path}: {exc}") from None
    except RulesValidationError as exc:
        raise click.ClickException(f"{path}: invalid object lifecycle rules:\n{exc}") from None


# --- preview, run, history, restore ------------------------------------------------------------------------


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
@click.option("--impact", is_flag=True,
              help="Also say when the GC can free the expired bytes (the branch's GC retention after the commit).")
@click.option("--json", "as_json", is_flag=True)
@pass_runtime
def preview_cmd(rt: Runtime, target: str, now_text: str | None, depth: int, impact: bool, as_json: bool) -> None:
    """Per branch, rule and prefix: the objects and bytes the rules would expire now, and when the next are due.
    Changes nothing."""
    repository, only = _target(target)
    now = parse_now(now_text)
    rules = RULES.get(rt.lakefs, repository).policies
    default = rt.lakefs.call("get repository", rt.lakefs.repositories.get_repository, repository).default_branch
    heads = ({only: rt.lakefs.call("get branch", rt.lakefs.branches.get_branch, repository, only).commit_id}
             if only else dict(rt.lakefs.branch_heads(repository)))
    results: list[Evaluation] = []
    for branch, head in heads.items():
        applying = applicable_rules(rules, branch, is_default=branch == default)
        # At the HEAD commit, as a run evaluates: staged changes are not committed objects.
        objects = branch_objects(rt.lakefs, repository, head, prefixes=listing_prefixes(applying)) if applying else iter(())
        results.append(evaluate(rules, objects, branch_id=branch, is_default=branch == default, now=now, depth=depth,
                                keep_expired=False))
    freed = when_collectable(rt.lakefs, repository, {e.branch_id: e.bytes for e in results}, now=now) if impact else {}
    if as_json:
        click.echo(json.dumps({"repository_id": repository, "now": now.isoformat(), "depth": depth,
                               "branches": [e.document() | ({"gc": freed[e.branch_id]} if impact else {})
                                            for e in results]}, indent=2))
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
        if impact and e.objects:
            click.echo(f"  garbage collection: {freed[e.branch_id]['text']}")


def _report_lines(report: RunReport) -> None:
    where = f"lakefs://{report.repository_id}"
    if report.locked_out:
        click.echo(f"{where}: another object lifecycle run holds the lock; nothing done")
        return
    if not report.rules:
        click.echo(f"{where} has no enabled object lifecycle rules; nothing to do")
        return
    rows = table("branch", "result", "objects", "bytes", "commit", "detail")
    for b in report.branches:
        detail = b.detail or ""
        if b.kept_rewritten:
            detail = f"{b.kept_rewritten} written again since evaluation, kept. {detail}".strip()
        if b.capped:
            detail = f"{b.capped} left for the next run (cap). {detail}".strip()
        rows.add_row(b.branch_id, b.result if not b.reason else f"{b.result} ({b.reason})", f"{b.objects:,}",
                     f"{b.bytes:,}", (b.commit_id or "-")[:12], detail)
    if rows.row_count:
        console.print(rows)
    verb = "would expire" if report.dry_run else "expired"
    total = sum(b.objects for b in report.branches)
    click.echo(f"{where}: run {report.run_id} {verb} {total:,} object{'s' if total != 1 else ''}, "
               f"{sum(b.bytes for b in report.branches):,} bytes"
               + (f"; stopped: {report.aborted}" if report.aborted else ""))


@object_lifecycle.command("run")
@click.argument("target", metavar="lakefs://REPOSITORY[/BRANCH]")
@click.option("--dry-run", is_flag=True, help="Evaluate and report; change nothing.")
@click.option("--now", "now_text", default=None, help="Evaluate as of this ISO-8601 time (a dry run may look ahead).")
@click.option("--max-deletions", type=click.IntRange(1), default=None,
              help="Objects expired at most in this run (default: object_lifecycle_max_deletions_per_run).")
@click.option("--json", "as_json", is_flag=True)
@pass_runtime
def run_cmd(rt: Runtime, target: str, dry_run: bool, now_text: str | None, max_deletions: int | None,
            as_json: bool) -> None:
    """Expire what the rules select now: one commit per branch, made on a short-lived branch and merged back (so
    staged changes stay staged); exits 1 when a branch failed."""
    repository, only = _target(target)
    options = options_from(rt.settings)
    if max_deletions is not None:
        options = RunOptions(max_deletions=max_deletions, lock_seconds=options.lock_seconds)
    try:
        report = run_repository(rt.lakefs, ObjectLifecycleRecords.of(rt.services), repository,
                                now=parse_now(now_text), options=options, dry_run=dry_run, only_branch=only,
                                metrics=None)
    except FutureRunRefused as exc:
        raise click.UsageError(str(exc)) from None
    if as_json:
        click.echo(json.dumps(report.document(), indent=2))
    else:
        _report_lines(report)
    if not report.succeeded:
        raise SystemExit(1)


@object_lifecycle.command("history")
@repository_argument
@click.option("--limit", type=click.IntRange(1, 1000), default=20, show_default=True)
@click.option("--by-prefix", is_flag=True, help="One row per rule and prefix instead of per rule.")
@click.option("--json", "as_json", is_flag=True)
@pass_runtime
def history_cmd(rt: Runtime, repository: str, limit: int, by_prefix: bool, as_json: bool) -> None:
    """Recent runs, newest first: per branch, the commit and what each rule removed (by prefix with --by-prefix)."""
    runs = ObjectLifecycleRecords.of(rt.services).runs(repository, limit)
    if as_json:
        click.echo(json.dumps(runs, indent=2))
        return
    if not runs:
        click.echo(f"no object lifecycle run recorded for lakefs://{repository}")
        return
    rows = table("run", "branch", "result", "commit", "rule", *(["prefix"] if by_prefix else []), "objects", "bytes")
    for run in runs:
        for b in run["branches"]:
            if by_prefix:
                parts = [(p["rule_id"], [p["prefix"] or "/"], p) for p in b.get("by_prefix", [])]
            else:
                parts = [(r, [], t) for r, t in sorted(b.get("by_rule", {}).items())]
            for rule_id, prefix, t in parts or [("-", ["-"] if by_prefix else [], b)]:
                rows.add_row(run["run_id"], b["branch_id"], b["result"], (b.get("commit_id") or "-")[:12], rule_id,
                             *prefix, f"{t['objects']:,}", f"{t['bytes']:,}")
    console.print(rows)


@object_lifecycle.command("restore")
@repository_argument
@click.argument("run_id", metavar="RUN")
@click.option("--branch", "branch_id", default=None, help="Only this branch's commit of the run.")
@pass_runtime
def restore_cmd(rt: Runtime, repository: str, run_id: str, branch_id: str | None) -> None:
    """Bring back what a run expired: revert its commit on each branch (a new commit; history is kept)."""
    try:
        restored = restore(rt.lakefs, ObjectLifecycleRecords.of(rt.services), repository, run_id=run_id,
                           branch_id=branch_id)
    except LookupError as exc:
        raise click.ClickException(str(exc)) from None
    for r in restored:
        click.echo(f"lakefs://{repository}/{r.branch_id}: reverted {r.commit_id[:12]} (run {run_id}); "
                   f"HEAD is now {(r.revert_commit_id or '')[:12]}")


COMMANDS = (object_lifecycle,)
