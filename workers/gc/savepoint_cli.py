"""`gc savepoint create|list|delete|restore`: Hudi's savepoint commands over lakeFS tags."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import click

from spark_jobs.core.durations import DurationError, parse_duration
from workers.gc import savepoints
from workers.gc.history import GCRuns
from workers.gc.run import GCError
from workers.shared.cli_common import Runtime, console, pass_runtime, repository_argument, short_time, table
from workers.shared.uris import URIError, parse_branch_uri, parse_uri


def _ref_uri(ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, str]:
    try:
        uri = parse_uri(value)
    except URIError as exc:
        raise click.BadParameter(str(exc)) from None
    if not uri.ref or uri.path:
        raise click.BadParameter(f"{value!r}: expected lakefs://<repository>/<ref> (a branch, tag or commit)")
    return uri.repository_id, uri.ref


def _branch_uri(ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, str]:
    try:
        uri = parse_branch_uri(value)
    except URIError as exc:
        raise click.BadParameter(str(exc)) from None
    return uri.repository_id, str(uri.ref)


def cutoff(value: str | None) -> timedelta | None:
    if value is None:
        return None
    try:
        return parse_duration(value, allow_zero=True)
    except DurationError as exc:
        raise click.BadParameter(str(exc), param_hint="--min-age") from None


def _lock(rt: Runtime, repository: str):
    return GCRuns.of(rt.services).edit_lock(repository)


@click.group("savepoint")
def savepoint() -> None:
    """Savepoints: tags the repository's savepoint patterns match. A savepoint keeps its whole commit: no clean
    removes any of its objects, on any path, whichever policy (path policies too) names the pattern."""


@savepoint.command("create")
@click.argument("target", metavar="lakefs://REPOSITORY/REF", callback=_ref_uri)
@click.option("--name", default=None, help="The tag's name; it must match a savepoint pattern. Default: the first "
                                           "pattern in the order the policies list them (first policy first) "
                                           "that has a single '*', with the time in place of the '*' "
                                           "(release-* -> release-20260131-120000).")
@click.option("--comment", default="", help="Why this savepoint exists (shown by `gc savepoint list`).")
@pass_runtime
def create_cmd(rt: Runtime, target: tuple[str, str], name: str | None, comment: str) -> None:
    """Savepoint the commit REF points at: every object of that commit stays readable until the savepoint is
    deleted."""
    repository, ref = target
    try:
        saved = savepoints.create(rt.lakefs, repository, ref, name=name, comment=comment, now=datetime.now(UTC),
                                  lock=_lock(rt, repository))
    except savepoints.SavepointError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"savepoint {saved.name} at commit {saved.commit_id} of lakefs://{repository}")


@savepoint.command("list")
@repository_argument
@click.option("--no-impact", is_flag=True, help="Skip what each savepoint alone keeps alive (a dry mark).")
@click.option("--min-age", default=None, help="Safety cutoff the freed objects must pass (default as for gc run).")
@click.option("--json", "as_json", is_flag=True)
@pass_runtime
def list_cmd(rt: Runtime, repository: str, no_impact: bool, min_age: str | None, as_json: bool) -> None:
    """Savepoints: name, commit, date, comment, and the objects and bytes only each keeps alive (what deleting it
    frees at the next run)."""
    found = savepoints.list_savepoints(rt.lakefs, repository)
    impacts = {}
    if found and not no_impact:
        try:
            impacts = savepoints.impacts(rt.settings.gc, rt.settings.lakefs, repository, names=[s.name for s in found],
                                         min_age=cutoff(min_age))
        except GCError as exc:
            raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps([{**s.__dict__, **({"objects_only_it_keeps": impacts[s.name].objects,
                                                  "bytes_only_it_keeps": impacts[s.name].bytes}
                                                 if s.name in impacts else {})} for s in found], indent=2))
        return
    if not found:
        click.echo(f"lakefs://{repository} has no savepoints")
        return
    rows = table("savepoint", "commit", "commit date", "comment", "by", "objects only it keeps", "bytes")
    for s in found:
        impact = impacts.get(s.name)
        rows.add_row(s.name, s.commit_id[:12], short_time(datetime.fromtimestamp(s.commit_date, UTC)),
                     s.comment or "-", s.creator or "-", f"{impact.objects:,}" if impact else "-",
                     f"{impact.bytes:,}" if impact else "-")
    console.print(rows)


@savepoint.command("delete")
@repository_argument
@click.argument("name")
@pass_runtime
def delete_cmd(rt: Runtime, repository: str, name: str) -> None:
    """Delete a savepoint (its tag and comment); the next clean may remove what only it kept."""
    try:
        savepoints.delete(rt.lakefs, repository, name, lock=_lock(rt, repository))
    except savepoints.SavepointError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"savepoint {name} of lakefs://{repository} deleted")


@savepoint.command("restore")
@click.argument("target", metavar="lakefs://REPOSITORY/BRANCH", callback=_branch_uri)
@click.option("--to", "name", required=True, help="The savepoint to bring the branch back to.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--discard-uncommitted", is_flag=True, help="Restore even if the branch has uncommitted changes "
                                                           "(they are lost).")
@pass_runtime
def restore_cmd(rt: Runtime, target: tuple[str, str], name: str, yes: bool, discard_uncommitted: bool) -> None:
    """Point the branch at the savepoint's commit (a hard reset; later commits stay reachable from other refs
    only)."""
    repository, branch = target
    try:
        saved = savepoints.find(rt.lakefs, repository, name)
    except savepoints.SavepointError as exc:
        raise click.ClickException(str(exc)) from None
    changes = savepoints.uncommitted(rt.lakefs, repository, branch)
    if changes and not discard_uncommitted:
        raise click.ClickException(f"lakefs://{repository}/{branch} has uncommitted changes ({changes}"
                                   f"{'+' if changes >= 100 else ''}): commit them, or pass --discard-uncommitted "
                                   "to lose them")
    head = rt.lakefs.call(f"read {branch}", rt.lakefs.branches.get_branch, repository, branch).commit_id
    if not yes:
        click.confirm(f"Reset lakefs://{repository}/{branch} from {head[:12]} to savepoint {name} "
                      f"({saved.commit_id[:12]})?", abort=True)
    previous = savepoints.restore(rt.lakefs, repository, branch, saved=saved,
                                  discard_uncommitted=discard_uncommitted)
    click.echo(f"lakefs://{repository}/{branch} is at savepoint {name} ({saved.commit_id}); it was at {previous} "
               "(commits after the savepoint now follow the default retention unless another ref keeps them)")
