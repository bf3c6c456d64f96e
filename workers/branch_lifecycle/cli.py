"""``lakefs-janitor branch-lifecycle get|set|clear|preview|run|restore|history`` (mirrors lakectl)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import click
import lakefs_sdk
import yaml

from spark_jobs.core.durations import format_duration
from workers.branch_lifecycle.deletions import decision_dict, plan
from workers.branch_lifecycle.evaluation import Decision
from workers.branch_lifecycle.policies import PolicyValidationError
from workers.branch_lifecycle.policy_text import load_policy_text
from workers.branch_lifecycle.run import LifecycleOptions, run_repository
from workers.branch_lifecycle.store import POLICIES, LifecycleRecords
from workers.idle_clock.store import ClockStore
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
from workers.shared.lakefs.client import Conflict, LakeFSError, NotFound
from workers.shared.runs import FutureRunRefused
from workers.shared.uris import URIError, parse_branch_uri


@click.group("branch-lifecycle")
def branch_lifecycle() -> None:
    """Policies that delete stale branches, and their runs."""


_POLICIES = DocumentCommands(POLICIES, locks=LifecycleRecords.of,
                             cleared="cleared branch lifecycle policies of lakefs://{repository}")
_POLICIES.add_get_and_clear(branch_lifecycle, get_help="Print the repository's policies (JSON, the canonical shape).",
                            clear_help="Remove every policy (idempotent).")


def _file_problems(rt: Runtime, repository: str, text: str) -> PolicyValidationError | None:
    """The file's own mistakes, found without lakeFS; when lakeFS answers, every mistake at once (the patterns
    that match the default branch too)."""
    try:
        load_policy_text(text, None)
        return None
    except PolicyValidationError as own:
        problem = own
    try:
        repo = rt.lakefs.call("get repository", rt.lakefs.repositories.get_repository, repository)
        load_policy_text(text, repo.default_branch)
    except PolicyValidationError as everything:
        return everything
    except LakeFSError:
        pass
    return problem


@branch_lifecycle.command("set")
@repository_argument
@document_file_option("Policies as YAML or JSON ('-' for standard input).")
@etag_options
@pass_runtime
def set_cmd(rt: Runtime, repository: str, path: str, force: bool, if_match: str | None) -> None:
    """Replace the policies; prints the canonical list with assigned ids."""
    text = read_document_file(path)
    problem = _file_problems(rt, repository, text)
    if problem is not None:
        raise click.ClickException(f"{path}: invalid policies:\n{problem}")
    repo = rt.lakefs.call("get repository", rt.lakefs.repositories.get_repository, repository)
    try:
        policies = load_policy_text(text, repo.default_branch)  # the patterns against the default branch
    except PolicyValidationError as exc:
        raise click.ClickException(f"{path}: invalid policies:\n{exc}") from None
    _POLICIES.write(rt, repository, policies, force=force, if_match=if_match)


def _fmt(td: timedelta | None) -> str:
    return "-" if td is None else format_duration(timedelta(seconds=int(td.total_seconds())))


def _when(d: Decision, now: datetime) -> str:
    if d.action == "delete":
        return "now"
    if d.delete_at is None:
        return "never"
    return f"{short_time(d.delete_at)} (in {_fmt(d.delete_at - now)})"


# The table's "why" says what the other columns do not (the JSON output keeps the full sentence).
_WHY = {
    "default-branch": "default branch: exempt", "read-only": "read-only repository",
    "no-creation-time": "no recorded creation time", "no-matching-policy": "no policy matches",
    "thresholds-not-crossed": "thresholds not crossed yet", "unreported-write": "written since last look",
}


def _why(d: Decision) -> str:
    if d.action == "delete":
        return d.detail.removeprefix(f"policy {d.policy_id!r} applies: ")
    return _WHY.get(d.reason, d.reason)


@branch_lifecycle.command("preview")
@repository_argument
@click.option("--json", "as_json", is_flag=True)
@click.option("--now", "now_text", default=None, help="Evaluate as of this ISO-8601 time instead of now.")
@click.option("--impact", is_flag=True, help="Beside each branch due for deletion, what deleting it would free "
                                            "(objects and bytes only it keeps alive; needs GC rules and storage).")
@pass_runtime
def preview_cmd(rt: Runtime, repository: str, as_json: bool, now_text: str | None, impact: bool) -> None:
    """Every branch with its matching policy, age, idle time and when it will be deleted (or why never)."""
    now = parse_now(now_text)
    p = plan(rt.lakefs, ClockStore.of(rt.services), repository, now=now, adopt_untracked=rt.settings.lifecycle_adopt_untracked,
             max_stats=rt.settings.reconcile_max_staged_stats)
    frees = _impacts(rt, repository, [d.branch_id for d in p.decisions if d.action == "delete"]) if impact else {}
    if as_json:
        branches = [{**decision_dict(d), **({"impact": frees[d.branch_id]} if d.branch_id in frees else {})}
                    for d in p.decisions]
        click.echo(json.dumps({"repository_id": repository, "now": now.isoformat(), "branches": branches}, indent=2))
        return
    if not p.policies:
        click.echo(f"lakefs://{repository} has no branch lifecycle policies")
        return
    rows = table("branch", "policy", "age", "idle", "deleted", "why", *(("frees",) if impact else ()))
    for d in p.decisions:
        cells = [d.branch_id, d.policy_id or "-", _fmt(d.age), _fmt(d.idle), _when(d, now), _why(d)]
        if impact:
            f = frees.get(d.branch_id)
            cells.append(f"{f['objects']:,} obj, {f['bytes']:,} B" if f else "-")
        rows.add_row(*cells)
    console.print(rows)


def _impacts(rt: Runtime, repository: str, due: list[str]) -> dict[str, dict]:
    if not due:
        return {}
    from workers.gc.run import GCError, repository_impact  # noqa: PLC0415 - the GC only when asked for

    try:
        found = repository_impact(rt.settings.gc, rt.settings.lakefs, repository, branch_ids=due)
    except GCError as exc:
        raise click.ClickException(f"--impact: {exc}") from None
    return {b: {"objects": i.objects, "bytes": i.bytes} for b, i in found.items()}


@branch_lifecycle.command("run")
@repository_argument
@click.option("--dry-run", is_flag=True, help="Say what would be deleted; delete nothing.")
@click.option("--now", "now_text", default=None, help="Evaluate as of this ISO-8601 time instead of now.")
@click.option("--json", "as_json", is_flag=True)
@pass_runtime
def run_cmd(rt: Runtime, repository: str, dry_run: bool, now_text: str | None, as_json: bool) -> None:
    """Evaluate the policies now and delete what they select."""
    now = parse_now(now_text)
    options = LifecycleOptions.from_settings(rt.settings)
    try:
        report = run_repository(rt.lakefs, ClockStore.of(rt.services), repository, now=now, options=options, dry_run=dry_run)
    except FutureRunRefused:
        raise click.BadParameter("a --now in the future can only be used with --dry-run", param_hint="--now") from None
    if report.locked_out:
        raise click.ClickException(f"another lifecycle run for lakefs://{repository} is in progress; try later")
    if as_json:
        click.echo(json.dumps({"repository_id": repository, "dry_run": dry_run, "skipped": report.skipped,
                               "outcomes": [o.__dict__ for o in report.outcomes]}, indent=2))
        return
    width = max((len(o.branch_id) for o in report.outcomes), default=0)
    for o in report.outcomes:
        click.echo(f"{o.result:<14} {o.branch_id:<{width}}  policy={o.policy_id or '-'}  {o.detail}")
    done = report.count("would-delete") if dry_run else report.count("deleted")
    verb = "would delete" if dry_run else "deleted"
    click.echo(f"{verb} {done} branch{'es' if done != 1 else ''}; left alone: "
               + (", ".join(f"{n} {reason}" for reason, n in sorted(report.skipped.items())) or "none"))


@branch_lifecycle.command("restore")
@click.argument("branch_uri", metavar="lakefs://REPOSITORY/BRANCH")
@pass_runtime
def restore_cmd(rt: Runtime, branch_uri: str) -> None:
    """Recreate a branch the lifecycle deleted, at its last HEAD."""
    try:
        uri = parse_branch_uri(branch_uri)
    except URIError as exc:
        raise click.BadParameter(str(exc), param_hint="lakefs://REPOSITORY/BRANCH") from None
    record = LifecycleRecords.of(rt.services).last_deletion(uri.repository_id, uri.ref)
    if record is None or not record.get("head") or record.get("status") not in ("deleted", "pending"):
        raise click.ClickException(f"no lifecycle deletion of {branch_uri} is recorded")
    try:
        rt.lakefs.call("create branch", rt.lakefs.branches.create_branch, uri.repository_id,
                       lakefs_sdk.BranchCreation(name=uri.ref, source=record["head"]))
    except Conflict:
        raise click.ClickException(f"{branch_uri} exists already; delete or rename it first") from None
    except NotFound as exc:
        raise click.ClickException(f"commit {record['head']} is gone (garbage collected?): {exc}") from None
    # A new life: without this, a branch whose HEAD carries no action file keeps its old clock and would be
    # deleted again by the next run.
    ClockStore.of(rt.services).record_created(uri.repository_id, uri.ref, datetime.now(UTC), source="restored",
                                              head=record["head"])
    click.echo(f"restored {branch_uri} at {record['head']} (deleted {record['deleted_at']} by policy "
               f"{record['policy_id']})")


@branch_lifecycle.command("history")
@repository_argument
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 10_000))
@pass_runtime
def history_cmd(rt: Runtime, repository: str, limit: int) -> None:
    """Branches the lifecycle deleted, newest first (YAML)."""
    click.echo(yaml.safe_dump(LifecycleRecords.of(rt.services).deletions(repository, limit), sort_keys=False) or "[]")


COMMANDS = (branch_lifecycle,)
