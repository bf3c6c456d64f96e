"""What the retained commits keep, decided over a ``mark_source.Source`` (the metadata files, or the mark cache in
front of them): the ranges reached in key order, the addresses their entries point at (with path policies, only
those whose path's scope retains a commit holding the range), what keep_versions keeps, and the mark cache written
back with what the run used."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from spark_jobs.core.cleaning import Scope, ScopedRetention
from spark_jobs.core.incremental import Unit, units_of
from spark_jobs.core.mark import kept_addresses, range_commits, versions_kept
from spark_jobs.engine.reach import mark_cache
from spark_jobs.engine.reach.mark_source import Cached, Source, Span
from spark_jobs.engine.request import RunRequest
from spark_jobs.engine.runtime.repository import Graph
from spark_jobs.engine.stores import Namespace


@dataclass
class Reached:
    """What the retained commits keep: the addresses, the ranges read, and the (range, scope) units that keep
    them (an incremental run's state)."""

    kept: set[str]
    range_ids: list[str]
    units: frozenset[Unit]


def in_key_order(spans: Iterable[Span]) -> list[str]:
    """The distinct ranges of ``spans``, in key order: the versions of one key span then fall in one partition,
    which decodes the data blocks they share once (OpenContext.seen_blocks)."""
    return list(dict.fromkeys(range_id for _, range_id in sorted(spans)))


def reached(source: Source, graph: Graph, *, retention: ScopedRetention, metaranges: list[str]) -> Reached:
    """What the retained commits keep (``metaranges``: those of ``retention.bound()``). Without path policies
    every entry of a retained commit's ranges is kept (each distinct data block decoded once); with them, each
    entry only when its path's scope retains a commit holding the range."""
    if not retention.by_path:
        range_ids = in_key_order(source.spans(metaranges))
        return Reached(source.addresses(range_ids), range_ids, units_of((r, ()) for r in range_ids))
    members = source.members(metaranges)
    range_ids = in_key_order({(key, range_id) for _, key, range_id in members})
    holding = range_commits(members, retention.bound().commits, metarange_of=graph.metarange_of)
    entries = source.scoped(range_ids, tuple(p for p in graph.cleaning if p.paths))
    retention.of(Scope())  # the branch-level decision is always part of the record
    live: dict[tuple[str, Scope], bool] = {}
    kept = kept_addresses(entries, holding, retention, live=live)
    return Reached(kept, range_ids, units_of(unit for unit, alive in live.items() if alive))


def versions(source: Source, graph: Graph, *, heads: dict[str, str]) -> set[str]:
    """What keep_versions keeps on the branches ``heads`` names (a branch's history walked newest first, one
    commit at a time, on the driver)."""
    return versions_kept(commits=graph.commits, branch_heads=heads, policies=graph.cleaning,
                         range_ids_of=source.range_ids_of, entries_of=source.entries_of)


def write_cache(ns: Namespace, cached: Cached, loaded: mark_cache.Loaded, *, request: RunRequest,
                graph: Graph) -> str | None:
    """Store what this run used in the mark cache: how ("appended", "compacted", "unchanged"), or None when it
    failed (that costs the next run its reads, not this run)."""
    try:
        return mark_cache.save(ns, cached.to_keep(), loaded, repository_id=request.repository_id,
                               namespace=graph.namespace, run_id=request.run_id)
    except Exception as exc:  # noqa: BLE001 - an optimisation only: whatever failed, the run's plan stands
        mark_cache.log.warning("GC mark cache of %s not written: %s: %s", request.repository_id,
                               type(exc).__name__, exc)
        return None
