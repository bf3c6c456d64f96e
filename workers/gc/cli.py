"""GC commands, lakectl-style: `gc run|plan|sweep|impact|doctor lakefs://repo`, `gc rules get|set|clear lakefs://repo`;
`gc show` (show_cli), `gc policy` (policy_cli) and `gc savepoint` (savepoint_cli) are added from their modules."""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import click
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

from spark_jobs.core import inventory_url
from spark_jobs.core.freeing import describe
from spark_jobs.core.report import describe_cache, describe_listing
from workers.gc.history import GCRuns
from workers.gc.lakefs_rules import GCRulesError, clear_gc_rules, get_gc_rules, parse_gc_rules, set_gc_rules
from workers.gc.policy_cli import policy
from workers.gc.run import Busy, GCError, GCRequest, doctor, execute, repository_impact
from workers.gc.savepoint_cli import cutoff as _min_age
from workers.gc.savepoint_cli import savepoint
from workers.gc.show_cli import describe_freed, show_cmd
from workers.shared.cli_common import (
    Runtime,
    console,
    load_yaml_file,
    parse_now,
    pass_runtime,
    repository_argument,
    table,
)
from workers.shared.settings import RUNNER_ALIASES


@contextlib.contextmanager
def _progress_display(enabled: bool) -> Iterator[Callable[[str, int], None] | None]:
    """A live counter per phase (commits retained, ranges, objects listed, deleted) on stderr; the final state
    stays on screen, and without a terminal only that final state is printed."""
    if not enabled:
        yield None
        return
    columns = (SpinnerColumn(finished_text="[green]✓[/green]"), TextColumn("{task.description:<16}"),
               TextColumn("[bold]{task.completed:>12,.0f}"), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True)) as display:
        tasks: dict[str, TaskID] = {}

        def update(what: str, count: int) -> None:
            for other, task in tasks.items():  # phases come in order: a new one ends the previous
                if other != what:
                    display.update(task, total=display.tasks[task].completed)
            if what not in tasks:
                tasks[what] = display.add_task(what, total=None)
            display.update(tasks[what], completed=count)

        yield update
        for task in tasks.values():
            display.update(task, total=display.tasks[task].completed)


def _go(rt: Runtime, request: GCRequest, as_json: bool):
    try:
        with _progress_display(not as_json) as progress:
            runs = GCRuns.of(rt.services)
            return execute(rt.settings.gc, request, connection=rt.settings.lakefs, runs=runs, metrics=None,
                           progress=progress, spark=rt.settings.spark)
    except Busy as exc:
        raise click.ClickException(str(exc)) from None
    except GCError as exc:
        raise click.ClickException(f"GC of lakefs://{request.repository_id} failed ({exc.reason}): {exc}") from None


def _print_summary(summary, as_json: bool, by_prefix: bool = False) -> None:
    if as_json:
        click.echo(json.dumps(summary.__dict__, indent=2, sort_keys=True, default=str))
        return
    verb = "would delete" if summary.dry_run or summary.phase == "mark" else "deleted"
    count = summary.swept if summary.phase == "swept" else summary.num_deleted_objects
    click.echo(f"run {summary.run_id}: {verb} {count:,} objects ({summary.deleted_bytes:,} bytes); "
               f"kept {summary.kept_objects:,}, spared by the cutoff {summary.too_new:,}; "
               f"{summary.retained_commits} retained commits; cutoff {summary.cutoff_time}")
    if summary.spared_by_recheck:
        click.echo(f"{summary.spared_by_recheck:,} planned objects became reachable during the run and were kept")
    if summary.capped:
        click.echo(f"{summary.capped:,} more objects wait for the next run (gc.max_deletions_per_run)")
    if summary.backoffs:
        click.echo(f"the store throttled the sweep {summary.backoffs:,} times; it slowed down and completed")
    if summary.freeing:
        click.echo(describe_freed(summary.as_dict()))
    if describe_cache(summary.cache):
        click.echo(describe_cache(summary.cache))
    if describe_listing(summary.listing):
        click.echo(describe_listing(summary.listing))
    if by_prefix and (summary.by_path or summary.by_prefix):
        breakdown = table("path prefix" if summary.by_path else "prefix", "objects", "bytes")
        for prefix, (objects, size) in sorted((summary.by_path or summary.by_prefix).items()):
            breakdown.add_row(prefix, f"{objects:,}", f"{size:,}")
        breakdown.add_row("[b]total[/b]", f"{summary.num_deleted_objects:,}", f"{summary.deleted_bytes:,}")
        console.print(breakdown)


def _inventory(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and (why := inventory_url.problem(value)):
        raise click.BadParameter(why)
    return value


full_option = click.option(
    "--full", is_flag=True,
    help="List the whole namespace (or read --inventory) even when the previous run's state allows listing only "
         "what changed; the summary counts what the incremental runs since the last full one missed (should be 0).")
inventory_option = click.option(
    "--inventory", default=None, metavar="URL", callback=_inventory,
    help="Read the namespace's objects from this S3 Inventory report (its manifest.json, or the configuration's "
         "folder: the newest complete report), or for an Azure namespace this Azure Blob Inventory report (its "
         "<rule>-manifest.json, or https://<account>.blob.core.windows.net/<container>/<rule>: the rule's newest "
         "complete report), instead of listing them; objects newer than the report's time minus the cutoff are "
         "left for the next run. Default: gc.inventory's entry for the repository.")


_engine_warned: list[bool] = []


def _runner(runner: str | None, engine: str | None) -> str | None:
    """--runner, or the deprecated --engine (inprocess: threads) saying so once on stderr; None: the setting's."""
    if engine is None:
        return runner
    if not _engine_warned:
        _engine_warned.append(True)
        new = RUNNER_ALIASES[engine]
        click.echo(f"warning: --engine is deprecated: use --runner {new}"
                   + (" (inprocess is now threads)" if engine == "inprocess" else ""), err=True)
    if runner is not None and runner != RUNNER_ALIASES[engine]:
        raise click.UsageError(f"--runner {runner} and the deprecated --engine {engine} disagree: give --runner only")
    return RUNNER_ALIASES[engine]


def runner_option(help_text: str) -> Callable:
    """--runner threads|spark|auto, and --engine, its hidden deprecated alias; the command gets ``runner``."""
    def decorate(command: Callable) -> Callable:
        @functools.wraps(command)
        def with_runner(*args, runner: str | None, engine: str | None, **kwargs):
            return command(*args, runner=_runner(runner, engine), **kwargs)

        with_engine = click.option("--engine", type=click.Choice(list(RUNNER_ALIASES)), default=None, hidden=True,
                                   help="Deprecated: --runner (inprocess is threads).")(with_runner)
        return click.option("--runner", type=click.Choice(["threads", "spark", "auto"]), default=None,
                            help=help_text)(with_engine)
    return decorate


min_age_option = click.option("--min-age", default=None, help="Safety cutoff (e.g. 24h; 0s disables it). Default: "
                              "lakeFS's grace period, or LAKEFS_JANITOR_GC__MIN_AGE.")
now_option = click.option("--now", "now_text", default=None, help="Evaluate retention as of this ISO-8601 time.")
RUNNER_HELP = "Where the run runs: threads in this process, Spark's executors, or auto by the repository's size. " \
              "Default: gc.runner (auto)."


@click.group("gc")
def gc() -> None:
    """Committed garbage collection: retention from lakeFS's GC rules, mark, sweep."""


@gc.command("run")
@repository_argument
@min_age_option
@now_option
@runner_option(RUNNER_HELP)
@click.option("--dry-run", is_flag=True, help="Mark and write the plan; delete nothing.")
@click.option("--plan", "plan_id", default=None, help="Execute exactly this stored plan (a `gc plan` id) instead of "
                                                      "marking anew; the sweep's re-check still applies.")
@click.option("--no-cache", is_flag=True, help="Read every range and metarange, not what the mark cache remembers.")
@full_option
@inventory_option
@click.option("--json", "as_json", is_flag=True)
@pass_runtime
def run_cmd(rt: Runtime, repository: str, min_age: str | None, now_text: str | None, runner: str | None,
            dry_run: bool, plan_id: str | None, no_cache: bool, full: bool, inventory: str | None,
            as_json: bool) -> None:
    """Mark what retained commits and staged entries reach, then delete the rest (exit 0 only on success).
    A run lists only what changed since the previous one, and the whole namespace every gc.full_listing_every."""
    chosen = runner or rt.settings.gc.runner
    if plan_id and (dry_run or min_age or now_text or no_cache or inventory or full):
        raise click.UsageError("--plan executes a stored plan: --dry-run, --min-age, --now, --no-cache, --full and "
                               "--inventory do not apply")
    request = GCRequest(repository, "sweep" if plan_id else "run", mark_id=plan_id,
                        now=parse_now(now_text) if now_text else None, min_age=_min_age(min_age),
                        dry_run=dry_run, runner=chosen, cache=not no_cache, inventory=inventory, full=full)
    _print_summary(_go(rt, request, as_json), as_json)


@gc.command("plan")
@repository_argument
@min_age_option
@now_option
@click.option("--by-prefix", "by_prefix", type=click.IntRange(1, 32), is_flag=False, flag_value=2, default=None,
              metavar="[DEPTH]", help="Break the plan down by the path prefix (DEPTH folders, default 2) the "
                                      "objects had in lakeFS, like Hudi's `clean showpartitions`; reads the "
                                      "expired history to name them).")
@runner_option(RUNNER_HELP)
@full_option
@inventory_option
@click.option("--json", "as_json", is_flag=True)
@pass_runtime
def plan_cmd(rt: Runtime, repository: str, min_age: str | None, now_text: str | None, by_prefix: int | None,
             runner: str | None, full: bool, inventory: str | None, as_json: bool) -> None:
    """Mark only: store the plan (its id is the mark id for `gc sweep`) and show what it would delete."""
    request = GCRequest(repository, "plan", now=parse_now(now_text) if now_text else None, min_age=_min_age(min_age),
                        prefix_depth=by_prefix or 2, by_path=by_prefix is not None,
                        runner=runner or rt.settings.gc.runner, inventory=inventory, full=full)
    summary = _go(rt, request, as_json)
    _print_summary(summary, as_json, by_prefix is not None)
    if not as_json:
        click.echo(f"mark id: {summary.run_id}  (execute with: lakefs-janitor gc sweep lakefs://{repository} "
                   f"--mark-id {summary.run_id})")


@gc.command("sweep")
@repository_argument
@click.option("--mark-id", required=True, help="The plan to execute (printed by `gc plan`).")
@runner_option("The runner (a plan marked on one runner sweeps on the other). Default: gc.runner (auto).")
@click.option("--json", "as_json", is_flag=True)
@pass_runtime
def sweep_cmd(rt: Runtime, repository: str, mark_id: str, runner: str | None, as_json: bool) -> None:
    """Execute a stored, successful plan, after re-checking that no branch reaches what it deletes."""
    request = GCRequest(repository, "sweep", mark_id=mark_id, runner=runner or rt.settings.gc.runner)
    _print_summary(_go(rt, request, as_json), as_json)


@gc.group("rules")
def rules() -> None:
    """lakeFS's own GC rules of a repository (retention days per branch)."""


@rules.command("get")
@repository_argument
@pass_runtime
def rules_get(rt: Runtime, repository: str) -> None:
    doc = get_gc_rules(rt.lakefs, repository)
    if doc is None:
        raise click.ClickException(f"lakefs://{repository} has no GC rules")
    click.echo(json.dumps(doc, indent=2))


@rules.command("set")
@repository_argument
@click.option("-f", "--filename", "path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help='JSON or YAML: {"default_retention_days": 14, "branches": [{"branch_id": "main", '
                   '"retention_days": 21}]}')
@pass_runtime
def rules_set(rt: Runtime, repository: str, path: Path) -> None:
    document = load_yaml_file(path, "--filename")
    try:
        parsed = parse_gc_rules(document)  # validated before lakeFS is contacted
    except GCRulesError as exc:
        raise click.ClickException(str(exc)) from None
    set_gc_rules(rt.lakefs, repository, parsed)
    click.echo(json.dumps(parsed.model_dump(), indent=2))


@rules.command("clear")
@repository_argument
@pass_runtime
def rules_clear(rt: Runtime, repository: str) -> None:
    clear_gc_rules(rt.lakefs, repository)
    click.echo(f"GC rules of lakefs://{repository} cleared")


@gc.command("impact")
@repository_argument
@click.option("--branch", "branch_ids", multiple=True, help="Only these branches (repeatable). Default: all.")
@click.option("--min-age", default=None, help="Safety cutoff the freed objects must pass (default as for gc run).")
@click.option("--json", "as_json", is_flag=True)
@pass_runtime
def impact_cmd(rt: Runtime, repository: str, branch_ids: tuple[str, ...], min_age: str | None, as_json: bool) -> None:
    """For each branch, the objects and bytes only it keeps alive: what deleting it, then a GC run, would free."""
    try:
        impacts = repository_impact(rt.settings.gc, rt.settings.lakefs, repository,
                                    branch_ids=list(branch_ids) or None, min_age=_min_age(min_age))
    except GCError as exc:
        raise click.ClickException(f"impact of lakefs://{repository}: {exc}") from None
    if as_json:
        click.echo(json.dumps({b: {"objects": i.objects, "bytes": i.bytes} for b, i in impacts.items()}, indent=2))
        return
    rows = table("branch", "objects only it keeps", "bytes")
    for b, i in sorted(impacts.items()):
        rows.add_row(b, f"{i.objects:,}", f"{i.bytes:,}")
    console.print(rows)


@gc.command("doctor")
@repository_argument
@click.option("--json", "as_json", is_flag=True)
@pass_runtime
def doctor_cmd(rt: Runtime, repository: str, as_json: bool) -> None:
    """Whether what the GC deletes is really freed: the namespace's bucket or container settings (versioning,
    lifecycle rules, soft delete), read with the GC's credentials, and the rule to add when it is never freed."""
    try:
        verdict = doctor(rt.settings.gc, rt.settings.lakefs, repository)
    except GCError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(json.dumps(verdict.as_dict(), indent=2) if as_json else describe(verdict))


gc.add_command(policy)
gc.add_command(savepoint)
gc.add_command(show_cmd)
COMMANDS = (gc,)
