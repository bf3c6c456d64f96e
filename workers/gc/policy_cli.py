"""`gc policy get|set|clear`: the repository's cleaning policies (`set --dry-run`: what they would change)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import click

from spark_jobs.core.cleaning import CleaningPolicyError, parse_cleaning_policies
from workers.gc.cleaning_store import CLEANING
from workers.gc.history import GCRuns
from workers.gc.preview import policy_preview
from workers.gc.run import GCError
from workers.gc.savepoint_cli import cutoff
from workers.shared.cli_common import (
    DocumentCommands,
    Runtime,
    console,
    etag_options,
    load_yaml_file,
    pass_runtime,
    repository_argument,
    table,
)


@click.group("policy")
def policy() -> None:
    """Hudi-style cleaning policies of a repository: keep_commits, keep_versions, keep_for, savepoints."""


_CLEANING = DocumentCommands(CLEANING, locks=GCRuns.of, cleared="cleaning policies of lakefs://{repository} cleared")
_CLEANING.add_get_and_clear(policy)


@policy.command("set")
@repository_argument
@click.option("-f", "--file", "path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Cleaning policies as YAML or JSON: {policies: [{patterns, keep_commits, ...}]}.")
@etag_options
@click.option("--dry-run", is_flag=True, help="Change nothing: show what the next run would delete, and keep, in "
                                              "addition to what it does under the stored policies, by path prefix.")
@click.option("--depth", default=2, show_default=True, type=click.IntRange(1, 32),
              help="Folders of the --dry-run breakdown.")
@click.option("--min-age", default=None, help="With --dry-run: the safety cutoff of the next run (default as for "
                                              "gc run).")
@click.option("--json", "as_json", is_flag=True, help="With --dry-run: the breakdown as JSON.")
@pass_runtime
def policy_set(rt: Runtime, repository: str, path: Path, force: bool, if_match: str | None, dry_run: bool,
               depth: int, min_age: str | None, as_json: bool) -> None:
    document = load_yaml_file(path, "--file")
    try:
        policies = parse_cleaning_policies(document)  # validated before lakeFS is contacted
    except CleaningPolicyError as exc:
        raise click.ClickException(f"{path}: invalid cleaning policies:\n{exc}") from None
    if dry_run:
        _print_effect(rt, repository, policies, depth=depth, min_age=cutoff(min_age), as_json=as_json)
        return
    _CLEANING.write(rt, repository, policies, force=force, if_match=if_match)


def _print_effect(rt: Runtime, repository: str, policies, *, depth: int, min_age: timedelta | None,
                  as_json: bool) -> None:
    try:
        effect = policy_preview(rt.settings.gc, rt.settings.lakefs, repository, policies=policies, depth=depth,
                                min_age=min_age)
    except GCError as exc:
        raise click.ClickException(f"preview of lakefs://{repository}: {exc}") from None
    document = effect.document()
    if as_json:
        click.echo(json.dumps(document, indent=2, sort_keys=True))
        return
    for title, key in (("the next run would delete in addition", "delete_in_addition"),
                       ("the next run would keep in addition", "keep_in_addition")):
        total = document[f"{key}_total"]
        click.echo(f"{title}: {total['objects']:,} objects, {total['bytes']:,} bytes")
        if document[key]:
            rows = table("path prefix", "objects", "bytes")
            for prefix, row in document[key].items():
                rows.add_row(prefix, f"{row['objects']:,}", f"{row['bytes']:,}")
            console.print(rows)
    click.echo(f"(the next run deletes {effect.deleted_now:,} objects under the stored policies, "
               f"{effect.deleted_then:,} under these; nothing was changed)")
