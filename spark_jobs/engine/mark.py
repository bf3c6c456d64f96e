"""The mark: what a GC run may delete, written as a plan before anything is deleted.

retained commits -> unique metaranges -> unique ranges -> kept addresses (+ every staged address), subtracted from
the namespace's data objects older than the safety cutoff. ``mark`` dispatches over named steps, each in its package:
reach (``engine/reach/``: what the retained commits keep, from the previous run's kept index, ``lean_mark``, or from
the committed metadata, ``mark_source``: the files or the mark cache in front of them); listing (``engine/listing/``:
incremental, an inventory report, or the full namespace); judge (``core.plan``: the listing minus what is kept,
under the safety rules); write (``engine/state/``: the plan, its summary, the state the next run starts from). A full
run the dataset steps can plan (``plan.datasets.eligible``) goes through the runner's backend (``engine/backends/``).
Per-unit steps run where the Runner puts them; the decisions are made once, on the driver, by ``spark_jobs.core``.
"""
from __future__ import annotations

import time
from concurrent.futures import Future, wait
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any

from spark_jobs.core import kept_index
from spark_jobs.core.cleaning import ScopedRetention
from spark_jobs.core.incremental import State, carried_staged, metarange_indices
from spark_jobs.core.plan import PlanSummary, StoredObject, by_path_prefix, plan_deletions
from spark_jobs.core.report import Summary
from spark_jobs.core.retention import oldest_retained
from spark_jobs.engine.listing.full import list_namespace
from spark_jobs.engine.listing.incremental import find_changed, missed, would_check
from spark_jobs.engine.listing.inventory import inventory_listing, open_report
from spark_jobs.engine.plan import datasets
from spark_jobs.engine.plan.by_path import history_metaranges, paths_of
from spark_jobs.engine.reach import lean_mark as lean_marks
from spark_jobs.engine.reach import mark_cache
from spark_jobs.engine.reach.lean_mark import LeanMark, lean_mark
from spark_jobs.engine.reach.mark_source import Cached, Files, Source
from spark_jobs.engine.reach.retained import Reached, reached, versions, write_cache
from spark_jobs.engine.request import RunRequest
from spark_jobs.engine.runtime.context import GCError, JobConfig, OpenContext, Progress
from spark_jobs.engine.runtime.lakefs_api import LakeFSApi, LakeFSApiError
from spark_jobs.engine.runtime.parallel import Runner, in_background, wants_datasets
from spark_jobs.engine.runtime.repository import Graph, read_few_uncommitted, read_uncommitted
from spark_jobs.engine.state import incremental, report
from spark_jobs.engine.stores import StorageError


class Marked:
    """A mark's plan, and what it saw (the impact view and the sweep's re-check use it). A mark made by the dataset
    steps keeps its objects in the backend (``view``): they become Python objects only when asked for."""

    def __init__(self, summary: Summary, graph: Graph, retained: frozenset[str], why: dict[str, str], *,
                 cutoff: float, ranges: list[str], deleted: list[StoredObject] | None = None,
                 kept: set[str] | None = None, listed: list[StoredObject] | None = None,
                 uncommitted: set[str] | None = None, view: Any = None) -> None:
        self.summary, self.graph, self.retained, self.why = summary, graph, retained, why
        self.cutoff, self.ranges, self.view = cutoff, ranges, view
        self._deleted, self._kept, self._listed = deleted, kept, listed
        self._uncommitted = uncommitted

    @property
    def deleted(self) -> list[StoredObject]:
        if self._deleted is None:
            self._deleted = self.view.deleted()
        return self._deleted

    @property
    def kept(self) -> set[str]:
        if self._kept is None:
            self._kept = self.view.kept()
        return self._kept

    @property
    def listed(self) -> list[StoredObject]:
        if self._listed is None:
            self._listed = self.view.listed()
        return self._listed

    @property
    def uncommitted(self) -> set[str]:
        if self._uncommitted is None:
            self._uncommitted = self.view.uncommitted() if self.view is not None else set()
        return self._uncommitted

    @property
    def lakefs_retained(self) -> frozenset[str]:
        """lakeFS's own retained set (``prepare_garbage_collection_commits``)."""
        return frozenset(self.graph.lakefs_retained)


def mark(api: LakeFSApi, runner: Runner, config: JobConfig, *, request: RunRequest, graph: Graph,
         progress: Progress = lambda phase, count: None, preload: mark_cache.Preload | None = None,
         record: bool = True) -> Marked:
    """Compute and write the plan (at <ns>/_lakefs/retention/gc/unified/<run_id>/; ``record=False``: write nothing,
    the mark cache included). ``request`` has its ``now`` and ``run_id`` set (``engine.run`` sets them).
    ``preload``: the mark cache and the namespace's ``_lakefs/`` listing, when the caller started reading them
    before loading the graph."""
    started = time.monotonic()
    ctx = config.open()
    reach: Reach | None = None
    try:
        run = _begin(api, runner, config, ctx, request=request, graph=graph, progress=progress, record=record,
                     started=started)
        planned = _dataset_plan_ranges(run)
        if planned is not None:
            if preload is not None:
                preload.settle()
            run.lap("metaranges", restart=False)
            return _mark_datasets(run, *planned)
        # choose the reach: the previous run's kept index when there is one to use, else the committed metadata
        index, refused = _usable_index(run)
        if index is not None:
            if preload is not None:
                preload.cancel()
                preload = None
            reach, refused = _reach_by_index(run, index)
        if reach is None:
            reach = _reach_by_metadata(run, preload)
        listed, listing = _list(run, reach, index_refused=refused)  # choose the listing kind
        deleted, plan = _judge(run, reach, listed, listing)
        summary = _summary(run, reach, plan, deleted=deleted, listing=listing)
        if reach.cache_written is not None:
            how = reach.cache_written.result()
            summary.cache.update({"written": how is not None, **({"write": how} if how else {})})
        decision = run.decision()
        if record:
            _write(run, reach, summary, deleted=deleted, decision_commits=decision.commits)
        return Marked(summary, graph, decision.commits, dict(decision.why), cutoff=run.cutoff.timestamp(),
                      ranges=reach.found.range_ids, deleted=deleted, kept=reach.kept, listed=listed,
                      uncommitted=reach.uncommitted)
    except (StorageError, LakeFSApiError) as exc:
        raise GCError(str(exc), getattr(exc, "reason", "storage")) from exc
    except ValueError as exc:  # SSTableError: a corrupt range or metarange
        raise GCError(f"committed metadata is unreadable: {exc}", "corrupt-metadata") from exc
    finally:
        if reach is not None and reach.cache_written is not None:  # a run that failed after the mark leaves it whole
            wait([reach.cache_written])
        ctx.close()


@dataclass
class MarkRun:
    """What every step of one mark reads: its inputs, the decisions made before any metadata is read (the cutoff,
    the retention, the retained metaranges, the previous run's state), and the seconds each step took."""

    api: LakeFSApi
    runner: Runner
    config: JobConfig
    ctx: OpenContext
    request: RunRequest
    graph: Graph
    progress: Progress
    record: bool
    min_age: timedelta
    cutoff: datetime  # an inventory report can move it earlier
    retention: ScopedRetention
    metaranges: list[str]
    previous: incremental.Previous
    seconds: dict[str, float]
    since: float  # when the step being timed started
    staged: set[str] | None = None  # the staged keys, when read for the lean mark (few enough to hold)
    index_refused: str | None = None  # why the lean mark was refused before choosing the plan

    @property
    def unscoped(self) -> bool:
        """No path policy, no keep_versions: an entry's fate is its range's (a kept index can say what is kept)."""
        return not self.retention.by_path and not any(p.keep_versions for p in self.graph.cleaning)

    def decision(self):
        """The commits retained and why: the union of every path scope's with path policies, else the bound's."""
        return self.retention.union() if self.retention.by_path else self.retention.bound()

    def lap(self, step: str, *, restart: bool = True) -> None:
        now = time.monotonic()
        self.seconds[step] = now - self.since
        if restart:
            self.since = now

    def files(self) -> Files:
        return Files(runner=self.runner, open_context=self.config.open, partitions=self.request.range_partitions,
                     driver=self.ctx)


def _begin(api: LakeFSApi, runner: Runner, config: JobConfig, ctx: OpenContext, *, request: RunRequest,
           graph: Graph, progress: Progress, record: bool, started: float) -> MarkRun:
    """The decisions made before reading any metadata: the cutoff, what the retention keeps, the previous run's
    state (and whether this run lists everything)."""
    min_age = request.min_age if request.min_age is not None else timedelta(seconds=api.gc_grace_period_seconds())
    retention = graph.retention(request.now)
    bound = retention.bound()
    metaranges = sorted({m for c in bound.commits if (m := graph.metarange_of(c))})
    progress("commits", len(bound.commits))
    seconds = {"commits": time.monotonic() - started}
    since = time.monotonic()
    if graph.uncommitted_locations is None:  # asking now, after the commits, would reopen the race
        raise GCError("the mark needs lakeFS's staged entries asked for before its commits (a Graph from "
                      "load_graph)", "bad-arguments")
    previous = incremental.load(ctx.ns, repository_id=request.repository_id, namespace=graph.namespace,
                                now=request.now, every=request.full_listing_every,
                                asked_full=request.listing == "full", key_prefixes=tuple(ctx.prefixes))
    return MarkRun(api, runner, config, ctx, request, graph, progress, record, min_age, request.now - min_age,
                   retention, metaranges, previous, seconds, since)


def _dataset_plan_ranges(run: MarkRun) -> tuple[list[str], datasets.Cleaning] | None:
    """The retained ranges in key order, and what the cleaning policies need, when the dataset steps plan this run
    (``datasets.eligible``, and a runner that wants them at this size); None: the mark goes through the steps
    below. A daily run that can bring the previous run's kept index up to date takes the lean mark instead: it
    reads only the ranges that changed."""
    if not datasets.eligible(run.graph):
        return None
    if _index_usable(run):
        # the lean mark holds the staged keys on the driver: only a few of them (past the bound the datasets take the
        # day, whose staged keys stay on executors)
        most = lean_marks.STAGED_MOST
        run.staged = read_few_uncommitted(run.ctx.ns, run.graph.uncommitted_locations or [], most=most)
        if run.staged is not None:
            return None
        run.index_refused = f"more than {most:,} staged entries: the lean mark would hold their keys on the driver"
    files = run.files()
    range_ids, cleaning = datasets.plan_inputs(files, graph=run.graph, retention=run.retention,
                                               metaranges=run.metaranges)
    if not wants_datasets(run.runner, ranges=len(range_ids), cache=run.request.cache,
                          entries=lambda: files.entries(run.metaranges, range_ids)):
        return None
    if run.request.by_path:  # the history's ranges, to name the plan's objects by their paths
        history = history_metaranges(run.api, run.request.repository_id, run.graph)
        cleaning = replace(cleaning, path_units=datasets.path_units(files, history))
    return range_ids, cleaning


def _mark_datasets(run: MarkRun, range_ids: list[str], cleaning: datasets.Cleaning) -> Marked:
    """A run planned by the runner's dataset backend (``plan.datasets``): its keys never become Python objects. A
    full run with an inventory report: the driver reads its manifest (the run's cutoff moves to the report's), and
    the backend its data files."""
    report = None
    # only its manifest is read here: each data file is a unit the backend reads (a daily run lists what changed)
    if run.request.inventory and not run.previous.incremental:
        report = open_report(run.request.inventory, run.ctx.ns)
        run.cutoff = report.cutoff(run.cutoff, run.min_age)
    backend = run.runner.datasets(run.config, partitions=run.request.range_partitions)
    summary, view = datasets.mark_datasets(backend, run.ctx, run.config, request=run.request, graph=run.graph,
                                           retention=run.retention, metaranges=run.metaranges, range_ids=range_ids,
                                           previous=run.previous, cutoff=run.cutoff, min_age=run.min_age,
                                           seconds=run.seconds, progress=run.progress, record=run.record,
                                           inventory=report, cleaning=cleaning, index_refused=run.index_refused)
    decision = run.decision()
    return Marked(summary, run.graph, decision.commits, dict(decision.why), cutoff=run.cutoff.timestamp(),
                  ranges=range_ids, view=view)


@dataclass
class Reach:
    """What the reach step found: the committed keys (and the ranges and units holding them), those keep_versions
    and the staged entries keep, and what the later steps need of how it was found."""

    found: Reached
    uncommitted: set[str]
    by_versions: set[str] = field(default_factory=set)
    checked: set[str] = field(default_factory=set)  # the keys an incremental run would ask for one by one
    cache: dict[str, Any] = field(default_factory=dict)  # the record's ``cache``
    retained_ranges: dict[str, list[str]] = field(default_factory=dict)  # retained metarange -> its ranges
    lean: LeanMark | None = None  # a reach from the kept index (it listed the recent slices too)
    pending_index: Any = None  # the kept index this run builds (an Arrow table)
    cache_written: Future | None = None

    @cached_property
    def kept(self) -> set[str]:  # (built once: millions of keys on a large lake)
        return self.found.kept | self.by_versions | self.uncommitted


def _usable_index(run: MarkRun) -> tuple[incremental.StoredIndex | None, str | None]:
    """The previous run's kept index when this run may use it (incremental, unscoped, with the cache: the index is
    a cache too, --no-cache reads every file), or why it is refused."""
    return incremental.read_index(run.ctx.ns, run.previous.state) if _index_usable(run) else (None, None)


def _index_usable(run: MarkRun) -> bool:
    previous = run.previous
    return bool(previous.incremental and previous.state is not None and previous.state.index_sha256
                and run.unscoped and run.request.cache)


def _reach_by_index(run: MarkRun, index: incremental.StoredIndex) -> tuple[Reach | None, str | None]:
    """The reach of a daily run: the kept index brought up to date with the ranges that changed (``lean_mark``),
    which lists the recent slices too. None, and why, when the index is damaged or disagrees with the ranges."""
    run.lap("index read", restart=False)
    uncommitted = run.staged if run.staged is not None else read_uncommitted(run.ctx.ns,
                                                                             run.graph.uncommitted_locations)
    run.seconds["uncommitted"] = time.monotonic() - run.since - run.seconds["index read"]
    try:
        lean = lean_mark(run.previous.state, index, runner=run.runner, config=run.config, ctx=run.ctx,
                         metaranges=run.metaranges, uncommitted=uncommitted,
                         range_partitions=run.request.range_partitions,
                         address_partitions=run.request.address_partitions,
                         driver_ranges=run.request.driver_ranges)
    except kept_index.IndexError_ as exc:  # a block of the index damaged, or it disagrees with the ranges
        return None, f"its kept index: {exc}"
    run.lap("mark", restart=False)  # (the listing's seconds count from the index read: lean_mark listed too)
    unused = {"state": "unused", "reason": "an incremental run with a kept index reads only the ranges that changed"}
    return Reach(Reached(lean.committed, lean.range_ids, lean.units), uncommitted, lean=lean, cache=unused,
                 retained_ranges=lean.metaranges), None


def _reach_by_metadata(run: MarkRun, preload: mark_cache.Preload | None) -> Reach:
    """The reach from the committed metadata: the files, or the mark cache in front of them (written back in the
    background while the namespace is listed), what keep_versions keeps, the staged entries."""
    request, graph, ctx = run.request, run.graph, run.ctx
    loaded = mark_cache.load(ctx.ns, repository_id=request.repository_id, namespace=graph.namespace,
                             preload=preload) if request.cache else None
    files = run.files()
    cached = None if loaded is None else Cached(loaded.memory, files)
    source: Source = files if cached is None else cached
    found = reached(source, graph, retention=run.retention, metaranges=run.metaranges)
    run.progress("ranges", len(found.range_ids))
    # through the source, so that the cache remembers the ranges only keep_versions reads
    by_versions = versions(source, graph, heads=graph.heads) if graph.cleaning else set()
    reach = Reach(found, read_uncommitted(ctx.ns, graph.uncommitted_locations), by_versions=by_versions)
    previous = run.previous.state
    # the keys an incremental run asks for (a full run counts what they would have missed)
    reach.checked = would_check(previous, source, found.units) if previous else set()
    if run.record and not request.dry_run and run.unscoped and cached is not None:
        # the next run's kept index, from the cache's blocks (each distinct block's keys once, times the number of
        # live ranges that hold it)
        reach.pending_index = kept_index.build(cached.key_counts(found.range_ids))
        reach.retained_ranges = {m: source.range_ids_of(m) for m in run.metaranges}
    run.lap("mark", restart=False)
    reach.cache = {"state": "off"} if cached is None else {**loaded.stats, **cached.stats()}
    # What the files held is known now and nothing below changes it: the cache is written while the namespace is
    # listed (on a large store, the listing's time hides the write's)
    reach.cache_written = in_background("gc-cache-write", write_cache, ctx.ns, cached, loaded, request=request,
                                        graph=graph) if run.record and cached is not None else None
    run.since = time.monotonic()
    return reach


def _list(run: MarkRun, reach: Reach, *, index_refused: str | None) -> tuple[list[StoredObject], dict]:
    """What the store holds, by kind: what the kept index's reach listed itself; incremental (the recent slices,
    and the keys that may have become garbage asked for one by one); an inventory report (which may move the
    cutoff earlier); or the whole namespace."""
    request, previous = run.request, run.previous
    if reach.lean is not None:
        listed, listing = reach.lean.objects, reach.lean.listing
    elif previous.incremental and previous.state is not None:
        changed = find_changed(previous.state, runner=run.runner, config=run.config, ctx=run.ctx, checked=reach.checked,
                               kept=reach.kept, partitions=request.address_partitions)
        listed, listing = changed.objects, changed.listing
        if index_refused:
            listing["kept_index_refused"] = index_refused
    elif request.inventory:
        listed, listing, run.cutoff = inventory_listing(request.inventory, run.ctx.ns, cutoff=run.cutoff,
                                                        min_age=run.min_age)
    else:
        listed, listing = list_namespace(run.runner, run.config, run.ctx, partitions=request.address_partitions)
    if not previous.incremental:
        listing["reason"] = previous.full_because
    run.progress("objects listed", len(listed))
    run.lap("list")
    return listed, listing


def _judge(run: MarkRun, reach: Reach, listed: list[StoredObject],
           listing: dict) -> tuple[list[StoredObject], PlanSummary]:
    """The subtraction and its safety rules (data keys only, nothing newer than the cutoff: ``core.plan``), and on
    a full run after an incremental state, what the incremental rule would have missed (the proof it holds: 0)."""
    deleted, plan = plan_deletions(listed, reach.kept, run.cutoff.timestamp(), prefix_depth=run.request.prefix_depth)
    previous = run.previous
    if not previous.incremental and previous.state is not None:
        listing["missed_by_incremental"] = missed(deleted, previous.state, reach.checked)
    return deleted, plan


def _summary(run: MarkRun, reach: Reach, plan: PlanSummary, *, deleted: list[StoredObject],
             listing: dict) -> Summary:
    """The run's record (summary.json) of the plan."""
    request, graph = run.request, run.graph
    paths = paths_of(run.api, run.ctx, graph, keys={o.key for o in deleted}) if request.by_path else {}
    run.lap("plan")
    decision = run.decision()
    lean = reach.lean
    return Summary(
        run_id=request.run_id, repository_id=request.repository_id, success=True,
        start_time=request.now.isoformat(), cutoff_time=run.cutoff.isoformat(), num_deleted_objects=plan.deleted,
        deleted_bytes=plan.deleted_bytes, retained_commits=len(decision.commits),
        # an incremental run does not see every kept object: it counts the keys kept (the index's, or the set's)
        kept_objects=plan.kept if listing["kind"] != "incremental" else (
            lean.index_keys + len(reach.uncommitted - reach.found.kept) if lean is not None else len(reach.kept)),
        candidates=plan.candidates, too_new=plan.too_new, dry_run=request.dry_run, by_prefix=plan.by_prefix,
        by_path=by_path_prefix(deleted, paths, request.prefix_depth) if request.by_path else {},
        oldest_retained=oldest_retained(graph.commits, graph.heads, decision.commits),
        policies=["gc rules", *(p.id for p in graph.cleaning)], marked=True, runner=request.runner,
        storage_namespace=graph.namespace, local_root=graph.local_root, min_age_seconds=run.min_age.total_seconds(),
        commits=len(graph.commits), lakefs_retained_commits=len(graph.lakefs_retained),
        metaranges=len(run.metaranges), ranges=len(reach.found.range_ids),
        uncommitted_addresses=len(reach.uncommitted), seconds={k: round(v, 3) for k, v in run.seconds.items()},
        cache=reach.cache, listing=listing)


def _write(run: MarkRun, reach: Reach, summary: Summary, *, deleted: list[StoredObject],
           decision_commits: frozenset[str]) -> None:
    """The plan, and before it (a plan is whole only once its summary is) the state its sweep stores for the next
    run: the units reached, what only keep_versions and staged entries keep, and the kept index (a new base in
    parts, or the delta that brought the stored one up to date)."""
    request, graph, ctx, found, lean = run.request, run.graph, run.ctx, reach.found, reach.lean
    if not request.dry_run:
        previous, pending_index = run.previous, reach.pending_index
        stored = previous.state
        staged, staged_over = carried_staged(reach.uncommitted - found.kept - reach.by_versions)
        versions, versions_over = carried_staged(reach.by_versions - found.kept)
        incremental.write_pending(ctx.ns, request.run_id, State(
            repository_id=request.repository_id, namespace=graph.namespace, run_id=request.run_id,
            horizon=run.cutoff, listed_at=request.now,
            full_listing_at=stored.full_listing_at if previous.incremental and stored else request.now,
            units=found.units, versions=versions, versions_over=versions_over,
            staged=staged, staged_over=staged_over, key_prefixes=tuple(ctx.prefixes),
            index_keys=lean.index_keys if lean is not None else 0 if pending_index is None else len(pending_index),
            # a run that brought the stored index up to date names its base, and leaves a new delta
            index_sha256=stored.index_sha256 if lean is not None else None,
            index_slot=stored.index_slot if lean is not None else "",
            index_parts=stored.index_parts if lean is not None else (),
            index_run=stored.index_run if lean is not None else "",
            metaranges=metarange_indices(reach.retained_ranges, sorted({r for r, _ in found.units}))
            if pending_index is not None or lean is not None else ()),
            index_parts=None if pending_index is None else incremental.write_index_parts(
                ctx.ns, request.run_id, pending_index, bits=kept_index.part_bits(len(pending_index))),
            delta=None if lean is None else kept_index.encode_delta(lean.delta))
    report.write_plan(ctx.ns, summary, deleted=deleted, ranges=found.range_ids, retained=decision_commits)

