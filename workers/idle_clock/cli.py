"""Idle-clock commands: `hooks install`, `reconcile`, `branches`."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import click

from spark_jobs.core.durations import format_duration
from workers.idle_clock.store import BranchClock, ClockStore
from workers.shared.cli_common import Runtime, console, pass_runtime, repository_argument, short_time, table
from workers.shared.lakefs.client import LakeFS


@click.group()
def hooks() -> None:
    """lakeFS action hooks that feed the idle clock."""


@hooks.command("install")
@repository_argument
@click.option("--url", "receiver_url", required=True, help="Base URL lakeFS uses to reach this service.")
@click.option("--secret-env", default="LAKEFSACTION_JANITOR_SECRET", show_default=True,
              help="lakeFS server environment variable holding the shared secret.")
@click.option("--branch", default=None, help="Write to this branch instead of the default branch.")
@pass_runtime
def hooks_install(rt: Runtime, repository: str, receiver_url: str, secret_env: str, branch: str | None) -> None:
    """Commit _lakefs_actions/lakefs-janitor.yaml to the repository (idempotent)."""
    from workers.idle_clock.hooks_install import InstallError, action_file, install  # noqa: PLC0415

    try:
        result = install(rt.lakefs, repository, action_file(receiver_url, secret_env), branch_id=branch)
    except InstallError as exc:
        raise click.ClickException(str(exc)) from None
    where = f"lakefs://{result.repository_id}/{result.branch_id}/{result.path}"
    if result.changed:
        click.echo(f"installed {where} (commit {result.commit_id})")
    else:
        click.echo(f"{where} is already up to date")
    click.echo(f"lakeFS must have {secret_env} set to the service's LAKEFS_JANITOR_WEBHOOK_SECRET.")


@click.command()
@repository_argument
@pass_runtime
def reconcile(rt: Runtime, repository: str) -> None:
    """Compare every branch with what was last seen and record writes no hook reported, now."""
    from workers.idle_clock.reconcile import reconcile_repository  # noqa: PLC0415

    s = rt.settings
    report = reconcile_repository(rt.lakefs, ClockStore.of(rt.services), repository, now=datetime.now(UTC),
                                  max_branches=s.reconcile_max_branches, max_stats=s.reconcile_max_staged_stats)
    for write in report.writes:
        click.echo(f"write   {write.branch_id}  {write.kind}  {_iso(write.at)}")
    for branch_id in report.forgotten:
        click.echo(f"gone    {branch_id}")
    if report.locked_out:
        raise click.ClickException(f"another reconcile of lakefs://{repository} is running; try again later")
    more = "" if report.complete else " (bound reached; the next run continues)"
    n, w = report.branches_seen, len(report.writes)
    click.echo(f"{n} branch{'es' if n != 1 else ''} examined, {w} write{'s' if w != 1 else ''} detected{more}")


def _iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z") if value else None


def _source(clock: BranchClock) -> str:
    if clock.last_write_at and clock.last_write_at >= (clock.created_at or clock.last_write_at):
        return clock.last_write_src or "unknown"
    return clock.created_src or "unknown"


def branch_rows(lakefs: LakeFS, clock: ClockStore, repository: str, *, now: datetime) -> list[dict[str, Any]]:
    heads = dict(lakefs.branch_heads(repository))
    clocks = clock.get_many(repository, heads)
    rows = []
    for branch_id, head in heads.items():
        c = clocks[branch_id]
        last = c.last_activity
        rows.append({
            "branch": branch_id,
            "head": head,
            "created_at": _iso(c.created_at),
            "created_source": c.created_src or "unknown",
            "last_write_at": _iso(c.last_write_at),
            "last_activity_at": _iso(last),
            "idle_seconds": int((now - last).total_seconds()) if last else None,
            "source": _source(c) if last else "unknown",
            "first_seen_at": _iso(c.first_seen_at),
        })
    return rows


@click.command()
@repository_argument
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list instead of a table.")
@pass_runtime
def branches(rt: Runtime, repository: str, as_json: bool) -> None:
    """Each branch with its creation time, last write and idle time."""
    now = datetime.now(UTC)
    rows = branch_rows(rt.lakefs, ClockStore.of(rt.services), repository, now=now)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    out = table("branch", "created", "last write", "idle for", "source")
    for row in rows:
        idle = format_duration_seconds(row["idle_seconds"])
        created = short_time(datetime.fromisoformat(row["created_at"])) if row["created_at"] else "unknown"
        written = short_time(datetime.fromisoformat(row["last_write_at"])) if row["last_write_at"] else "-"
        out.add_row(row["branch"], created, written, idle, row["source"])
    console.print(out)


def format_duration_seconds(seconds: int | None) -> str:
    return "unknown" if seconds is None else format_duration(timedelta(seconds=max(seconds, 0)))




COMMANDS = (hooks, reconcile, branches)
