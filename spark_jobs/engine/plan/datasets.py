"""A run's mark as datasets (an entry's fate is its range's, with path policies its range's in its path's scope,
with keep_versions also its rank among its path's versions): reach ∪ versions ∪ staged, subtracted from the listing
(the whole namespace, an inventory report, or on a daily run what changed: ``changed_since``) under the safety
rules, the plan written in parts (named by path with --by-path), the kept index and state for the next run. The
driver holds the commit graph, range ids, slice names and counters; every key stays in the backend's datasets
(``engine/backends/``: Arrow in process, Spark on executors)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from spark_jobs.core import kept_index
from spark_jobs.core.cleaning import CleaningPolicy, Scope, ScopedRetention
from spark_jobs.core.columns import PLAN_SCHEMA
from spark_jobs.core.incremental import (
    CARRIED_STAGED_MOST,
    State,
    Unit,
    carried_staged,
    dead_ranges,
    metarange_indices,
    units_of,
)
from spark_jobs.core.mark import (
    MOST_MASKED_POLICIES,
    first_positions,
    range_commits,
    scope_of_mask,
    unit_alive,
    version_lines,
)
from spark_jobs.core.plan import PlanSummary, StoredObject
from spark_jobs.core.report import Summary
from spark_jobs.core.retention import oldest_retained
from spark_jobs.engine.listing.incremental import recent_units
from spark_jobs.engine.plan import units
from spark_jobs.engine.reach.mark_source import Files
from spark_jobs.engine.reach.retained import in_key_order
from spark_jobs.engine.request import RunRequest
from spark_jobs.engine.runtime.context import JobConfig, OpenContext, Progress
from spark_jobs.engine.runtime.repository import Graph, uncommitted_files
from spark_jobs.engine.state import incremental, report

if TYPE_CHECKING:
    from spark_jobs.engine.listing.inventory import Report


class Backend(Protocol):
    """What a dataset backend does (``backends.arrow.ArrowBackend``, ``backends.spark.SparkBackend``), step by step:
    reach and staged (``reach/``), listing and listed_objects (``listing/``), judge, write_plan, missed, slices_of
    and objects (``plan/``), write_index (``state/``); the rest are set operations. Datasets are its own type."""

    name: str

    def reach(self, range_ids: list[str]) -> Any: ...
    def reach_scoped(self, range_ids: list[str], path_policies: tuple[CleaningPolicy, ...]) -> Any: ...
    def scope_pairs(self, scoped: Any) -> list[tuple[int, int]]: ...
    def kept_of(self, scoped: Any, live: list[tuple[int, int]]) -> Any: ...
    def versions(self, version_units: list[str], lines: tuple[tuple[CleaningPolicy, ...], ...], *,
                 reached: Any = None) -> Any: ...
    def by_path(self, deleted: Any, path_units: list[str], depth: int) -> dict[str, list[int]]: ...
    def staged(self, files: list[str]) -> Any: ...
    def listing(self, slices: list[str], asked: Any = None) -> Any: ...
    def checked(self, dead: list[str], carried: list[str]) -> Any: ...
    def asked(self, checked: Any, *, kept: list, skip: list[str]) -> tuple[Any, int]: ...
    def inventory(self, report: Report) -> Any: ...
    def judge(self, listed: Any, kept: list, *, cutoff: float, prefix_depth: int) -> tuple[Any, PlanSummary]: ...
    def write_plan(self, deleted: Any, run_id: str) -> list[dict[str, int]]: ...
    def write_index(self, reached: Any, run_id: str, bits: int) -> list[dict]: ...
    def keys_not_in(self, keys: Any, other: Any, *, most: int) -> set[str] | None: ...
    def missed(self, deleted: Any, *, recent: set[str], dead: list[str], carried: list[str]) -> int: ...
    def slices_of(self, deleted: Any) -> list[str]: ...
    def objects(self, deleted: Any) -> list[StoredObject]: ...
    def from_keys(self, keys: list[str]) -> Any: ...
    def union(self, datasets: list) -> Any: ...
    def count_distinct(self, keys: Any) -> int: ...
    def count(self, dataset: Any) -> int: ...
    def key_set(self, keys: Any) -> set[str]: ...
    def listed_objects(self, listed: Any) -> list[StoredObject]: ...
    def release(self, *datasets: Any) -> None: ...


def eligible(graph: Graph) -> bool:
    """Whether the dataset steps can make this run's plan (full or incremental): path policies few enough for a
    scope mask."""
    return len(path_policies(graph)) <= MOST_MASKED_POLICIES


@dataclass(frozen=True)
class Cleaning:
    """What the cleaning policies need of the metaranges, read on the driver's side before the plan: with path
    policies, the retained commits holding each range; with keep_versions, each matching branch's policies (a line)
    and the units of its line's ranges (``units.version_unit``: a range, its line, where the line first holds it);
    with --by-path, the history's ranges in id order (``units.scoped_unit``: a range and its ordinal)."""

    holding: Mapping[str, Iterable[str]] = field(default_factory=dict)
    lines: tuple[tuple[CleaningPolicy, ...], ...] = ()
    version_units: tuple[str, ...] = ()
    path_units: tuple[str, ...] | None = None


def plan_inputs(files: Files, *, graph: Graph, retention: ScopedRetention,
                metaranges: list[str]) -> tuple[list[str], Cleaning]:
    """The retained ranges in key order, and what the cleaning policies need (``Cleaning``): the metaranges of the
    retained commits and of the keep_versions lines, each read once (by the runner), ranges and commits only."""
    lines = version_lines(commits=graph.commits, branch_heads=graph.heads, policies=graph.cleaning)
    if not retention.by_path and not lines:
        return in_key_order(files.spans(metaranges)), Cleaning()
    line_metaranges = {m for _, line in lines for c in line if (m := graph.commits[c].meta_range_id)}
    members = files.members(sorted(set(metaranges) | line_metaranges))
    retained = set(metaranges)
    ranges_of: dict[str, list[str]] = {}
    for metarange_id, _, range_id in members:
        ranges_of.setdefault(metarange_id, []).append(range_id)
    kept = [m for m in members if m[0] in retained]
    range_ids = in_key_order({(key, range_id) for _, key, range_id in kept})
    holding = range_commits(kept, retention.bound().commits, metarange_of=graph.metarange_of) \
        if retention.by_path else {}
    version_units = tuple(units.version_unit(at_line, at, range_id) for at_line, (_, line) in enumerate(lines)
                          for range_id, at in first_positions(line, commits=graph.commits,
                                                              range_ids_of=ranges_of.__getitem__).items())
    return range_ids, Cleaning(holding, tuple(matching for matching, _ in lines), version_units)


def path_units(files: Files, history: list[str]) -> tuple[str, ...]:
    """``Cleaning.path_units`` of the history's metaranges (``by_path.history_metaranges``), read by the runner."""
    return tuple(units.scoped_unit(i, r) for i, r in enumerate(sorted({r for _, _, r in files.members(history)})))


def path_policies(graph: Graph) -> tuple[CleaningPolicy, ...]:
    return tuple(p for p in graph.cleaning if p.paths)


def scoped_reach(backend: Backend, range_ids: list[str], *, retention: ScopedRetention, graph: Graph,
                 holding: Mapping[str, Iterable[str]]) -> tuple[Any, frozenset[Unit]]:
    """What the retained commits keep under path policies: every entry with its range and path scope, the distinct
    (range, scope) pairs judged on the driver as the object path judges them (``core.mark.unit_alive``: a commit
    the scope retains holds the range; ``holding``: the retained commits holding each range), the kept keys those
    of the live pairs. Also the live pairs as the state's units."""
    policies = path_policies(graph)
    scoped = backend.reach_scoped(range_ids, policies)
    retention.of(Scope())  # the branch-level decision is always part of the record (as on the object path)
    live = [(at, mask) for at, mask in backend.scope_pairs(scoped)
            if unit_alive(range_ids[at], scope_of_mask(mask, policies), range_commits=holding, retention=retention)]
    return backend.kept_of(scoped, live), units_of((range_ids[at], scope_of_mask(mask, policies))
                                                   for at, mask in live)


class View:
    """What the mark saw, kept in the backend's datasets; Python objects only for a caller that asks (an impact
    view, a test): ``engine.mark.Marked`` asks lazily."""

    def __init__(self, backend: Backend, *, deleted: Any, reached: Any, staged: Any, listed: Any,
                 written: tuple[JobConfig, Summary] | None) -> None:
        self.backend, self._deleted, self._reached, self._staged, self._listed = backend, deleted, reached, staged, \
            listed
        self.written = written

    def deleted(self) -> list[StoredObject]:
        if self.written is not None:  # what the plan holds, whatever happened to the store since
            config, summary = self.written
            ctx = config.open()
            try:
                keys, sizes = report.read_deleted_list(ctx.ns, summary)
            finally:
                ctx.close()
            return [StoredObject(k, z, 0.0) for k, z in zip(keys, sizes, strict=True)]
        return self.backend.objects(self._deleted)

    def kept(self) -> set[str]:
        return self.backend.key_set(self._reached) | self.uncommitted()

    def uncommitted(self) -> set[str]:
        return self.backend.key_set(self._staged)

    def listed(self) -> list[StoredObject]:
        return self.backend.listed_objects(self._listed)


def mark_datasets(backend: Backend, ctx: OpenContext, config: JobConfig, *, request: RunRequest, graph: Graph,
                  retention: ScopedRetention, metaranges: list[str], range_ids: list[str],
                  previous: incremental.Previous, cutoff: datetime, min_age: timedelta, seconds: dict[str, float],
                  progress: Progress, record: bool, inventory: Report | None = None,
                  cleaning: Cleaning = Cleaning(), index_refused: str | None = None) -> tuple[Summary, View]:
    """The plan of a run (written unless ``record`` is false) and its summary: a daily one when ``previous`` is
    incremental (``changed_since``), else a full one. ``inventory``: an inventory report whose manifest the driver
    read, listed instead of the namespace (``cutoff`` already the report's,
    ``Report.cutoff``): its data files are read where the backend reads units. ``cleaning``: what path policies
    and keep_versions need (``plan_inputs``)."""
    t = time.monotonic()
    if retention.by_path:
        reached, live_units = scoped_reach(backend, range_ids, retention=retention, graph=graph,
                                           holding=cleaning.holding)
    else:
        reached, live_units = backend.reach(range_ids), units_of((r, ()) for r in range_ids)
    by_versions = backend.versions(list(cleaning.version_units), cleaning.lines, reached=reached) \
        if cleaning.lines else None
    # the keys only keep_versions keeps (most versions kept are the heads' entries, reached already): when few, they
    # alone join the reached keys (the judge then holds each kept key about once), and the state carries them
    only_versions = None if by_versions is None else backend.keys_not_in(by_versions, reached,
                                                                         most=CARRIED_STAGED_MOST)
    if by_versions is None:
        committed = reached
    elif only_versions is None:
        committed = backend.union([reached, by_versions])
    else:
        committed = backend.union([reached, backend.from_keys(sorted(only_versions))])
    versions_carried, versions_over = (frozenset(), False) if not cleaning.lines else carried_staged(only_versions)
    del by_versions  # (its keys are in committed, or the few only it keeps are)
    progress("ranges", len(range_ids))
    staged = backend.staged(uncommitted_files(ctx.ns, graph.uncommitted_locations or []))
    seconds["mark"] = time.monotonic() - t
    t = time.monotonic()
    state = previous.state
    daily = previous.incremental and state is not None
    # (an inventory report is for full runs: a daily run lists what changed, as on the object path)
    slices = ctx.ns.list_units() if daily or inventory is None else []
    if daily:
        recent, dead = recent_units(slices, state.horizon), dead_ranges(state.units, live_units)
        listed, asked = changed_since(backend, state, recent=recent, kept=[committed, staged], dead=dead)
    elif inventory is None:
        listed = backend.listing(slices)
    else:
        listed = backend.inventory(inventory)
    seconds["list"] = time.monotonic() - t
    t = time.monotonic()
    deleted, plan = backend.judge(listed, [committed, staged], cutoff=cutoff.timestamp(),
                                  prefix_depth=request.prefix_depth)
    if daily:
        found = backend.count(asked[0])
        listing = {"kind": "incremental", "previous_run": state.run_id, "since": state.horizon.isoformat(),
                   "slices": len(recent) - 1, "slices_total": len(slices) - 1,
                   "objects": backend.count(listed) - found, "checked": asked[1], "found_without_listing": found,
                   "ranges_dead": len(dead), "plan": backend.name}
    elif inventory is None:
        listing = {"kind": "full", "slices": len(slices) - 1, "objects": backend.count(listed), "plan": backend.name}
    else:  # where its data files were read: by executors (spark), by the driver's threads (arrow)
        listing = {**inventory.record(backend.count(listed)), "plan": backend.name,
                   "read_on": "executors" if backend.name == "spark" else "threads"}
    progress("objects listed", plan.candidates)
    if previous.full_because:
        listing["reason"] = previous.full_because
    if index_refused:  # why a daily run that had a kept index did not bring it up to date (the lean mark)
        listing["kept_index_refused"] = index_refused
    if state is not None and not daily:
        # what the incremental rule would have missed since the previous run: the proof it holds (0). The keys it
        # would have checked (the dead ranges' and those the state carries) are the backend's to hold or stream
        recent = set(recent_units(backend.slices_of(deleted), state.horizon))
        listing["missed_by_incremental"] = backend.missed(
            deleted, recent=recent, dead=dead_ranges(state.units, live_units),
            carried=sorted(state.carried()))
    # --by-path: the plan's objects per logical path prefix, named from the history's ranges where they are
    by_path = backend.by_path(deleted, list(cleaning.path_units), request.prefix_depth) \
        if request.by_path and cleaning.path_units is not None else {}
    seconds["plan"] = time.monotonic() - t
    decision = retention.union() if retention.by_path else retention.bound()
    summary = Summary(
        run_id=request.run_id, repository_id=request.repository_id, success=True,
        start_time=request.now.isoformat(), cutoff_time=cutoff.isoformat(), num_deleted_objects=plan.deleted,
        deleted_bytes=plan.deleted_bytes, retained_commits=len(decision.commits),
        # a daily run does not list every kept object: it counts the keys kept (as the object path does)
        kept_objects=backend.count_distinct(backend.union([committed, staged])) if daily else plan.kept,
        candidates=plan.candidates, too_new=plan.too_new, dry_run=request.dry_run, by_prefix=plan.by_prefix,
        by_path=by_path,
        oldest_retained=oldest_retained(graph.commits, graph.heads, decision.commits),
        policies=["gc rules", *(p.id for p in graph.cleaning)], marked=True, runner=request.runner,
        storage_namespace=graph.namespace, local_root=graph.local_root, min_age_seconds=min_age.total_seconds(),
        commits=len(graph.commits), lakefs_retained_commits=len(graph.lakefs_retained),
        metaranges=len(metaranges), ranges=len(range_ids), uncommitted_addresses=0,
        cache={"state": "unused", "reason": f"the {backend.name} dataset plan reads every range it needs"}
        if request.cache else {"state": "off"},
        listing=listing)
    # what only staged entries keep, carried by the state up to a bound (past it, the next run lists everything)
    only_staged, staged_over = carried_staged(backend.keys_not_in(staged, committed, most=CARRIED_STAGED_MOST))
    summary.uncommitted_addresses = backend.count_distinct(staged)
    if record:
        t = time.monotonic()
        # an empty plan is one empty part: a plan in parts always names its parts
        parts = backend.write_plan(deleted, request.run_id) or [
            units.write_part(ctx, request.run_id, part=0, table=PLAN_SCHEMA.empty_table())]
        summary.plan_parts = [[p["part"], p["rows"]] for p in parts]
        if not request.dry_run:
            # the next run's kept index (as the mark cache's run builds it; --no-cache uses neither; path policies
            # neither: an entry's fate is not its range's), in parts written where the keys are (an upper bound of
            # its keys: the entries reached)
            index = backend.write_index(reached, request.run_id, kept_index.part_bits(backend.count(reached))) \
                if request.cache and not retention.by_path and not cleaning.lines else None
            incremental.write_pending(ctx.ns, request.run_id, State(
                repository_id=request.repository_id, namespace=graph.namespace, run_id=request.run_id,
                horizon=cutoff, listed_at=request.now,
                full_listing_at=state.full_listing_at if daily else request.now,
                units=live_units, versions=versions_carried, versions_over=versions_over,
                staged=only_staged, staged_over=staged_over, key_prefixes=tuple(ctx.prefixes),
                index_keys=0 if index is None else sum(p["keys"] for p in index),
                metaranges=metarange_indices(retained_ranges(ctx, metaranges), sorted(range_ids))
                if index is not None else ()),
                index_parts=index)
        seconds["write"] = time.monotonic() - t
        summary.seconds = {k: round(v, 3) for k, v in seconds.items()}
        report.write_plan_parts(ctx.ns, summary, ranges=range_ids, retained=decision.commits)
    summary.seconds = {k: round(v, 3) for k, v in seconds.items()}
    return summary, View(backend, deleted=deleted, reached=committed, staged=staged, listed=listed,
                         written=(config, summary) if record else None)


def changed_since(backend: Backend, state: State, *, recent: list[str], kept: list,
                  dead: list[str]) -> tuple[Any, tuple[Any, int]]:
    """A daily run's listing (``listing/incremental.py``'s rule on datasets): the slices that can hold an object
    written since ``state``'s horizon and the root (``recent``: ``recent_units``) listed, and of the keys that may
    have become garbage (the entries of the ranges whose units died, ``dead``, and the keys the state carries) those
    not kept now, outside those slices, asked for. The listing (the recent slices' and the asked-for objects), and
    the objects asked for with their number."""
    checked = backend.checked(dead, sorted(state.carried()))
    asked = backend.asked(checked, kept=kept, skip=recent)
    return backend.listing(recent, asked[0]), asked


def retained_ranges(ctx: OpenContext, metaranges: list[str]) -> dict[str, list[str]]:
    """Each retained metarange's ranges (read on the driver: they grow with ranges, not objects)."""
    from spark_jobs.core import sstable  # noqa: PLC0415

    return {m: sstable.metarange_range_ids(ctx.read_metarange(m)) for m in metaranges}
