"""`gc show`: a repository's past GC runs (a table that fits 100 columns), and one run by prefix with every branch's
oldest retained commit."""

from __future__ import annotations

import json

import click

from spark_jobs.core.freeing import Verdict, describe
from spark_jobs.core.report import describe_cache, describe_listing
from workers.gc.history import GCRuns
from workers.gc.preview import run_breakdown
from workers.gc.run import GCError, api_config, storage_config
from workers.shared.cli_common import Runtime, console, pass_runtime, table
from workers.shared.uris import URIError, parse_repository_uri


@click.command("show")
@click.argument("target", metavar="lakefs://REPOSITORY | RUN_ID")
@click.argument("run_id", required=False, metavar="[RUN_ID]")
@click.option("--by-prefix", "by_prefix", type=click.IntRange(1, 32), is_flag=False, flag_value=2, default=None,
              metavar="[DEPTH]", help="One run: deleted and failed per path prefix (DEPTH folders, default 2), from "
                                      "the run's report (Hudi's `clean showpartitions`).")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 1000))
@click.option("--json", "as_json", is_flag=True)
@pass_runtime
def show_cmd(rt: Runtime, target: str, run_id: str | None, by_prefix: int | None, limit: int, as_json: bool) -> None:
    """Past GC runs of the repository, newest first; with a RUN_ID and --by-prefix, what that run did by prefix."""
    runs = GCRuns.of(rt.services)
    if target.startswith("lakefs://"):
        try:
            repository = parse_repository_uri(target).repository_id
        except URIError as exc:
            raise click.BadParameter(str(exc), param_hint="lakefs://REPOSITORY") from None
    elif run_id is not None:
        raise click.UsageError("give the repository first: gc show lakefs://REPOSITORY RUN_ID")
    else:
        run_id, repository = target, runs.repository_of(target)
        if repository is None:
            raise click.ClickException(f"no recorded GC run {target!r}; name its repository: gc show "
                                       f"lakefs://REPOSITORY {target} --by-prefix")
    if by_prefix is not None or run_id is not None:
        if run_id is None:
            raise click.UsageError("--by-prefix shows one run: gc show lakefs://REPOSITORY RUN_ID --by-prefix")
        _show_run(rt, repository, run_id, by_prefix or 2, as_json)
        return
    history = runs.history(repository, limit)
    state, holder = runs.lease_state(repository)
    if as_json:
        click.echo(json.dumps(history, indent=2))
        return
    if state == "running":
        click.echo(f"running now: {holder.describe() if holder else 'a run'}")
    elif state == "died" and holder is not None:
        click.echo(f"died: the run of {holder.describe()} stopped renewing its lease before it ended (killed, out "
                   "of memory, or its host went away); the next run reports it and finishes its work")
    if not history:
        click.echo(f"no GC run of lakefs://{repository} is recorded")
        return
    # Ten columns in 100: one space between them, the run's full time is in its id and --json, bytes in units
    rows = table("run", "started", "mode", "ok", "policy", "oldest retained", "deleted", "bytes", "cached", "secs")
    rows.padding = (0, 0)
    # A run id is what `gc show RUN_ID` and `gc sweep --mark-id` take: whole on one line, the other cells wrap
    run_ids = [str(r.get("run_id", "-")) for r in history]
    rows.columns[0].no_wrap = True
    rows.columns[0].min_width = max(map(len, run_ids))
    for r in history:
        oldest = _oldest_cell(r.get("oldest_retained") or {})
        rows.add_row(str(r.get("run_id", "-")), str(r.get("started_at", ""))[5:16].replace("T", " "),
                     _mode_cell(r), "yes" if r.get("success") else f"no: {r.get('reason', '')}",
                     _policies_cell(r.get("policies") or []), oldest or "-", _deleted_cell(r),
                     _bytes_cell(r), _cache_cell(r.get("cache") or {}), f"{r.get('seconds', 0):.1f}")
    # a pipe gets 100 columns too (cells wrap past that), not the 200 other output gets
    console.print(rows, width=min(console.width, 100) if not console.is_terminal else None)
    swept = next((r for r in history if r.get("phase") == "swept" and r.get("freeing")), None)
    if swept is not None:
        click.echo(f"last sweep ({swept.get('run_id')}): {describe_freed(swept)}")


LISTING_SHORT = {"full": "full", "incremental": "incr", "inventory": "inv"}


def _mode_cell(record: dict) -> str:
    """The mode and how the mark found the objects: run/incr, run/full, plan/inv (details: `gc show ... RUN_ID`)."""
    kind = LISTING_SHORT.get((record.get("listing") or {}).get("kind", ""))
    return f"{record.get('mode', '')}/{kind}" if kind else record.get("mode", "")


def _policies_cell(policies: list[str]) -> str:
    joined = ", ".join(policies)
    return joined if len(joined) <= 16 else f"{len(policies)} policies"


def _oldest_cell(oldest: dict[str, str]) -> str:
    """One branch's oldest retained commit, or how many branches: the list of a repository with many branches would
    make every row wider than a terminal (all of them: `gc show RUN_ID`, `--json`)."""
    if len(oldest) == 1:
        ((branch_id, commit_id),) = oldest.items()
        return f"{branch_id}@{commit_id[:8]}" if len(branch_id) <= 24 else f"1 branch @{commit_id[:8]}"
    return f"{len(oldest)} branches" if oldest else ""


def _show_run(rt: Runtime, repository: str, run_id: str, depth: int, as_json: bool) -> None:
    try:
        found = run_breakdown(api_config(rt.settings.lakefs), storage_config(rt.settings.gc),
                              repository_id=repository, run_id=run_id, depth=depth)
    except GCError as exc:
        raise click.ClickException(f"run {run_id} of lakefs://{repository}: {exc}") from None
    if as_json:
        click.echo(json.dumps({"run_id": run_id, "phase": found.summary.phase, "exact": found.exact,
                               "note": found.note, "by_prefix": found.rows,
                               "oldest_retained": found.summary.oldest_retained}, indent=2, sort_keys=True))
        return
    rows = table("path prefix", "planned", "deleted", "failed", "bytes deleted")
    for prefix, row in sorted(found.rows.items()):
        rows.add_row(prefix, f"{row['planned']:,}", f"{row['deleted']:,}", f"{row['failed']:,}",
                     f"{row['bytes_deleted']:,}")
    total = {k: sum(r[k] for r in found.rows.values()) for k in ("planned", "deleted", "failed", "bytes_deleted")}
    rows.add_row("[b]total[/b]", *(f"{total[k]:,}" for k in ("planned", "deleted", "failed", "bytes_deleted")))
    click.echo(f"run {run_id} of lakefs://{repository} ({found.summary.phase}, {found.summary.start_time[:16]})")
    console.print(rows)
    if found.summary.freeing:
        click.echo(describe_freed(found.summary.as_dict()))
    if describe_cache(found.summary.cache):
        click.echo(describe_cache(found.summary.cache))
    if describe_listing(found.summary.listing):
        click.echo(describe_listing(found.summary.listing))
    if found.note:
        click.echo(found.note)
    if found.summary.oldest_retained:
        click.echo("oldest retained commit of each branch:")
        for branch_id, commit_id in sorted(found.summary.oldest_retained.items()):
            click.echo(f"  {branch_id}@{commit_id}")


def describe_freed(record: dict) -> str:
    """The bytes a sweep deleted (a summary or history record), freed vs still billed, and the store's verdict
    (``gc doctor``'s)."""
    verdict = Verdict.from_dict(record["freeing"])
    until = f" until {record['pending_until'][:19]}" if record.get("pending_until") else \
        "" if verdict.state == "unknown" else " with no end"
    purged = f"; {record['purged_versions']:,} noncurrent versions purged ({record.get('purged_bytes', 0):,} " \
             "bytes)" if record.get("purged_versions") else ""
    pending = f"; still billed{until}: {record['bytes_pending']:,} bytes" if record.get("bytes_pending") else ""
    return f"freed {record.get('bytes_freed', 0):,} bytes{pending}{purged}\n{describe(verdict)}"


def _cache_cell(cache: dict) -> str:
    """Ranges the mark took from its cache, of those it needed (details: `gc show lakefs://REPO RUN_ID`)."""
    if cache.get("state") in (None, "off"):
        return cache.get("state") or "-"
    cached, read = cache.get("ranges_cached", 0), cache.get("ranges_read", 0)
    return f"{cached:,}/{cached + read:,}" + (" (ignored)" if cache["state"] == "ignored" else "")


def _planned(r: dict) -> bool:
    return r.get("phase") != "swept"  # a plan, a dry run or a failed run: nothing was deleted


def _deleted_cell(r: dict) -> str:
    if r.get("success") is False and not r.get("swept"):
        return "-"
    return f"{r.get('num_deleted_objects', 0):,} planned" if _planned(r) else f"{r.get('swept', 0):,}"


def _bytes_cell(r: dict) -> str:
    """The bytes deleted (a plan's: to delete, its row's mode says so) in units: 118.0 GB."""
    if r.get("success") is False and not r.get("swept"):
        return "-"
    size, unit = float(r.get("deleted_bytes", 0)), "B"
    for unit in ("B", "kB", "MB", "GB", "TB"):  # noqa: B007 (the unit the loop stops at is the one shown)
        if size < 1000 or unit == "TB":
            break
        size /= 1000
    return f"{size:,.0f} B" if unit == "B" else f"{size:,.1f} {unit}"
