"""The mark: what a GC run may delete, written as a plan before anything is deleted.

retained commits -> unique metaranges -> unique ranges -> kept addresses (+ every staged address), subtracted
from the namespace's data objects older than the safety cutoff. The committed metadata is read through a
``mark_source.Source`` (the files, or the mark cache in front of them), whose per-unit steps run wherever the
Runner puts them (threads in process, executors on Spark); the decisions over it are written once, here, and
run on the driver / calling thread, with the pure functions of ``spark_jobs.core``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from concurrent.futures import Future, wait
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from spark_jobs.core import kept_index, sstable
from spark_jobs.core.cleaning import Scope, ScopedRetention
from spark_jobs.core.incremental import State, Unit, metarange_indices, units_of
from spark_jobs.core.mark import kept_addresses, range_commits, versions_kept
from spark_jobs.core.plan import StoredObject, by_path_prefix, plan_deletions
from spark_jobs.core.report import Summary
from spark_jobs.core.retention import commit_from_api, oldest_retained
from spark_jobs.engine.listing.inventory import read_inventory
from spark_jobs.engine.plan import datasets as datasets
from spark_jobs.engine.reach import mark_cache
from spark_jobs.engine.reach.lean_mark import lean_mark
from spark_jobs.engine.reach.mark_source import Cached, Files, Source, Span
from spark_jobs.engine.request import RunRequest
from spark_jobs.engine.runtime.context import GCError, JobConfig, OpenContext, Progress
from spark_jobs.engine.runtime.lakefs_api import LakeFSApi, LakeFSApiError
from spark_jobs.engine.runtime.parallel import Runner, in_background, wants_datasets
from spark_jobs.engine.runtime.repository import Graph, read_uncommitted
from spark_jobs.engine.state import incremental, report
from spark_jobs.engine.stores import Namespace, StorageError


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
    cache_written: Future | None = None
    try:
        min_age = request.min_age if request.min_age is not None else timedelta(
            seconds=api.gc_grace_period_seconds())
        cutoff = request.now - min_age
        retention = graph.retention(request.now)
        bound = retention.bound()
        metaranges = sorted({m for c in bound.commits if (m := graph.metarange_of(c))})
        progress("commits", len(bound.commits))
        seconds = {"commits": time.monotonic() - started}
        t = time.monotonic()
        if graph.uncommitted_locations is None:  # asking now, after the commits, would reopen the race
            raise GCError("the mark needs lakeFS's staged entries asked for before its commits (a Graph from "
                          "load_graph)", "bad-arguments")
        previous = incremental.load(ctx.ns, repository_id=request.repository_id, namespace=graph.namespace,
                                    now=request.now, every=request.full_listing_every,
                                    asked_full=request.listing == "full", key_prefixes=tuple(ctx.prefixes))
        # Without path policies and keep_versions an entry's fate is its range's: a kept index then says what is
        # still reached, and only what changed is read
        unscoped = not retention.by_path and not any(p.keep_versions for p in graph.cleaning)
        if datasets.eligible(request, retention, graph, full_listing=not previous.incremental):
            files = Files(runner=runner, open_context=config.open, partitions=request.range_partitions, driver=ctx)
            range_ids = in_key_order(files.spans(metaranges))
            if wants_datasets(runner, ranges=len(range_ids), cache=request.cache):
                if preload is not None:
                    preload.settle()
                seconds["metaranges"] = time.monotonic() - t
                return _mark_datasets(runner, ctx, config, request=request, graph=graph, retention=retention,
                                      metaranges=metaranges, range_ids=range_ids, previous=previous, cutoff=cutoff,
                                      seconds=seconds, progress=progress, record=record)
        index, lean_refused = None, None
        # (--no-cache reads every file: the kept index, a cache too, is not used either)
        if previous.incremental and previous.state is not None and previous.state.index_sha256 and unscoped \
                and request.cache:
            index, lean_refused = incremental.read_index(ctx.ns, previous.state)
        pending_index = None  # the kept index this run builds (an Arrow table)
        lean = None
        if index is not None:
            if preload is not None:
                preload.cancel()
            seconds["index read"] = time.monotonic() - t
            uncommitted = read_uncommitted(ctx.ns, graph.uncommitted_locations)
            seconds["uncommitted"] = time.monotonic() - t - seconds["index read"]
            try:
                lean = lean_mark(previous.state, index, runner=runner, config=config, ctx=ctx,
                                 metaranges=metaranges, uncommitted=uncommitted,
                                 range_partitions=request.range_partitions,
                                 address_partitions=request.address_partitions)
            except kept_index.IndexError_ as exc:  # a block of the index damaged, or it disagrees with the ranges
                lean_refused, preload = f"its kept index: {exc}", None
        if lean is not None:
            found = Reached(lean.committed, lean.range_ids, lean.units)
            by_versions: set[str] = set()
            kept = found.kept | uncommitted
            listed, listing, checked = lean.objects, lean.listing, set()
            cache_state = {"state": "unused", "reason": "an incremental run with a kept index reads only the "
                                                        "ranges that changed"}
            retained_ranges = lean.metaranges
            seconds["mark"] = time.monotonic() - t
        else:
            loaded = mark_cache.load(ctx.ns, repository_id=request.repository_id, namespace=graph.namespace,
                                     preload=preload) if request.cache else None
            files = Files(runner=runner, open_context=config.open, partitions=request.range_partitions, driver=ctx)
            cached = None if loaded is None else Cached(loaded.memory, files)
            source: Source = files if cached is None else cached
            found = reached(source, graph, retention=retention, metaranges=metaranges)
            progress("ranges", len(found.range_ids))
            # through the source, so that the cache remembers the ranges only keep_versions reads
            by_versions = versions(source, graph, heads=graph.heads) if graph.cleaning else set()
            uncommitted = read_uncommitted(ctx.ns, graph.uncommitted_locations)
            kept = found.kept | by_versions | uncommitted
            # the keys an incremental run asks for (a full run counts what they would have missed)
            checked = incremental.would_check(previous.state, source, found.units) if previous.state else set()
            retained_ranges = {}
            if record and not request.dry_run and unscoped and cached is not None:
                # the next run's kept index, from the cache's blocks (each distinct block's keys once, times the
                # number of live ranges that hold it)
                pending_index = kept_index.build(cached.key_counts(found.range_ids))
                retained_ranges = {m: source.range_ids_of(m) for m in metaranges}
            seconds["mark"] = time.monotonic() - t
            cache_state = {"state": "off"} if cached is None else {**loaded.stats, **cached.stats()}
            # What the files held is known now and nothing below changes it: the cache is written while the
            # namespace is listed (on a large store, the listing's time hides the write's)
            cache_written = in_background("gc-cache-write", write_cache, ctx.ns, cached, loaded, request=request,
                                          graph=graph) if record and cached is not None else None
            t = time.monotonic()
            if previous.incremental and previous.state is not None:
                changed = incremental.find_changed(previous.state, runner=runner, config=config, ctx=ctx,
                                                   checked=checked, kept=kept, partitions=request.address_partitions)
                listed, listing = changed.objects, changed.listing
                if lean_refused:
                    listing["kept_index_refused"] = lean_refused
            elif request.inventory:
                manifest, listed = read_inventory(request.inventory, ctx.ns)
                # what the report calls old enough was old enough when S3 wrote it (newer objects are not in it)
                report_time = datetime.fromtimestamp(manifest.created, UTC)
                cutoff = min(cutoff, report_time - min_age)
                listing = {"kind": "inventory", "report": manifest.url, "report_time": report_time.isoformat(),
                           "files": len(manifest.files), "objects": len(listed)}
            else:
                units = ctx.ns.list_units()
                listed = runner.map_units(units, incremental.unit_list, config.open,
                                          partitions=request.address_partitions)
                listing = {"kind": "full", "slices": len(units) - 1, "objects": len(listed)}  # slices + the root
        range_ids = found.range_ids
        decision = retention.union() if retention.by_path else bound
        if not previous.incremental:
            listing["reason"] = previous.full_because
        progress("objects listed", len(listed))
        seconds["list"] = time.monotonic() - t
        t = time.monotonic()
        # The subtraction and its safety rules (data keys only, nothing newer than the cutoff) are core's.
        deleted, plan = plan_deletions(listed, kept, cutoff.timestamp(), prefix_depth=request.prefix_depth)
        if not previous.incremental and previous.state is not None:
            # what the incremental rule would have missed since the previous run: the proof it holds (0)
            listing["missed_by_incremental"] = incremental.missed(deleted, previous.state, checked)
        paths = paths_of(api, ctx, graph, keys={o.key for o in deleted}) if request.by_path else {}
        seconds["plan"] = time.monotonic() - t
        summary = Summary(
            run_id=request.run_id, repository_id=request.repository_id, success=True,
            start_time=request.now.isoformat(), cutoff_time=cutoff.isoformat(), num_deleted_objects=plan.deleted,
            deleted_bytes=plan.deleted_bytes, retained_commits=len(decision.commits),
            # an incremental run does not see every kept object: it counts the keys kept (the index's, or the set's)
            kept_objects=plan.kept if listing["kind"] != "incremental" else (
                lean.index_keys + len(uncommitted - found.kept) if lean is not None else len(kept)),
            candidates=plan.candidates, too_new=plan.too_new, dry_run=request.dry_run, by_prefix=plan.by_prefix,
            by_path=by_path_prefix(deleted, paths, request.prefix_depth) if request.by_path else {},
            oldest_retained=oldest_retained(graph.commits, graph.heads, decision.commits),
            policies=["gc rules", *(p.id for p in graph.cleaning)], marked=True, runner=request.runner,
            storage_namespace=graph.namespace, local_root=graph.local_root, min_age_seconds=min_age.total_seconds(), commits=len(graph.commits),
            lakefs_retained_commits=len(graph.lakefs_retained), metaranges=len(metaranges), ranges=len(range_ids),
            uncommitted_addresses=len(uncommitted), seconds={k: round(v, 3) for k, v in seconds.items()},
            cache=cache_state, listing=listing)
        if cache_written is not None:
            how = cache_written.result()
            summary.cache.update({"written": how is not None, **({"write": how} if how else {})})
        if record:
            if not request.dry_run:  # written first: a plan is whole only once its summary is
                incremental.write_pending(ctx.ns, request.run_id, State(
                    repository_id=request.repository_id, namespace=graph.namespace, run_id=request.run_id,
                    horizon=cutoff, listed_at=request.now,
                    full_listing_at=(previous.state.full_listing_at if previous.incremental and previous.state
                                     else request.now),
                    units=found.units, versions=frozenset(by_versions - found.kept),
                    staged=frozenset(uncommitted - found.kept - by_versions), key_prefixes=tuple(ctx.prefixes),
                    index_keys=lean.index_keys if lean is not None else 0 if pending_index is None else len(
                        pending_index),
                    # a run that brought the stored index up to date names its base, and leaves a new delta
                    index_sha256=previous.state.index_sha256 if lean is not None else None,
                    index_slot=previous.state.index_slot if lean is not None else "",
                    index_parts=previous.state.index_parts if lean is not None else (),
                    index_run=previous.state.index_run if lean is not None else "",
                    metaranges=metarange_indices(retained_ranges, sorted({r for r, _ in found.units}))
                    if pending_index is not None or lean is not None else ()),
                    index_parts=None if pending_index is None else incremental.write_index_parts(
                        ctx.ns, request.run_id, pending_index, bits=kept_index.part_bits(len(pending_index))),
                    delta=None if lean is None else kept_index.encode_delta(lean.delta))
            report.write_plan(ctx.ns, summary, deleted=deleted, ranges=range_ids, retained=decision.commits)
        return Marked(summary, graph, decision.commits, dict(decision.why), cutoff=cutoff.timestamp(),
                      ranges=range_ids, deleted=deleted, kept=kept, listed=listed, uncommitted=uncommitted)
    except (StorageError, LakeFSApiError) as exc:
        raise GCError(str(exc), getattr(exc, "reason", "storage")) from exc
    except ValueError as exc:  # SSTableError: a corrupt range or metarange
        raise GCError(f"committed metadata is unreadable: {exc}", "corrupt-metadata") from exc
    finally:
        if cache_written is not None:  # a run that failed after the mark still leaves it whole
            wait([cache_written])
        ctx.close()


def _mark_datasets(runner: Runner, ctx: OpenContext, config: JobConfig, *, request: RunRequest, graph: Graph,
                   retention: ScopedRetention, metaranges: list[str], range_ids: list[str],
                   previous: incremental.Previous, cutoff: datetime, seconds: dict[str, float], progress: Progress,
                   record: bool) -> Marked:
    backend = runner.datasets(config, partitions=request.range_partitions)
    summary, view = datasets.mark_datasets(backend, ctx, config, request=request, graph=graph, retention=retention,
                                           metaranges=metaranges, range_ids=range_ids, previous=previous,
                                           cutoff=cutoff, seconds=seconds, progress=progress, record=record)
    decision = retention.bound()
    return Marked(summary, graph, decision.commits, dict(decision.why), cutoff=cutoff.timestamp(), ranges=range_ids,
                  view=view)


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


def in_key_order(spans: Iterable[Span]) -> list[str]:
    """The distinct ranges of ``spans``, in key order: the versions of one key span then fall in one partition,
    which decodes the data blocks they share once (OpenContext.seen_blocks)."""
    return list(dict.fromkeys(range_id for _, range_id in sorted(spans)))


@dataclass
class Reached:
    """What the retained commits keep: the addresses, the ranges read, and the (range, scope) units that keep
    them (an incremental run's state)."""

    kept: set[str]
    range_ids: list[str]
    units: frozenset[Unit]


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


def paths_of(api: LakeFSApi, ctx: OpenContext, graph: Graph, *, keys: set[str]) -> dict[str, str]:
    """The path some commit gave each of ``keys`` (Hudi's partitions for `--by-prefix`): every commit of every
    branch's whole log (merged lines too) and every commit the mark already knows, each distinct range read once."""
    import pyarrow as pa  # noqa: PLC0415 - only `--by-path` naming reads ranges as Arrow here
    import pyarrow.compute as pc  # noqa: PLC0415

    from spark_jobs.core import range_arrow  # noqa: PLC0415

    if not keys:
        return {}
    known = dict(graph.commits)
    for head in sorted(set(graph.heads.values())):
        for body in api.log(ctx.config.repository_id, head):
            known.setdefault(body["id"], commit_from_api(body))
    metaranges = {c.meta_range_id for c in known.values() if c.meta_range_id}
    ranges = sorted({r for m in sorted(metaranges) for r in sstable.metarange_range_ids(ctx.read_metarange(m))})
    paths: dict[str, str] = {}
    asked = pa.array(sorted(keys), pa.string())
    for range_id in ranges:
        batch = range_arrow.range_batch(ctx.read_range(range_id))
        found = range_arrow.relative_keys(batch, ctx.prefixes)
        hit = pc.is_in(found, value_set=asked)  # the few entries asked for, out of the range's thousands
        for path, key in zip(pc.filter(batch.column(0), hit).to_pylist(), pc.filter(found, hit).to_pylist(),
                             strict=True):
            if key not in paths:
                paths[key] = path.decode(errors="replace")
        if len(paths) == len(keys):
            break
    return paths


def plan_fingerprint(summary: Summary, deleted: list[str]) -> dict:
    """What both runners must agree on: the deleted set and the decision's fields (not the run id, the runner,
    nor timings)."""
    skip = {"run_id", "runner", "seconds", "by_path", "start_time", "cutoff_time", "cache", "listing", "plan_parts"}
    fields = summary.as_dict()
    return {"deleted": sorted(deleted), **{k: fields[k] for k in sorted(fields) if k not in skip}}
