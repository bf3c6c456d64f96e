"""The mark: what a GC run may delete, written as a plan before anything is deleted.

retained commits -> unique metaranges -> unique ranges -> kept addresses (+ every staged address), subtracted
from the namespace's data objects older than the safety cutoff. The per-unit steps (``unit_*``) run wherever the
Runner puts them (threads in process, executors on Spark); the rest runs on the driver / calling thread. The
decisions are the pure functions of ``spark_jobs.core``.
"""

from __future__ import annotations

import csv
import io
import json
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, wait
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from spark_jobs.core import sstable
from spark_jobs.core.addresses import FULL, RELATIVE, local_root_from, relative_key
from spark_jobs.core.cleaning import METADATA_KEY as CLEANING_KEY
from spark_jobs.core.cleaning import (
    CleaningPolicy,
    CleaningPolicyError,
    Scope,
    ScopedRetention,
    kept_addresses,
    parse_cleaning_policies,
    range_commits,
    savepoint_tags,
    scope_of,
    versions_kept,
)
from spark_jobs.core.mark import keys_in_range
from spark_jobs.core.plan import StoredObject, by_path_prefix, plan_deletions
from spark_jobs.core.report import Summary
from spark_jobs.core.retention import DAY, Commit, GCRules, commit_from_api, oldest_retained, read_line
from spark_jobs.engine import mark_cache, mark_source, report
from spark_jobs.engine.lakefs_api import LakeFSApi, LakeFSApiConfig, LakeFSApiError
from spark_jobs.engine.parallel import Runner, in_background
from spark_jobs.engine.storage import Namespace, StorageConfig, StorageError

Progress = Callable[[str, int], None]  # (phase, count so far)


class GCError(RuntimeError):
    """A run that must not go on; nothing was deleted by the failing phase. ``reason`` labels the failure metric."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class JobConfig:
    """Everything an executor needs to rebuild its clients (picklable, no sockets)."""

    api: LakeFSApiConfig
    storage: StorageConfig
    repository_id: str
    metadata_from: str = "storage"  # or "lakefs": read ranges through lakeFS's metadata-object endpoint

    def open(self) -> OpenContext:
        return OpenContext(self)


class OpenContext:
    def __init__(self, config: JobConfig) -> None:
        self.config = config
        self.ns = Namespace(config.storage)
        self._api: LakeFSApi | None = None
        self.prefixes = self.ns.prefixes
        self.seen_blocks: set[bytes] = set()  # data blocks this partition decoded (see sstable.range_addresses)
        # metarange data blocks this partition decoded, with their spans (see sstable.metarange_spans)
        self.metarange_blocks: dict[bytes, list[tuple[bytes, str]]] = {}

    @property
    def api(self) -> LakeFSApi:
        if self._api is None:
            self._api = LakeFSApi(self.config.api)
        return self._api

    def read_metadata(self, kind: str, object_id: str) -> bytes:
        if self.config.metadata_from == "lakefs":
            return self.api.metadata_object(self.config.repository_id, kind, object_id)
        return self.ns.read(f"_lakefs/{object_id}")

    def read_metarange(self, metarange_id: str) -> bytes:
        return self.read_metadata("meta_range", metarange_id)

    def read_range(self, range_id: str) -> bytes:
        return self.read_metadata("range", range_id)

    def close(self) -> None:
        if self._api is not None:
            self._api.close()


# Per-unit steps (run on executors or threads).
def unit_metarange_ranges(ctx: OpenContext, metarange_id: str) -> list[str]:
    return sstable.metarange_range_ids(ctx.read_metarange(metarange_id))


def unit_metarange_spans(ctx: OpenContext, metarange_id: str) -> list[tuple[bytes, str]]:
    """(first key, range id) of every range a metarange lists."""
    return sstable.metarange_spans(ctx.read_metarange(metarange_id), seen_blocks=ctx.metarange_blocks)


def unit_range_addresses(ctx: OpenContext, range_id: str) -> list[str]:
    return sorted(keys_in_range(ctx.read_range(range_id), ctx.prefixes, ctx.seen_blocks))


def unit_metarange_members(ctx: OpenContext, metarange_id: str) -> list[tuple[str, bytes, str]]:
    """(metarange id, first key, range id) of every range a metarange lists."""
    return [(metarange_id, k, r) for k, r in sstable.metarange_spans(ctx.read_metarange(metarange_id),
                                                                      seen_blocks=ctx.metarange_blocks)]


def unit_range_scoped(ctx: OpenContext, unit: tuple[str, tuple[CleaningPolicy, ...]]) \
        -> list[tuple[str, Scope, tuple[str, ...]]]:
    """A range's addresses grouped by the scope of their paths (which path policies cover them):
    (range id, scope, addresses)."""
    range_id, path_policies = unit
    by_scope: dict[Scope, set[str]] = {}
    for path, address, kind, _ in sstable.range_entries(ctx.read_range(range_id)):
        key = relative_key(address, kind, ctx.prefixes)
        if key is not None:
            by_scope.setdefault(scope_of(path.decode(errors="replace"), path_policies), set()).add(key)
    return [(range_id, scope, tuple(sorted(keys))) for scope, keys in by_scope.items()]


def unit_list(ctx: OpenContext, unit: str) -> list[StoredObject]:
    return ctx.ns.list_unit(unit)


@dataclass
class Graph:
    """What the mark knows of the repository's history."""

    namespace: str
    local_root: str | None
    rules: GCRules
    heads: dict[str, str]
    commits: dict[str, Commit]
    lakefs_retained: dict[str, str] = field(default_factory=dict)  # commit id -> metarange id
    cleaning: list[CleaningPolicy] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)  # savepoint tags only
    tag_only: set[str] = field(default_factory=set)  # commits read only as a savepoint's target
    # where lakeFS wrote every staged address, asked before anything else (see load_graph); None: not asked
    uncommitted_locations: list[str] | None = None

    def retention(self, now: datetime, *, heads: dict[str, str] | None = None,
                  tags: dict[str, str] | None = None, lakefs_retained: Iterable[str] | None = None) -> ScopedRetention:
        """The run's retained commits per scope of paths, each with why (the one decision both runners use);
        ``heads``, ``tags`` and ``lakefs_retained`` replace the repository's to ask what-if (impact views)."""
        return ScopedRetention(commits=self.commits, branch_heads=self.heads if heads is None else heads,
                               rules=self.rules, policies=self.cleaning, now=now, not_leaves=self.tag_only,
                               lakefs_retained=self.lakefs_retained if lakefs_retained is None else lakefs_retained,
                               tags=self.tags if tags is None else tags)

    def metarange_of(self, commit_id: str) -> str:
        commit = self.commits.get(commit_id)
        return commit.meta_range_id if commit is not None else self.lakefs_retained.get(commit_id, "")


def rules_of(api: LakeFSApi, repository_id: str) -> GCRules:
    body = api.gc_rules(repository_id)
    if body is None:
        raise GCError(f"lakefs://{repository_id} has no GC rules: skipped (nothing is collected without them; set "
                      f"them with `lakefs-janitor gc rules set lakefs://{repository_id} ...`)", "no-rules")
    return GCRules.from_api(body)


def cleaning_of(api: LakeFSApi, repository_id: str) -> list[CleaningPolicy]:
    raw = api.repository_metadata(repository_id).get(CLEANING_KEY)
    if not raw:
        return []
    try:
        return parse_cleaning_policies(json.loads(raw))
    except (ValueError, CleaningPolicyError) as exc:
        raise GCError(f"the cleaning policies stored on {repository_id} are unusable: {exc}; no GC runs until "
                      "they are replaced (gc policy set --force) or removed (gc policy clear)", "bad-policies") from None


def load_graph(api: LakeFSApi, repository_id: str, *, now: datetime, storage: StorageConfig,
               cleaning: list[CleaningPolicy] | None = None, namespace: str | None = None
               ) -> tuple[Graph, StorageConfig]:
    """The history the mark needs, and the namespace's storage configuration completed (a local blockstore's
    folder learnt from where lakeFS writes its GC commits, when not configured). lakeFS prepares its retained
    commits once per run. ``cleaning`` replaces the stored cleaning policies (to preview a new document);
    ``namespace``: the repository's storage namespace, when the caller already asked lakeFS for it."""
    namespace = namespace or api.repository(repository_id)["storage_namespace"]
    rules = rules_of(api, repository_id)
    # The order is what makes concurrent writers safe, as in lakeFS's own GC: staged entries first, then every
    # commit lakeFS has. An object older than the cutoff is either staged then, or in a commit that exists
    # when lakeFS lists its commits after, even one a reset orphaned since (lakeFS retains those by age).
    _run_id, uncommitted_locations = api.prepare_uncommitted(repository_id)
    # lakeFS walks the whole history to prepare its commits: it does so while this reads the lines below; the
    # heads read here only add to what it retains
    prepare_task = api.start_prepare_commits(repository_id)
    heads = api.branches(repository_id)
    cleaning = cleaning_of(api, repository_id) if cleaning is None else cleaning
    now_s = int(now.timestamp())
    commits: dict[str, Commit] = {}
    depth: dict[str, float] = {}

    def line(ref: str, threshold: int | None) -> None:
        # Each first-parent line only as deep as retention can reach (the policies need whole lines), pages
        # fetched lazily: never the whole history of every branch
        read_line((commit_from_api(c) for c in api.log(repository_id, ref, first_parent=True)), threshold,
                  commits, depth=depth)

    for branch_id, head in sorted(heads.items()):
        whole = any(p.matches(branch_id) for p in cleaning)
        line(head, None if whole else now_s - rules.days(branch_id) * DAY)
    location = api.prepared_commits(repository_id, prepare_task).get("gc_commits_location", "")
    local_root = storage.local_root or learn_local_root(api, repository_id, namespace, location=location,
                                                        branches=heads)
    storage = StorageConfig(namespace, local_root, storage.options_json, storage.max_in_flight)
    ns = Namespace(storage)
    relative = relative_key(location, FULL, ns.prefixes)
    if relative is None and storage.local_root and (actual := local_root_from(namespace, location)) is not None:
        # lakeFS's own full address names its blockstore folder: the configured one is not it
        raise GCError(f"{namespace} is not under the configured local blockstore folder {storage.local_root}: "
                      f"lakeFS keeps it under {actual} (LAKEFS_JANITOR_GC__LOCAL_BLOCKSTORE_PATH, lakeFS's "
                      "blockstore.local.path; unset, it is learnt from lakeFS)", "storage-config")
    if relative is None:
        raise GCError(f"lakeFS wrote its commits list outside the namespace: {location}", "lakefs-prepare")
    if relative and not relative.endswith(".csv"):
        relative = relative.rstrip("/") + "/commits.csv"
    graph = Graph(namespace, local_root, rules, heads, commits, cleaning=cleaning,
                  uncommitted_locations=uncommitted_locations)
    try:
        rows = list(csv.DictReader(io.StringIO(ns.read(relative).decode())))
    except (StorageError, UnicodeDecodeError) as exc:
        raise GCError(f"reading lakeFS's retained commits from the namespace failed: {exc}", "storage-read") from exc
    for row in rows:
        if row.get("expired", "false").lower() == "false" and row.get("commit_id"):
            graph.lakefs_retained[row["commit_id"]] = row.get("metarange_id", "")
    for commit_id in sorted(graph.lakefs_retained.keys() - commits.keys()):  # dangling leaves only lakeFS knows of
        line(commit_id, now_s - rules.default_retention_days * DAY)
    if cleaning:  # savepoints may tag commits whose line was not read, or that no branch reaches any more
        graph.tags = savepoint_tags(api.tags(repository_id), cleaning)
        for commit_id in sorted(set(graph.tags.values()) - commits.keys()):
            commits[commit_id] = commit_from_api(api.commit(repository_id, commit_id))
            graph.tag_only.add(commit_id)
    return graph, storage


def learn_local_root(api: LakeFSApi, repository_id: str, namespace: str, *, location: str,
                     branches: Iterable[str]) -> str | None:
    """A local blockstore's folder, for deployments that did not configure it: from where lakeFS wrote its GC
    commits (``location``), else from a full address of an object on one of ``branches``. None for other stores."""
    if not namespace.startswith("local://"):
        return None
    found = local_root_from(namespace, location)
    for branch_id in sorted(branches) if found is None else ():
        address = (api.first_object(repository_id, branch_id) or {}).get("physical_address", "")
        if (found := local_root_from(namespace, address)) is not None:
            break
    return found


def uncommitted_addresses(api: LakeFSApi, ns: Namespace, repository_id: str) -> set[str]:
    """Every staged address on every branch (hidden ones too), as lakeFS's own GC gets them: lakeFS writes them
    as parquet under ``_lakefs/retention/gc/uncommitted/`` (one call per page, whatever the number of objects)."""
    return read_uncommitted(ns, api.prepare_uncommitted(repository_id)[1])


def read_uncommitted(ns: Namespace, locations: list[str]) -> set[str]:
    """The staged addresses lakeFS wrote at ``locations`` (``prepare_uncommitted``), relative to the namespace."""
    import pyarrow.parquet as pq  # noqa: PLC0415

    out: set[str] = set()
    for location in sorted(set(locations)):
        relative = relative_key(location, FULL, ns.prefixes)
        if relative is None:
            raise GCError(f"lakeFS wrote uncommitted addresses outside the namespace: {location}", "lakefs-prepare")
        for key in ns.list_metadata(relative.rstrip("/") + "/"):
            try:
                table = pq.read_table(io.BytesIO(ns.read(key)), columns=["physical_address"])
            except Exception as exc:  # noqa: BLE001 - pyarrow's errors vary; without this list nothing is safe
                raise GCError(f"lakeFS's list of uncommitted addresses {key} is unreadable: {exc}",
                              "corrupt-metadata") from None
            for address in table.column("physical_address").to_pylist():
                rel = relative_key(address, FULL if "://" in address else RELATIVE, ns.prefixes)
                if rel is not None:
                    out.add(rel)
    return out


@dataclass
class MarkRequest:
    repository_id: str
    run_id: str
    now: datetime
    min_age: timedelta | None = None  # None: lakeFS's own grace period
    dry_run: bool = False
    engine: str = "inprocess"
    range_partitions: int = 50
    address_partitions: int = 200
    prefix_depth: int = 2  # folders of the by-prefix breakdown
    by_path: bool = False  # name what the plan deletes by the path it had in lakeFS (reads the expired history)
    record: bool = True  # write the plan under _lakefs/ (a preview of other policies writes nothing)
    cache: bool = True  # take what metadata files held from the mark cache (engine/mark_cache.py), and rewrite it


@dataclass
class Marked:
    """A mark's plan, and what it saw (the impact view and the sweep's re-check use it)."""

    summary: Summary
    deleted: list[StoredObject]
    graph: Graph
    retained: frozenset[str]
    why: dict[str, str]
    kept: set[str]
    listed: list[StoredObject]
    cutoff: float
    ranges: list[str]
    uncommitted: set[str] = field(default_factory=set)

    @property
    def lakefs_retained(self) -> frozenset[str]:
        """lakeFS's own retained set (``prepare_garbage_collection_commits``)."""
        return frozenset(self.graph.lakefs_retained)


def mark(api: LakeFSApi, runner: Runner, config: JobConfig, *, request: MarkRequest, graph: Graph,
         progress: Progress = lambda phase, count: None, preload: mark_cache.Preload | None = None) -> Marked:
    """Compute and write the plan (at <ns>/_lakefs/retention/gc/unified/<run_id>/). ``preload``: the mark cache
    and the namespace's ``_lakefs/`` listing, when the caller started reading them before loading the graph."""
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
        loaded = mark_cache.load(ctx.ns, repository_id=request.repository_id, namespace=graph.namespace,
                                 preload=preload) if request.cache else None
        source = None if loaded is None else mark_source.Source(
            loaded.memory, runner=runner, open_context=config.open, partitions=request.range_partitions, driver=ctx)
        if source is None:
            kept, range_ids = reached(runner, config, graph, retention=retention, metaranges=metaranges,
                                      partitions=request.range_partitions)
        else:
            kept, range_ids = mark_source.reached(source, graph, retention=retention, metaranges=metaranges,
                                                  prefixes=ctx.prefixes)
        decision = retention.union() if retention.by_path else bound
        progress("ranges", len(range_ids))
        # keep_versions walks each branch's history newest first, so it runs on the driver; through the source
        # when the cache is on, so that the ranges it alone reads are remembered too
        if graph.cleaning and source is not None:
            kept |= mark_source.versions(source, graph, prefixes=ctx.prefixes)
        elif graph.cleaning:
            kept |= versions_kept(commits=graph.commits, branch_heads=graph.heads, policies=graph.cleaning,
                                  read_metarange=ctx.read_metarange, read_range=ctx.read_range,
                                  namespace_uris=ctx.prefixes)
        if graph.uncommitted_locations is None:  # asking now, after the commits, would reopen the race
            raise GCError("the mark needs lakeFS's staged entries asked for before its commits (a Graph from "
                          "load_graph)", "bad-arguments")
        uncommitted = read_uncommitted(ctx.ns, graph.uncommitted_locations)
        seconds["mark"] = time.monotonic() - t
        # What the files held is known now and nothing below changes it: the cache is written while the
        # namespace is listed (on a large store, the listing's time hides the write's)
        cache_written = in_background("gc-cache-write", write_cache, ctx.ns, source, loaded, request=request,
                                      graph=graph) if (
            request.record and source is not None) else None
        t = time.monotonic()
        units = ctx.ns.list_units()
        listed: list[StoredObject] = runner.map_units(units, unit_list, config.open,
                                                      partitions=request.address_partitions)
        progress("objects listed", len(listed))
        seconds["list"] = time.monotonic() - t
        t = time.monotonic()
        # The subtraction and its safety rules (data keys only, nothing newer than the cutoff) are core's.
        deleted, plan = plan_deletions(listed, kept | uncommitted, cutoff.timestamp(),
                                       prefix_depth=request.prefix_depth)
        paths = paths_of(api, ctx, graph, keys={o.key for o in deleted}) if request.by_path else {}
        seconds["plan"] = time.monotonic() - t
        summary = Summary(
            run_id=request.run_id, repository_id=request.repository_id, success=True,
            start_time=request.now.isoformat(), cutoff_time=cutoff.isoformat(), num_deleted_objects=plan.deleted,
            deleted_bytes=plan.deleted_bytes, retained_commits=len(decision.commits), kept_objects=plan.kept,
            candidates=plan.candidates, too_new=plan.too_new, dry_run=request.dry_run, by_prefix=plan.by_prefix,
            by_path=by_path_prefix(deleted, paths, request.prefix_depth) if request.by_path else {},
            oldest_retained=oldest_retained(graph.commits, graph.heads, decision.commits),
            policies=["gc rules", *(p.id for p in graph.cleaning)], marked=True, engine=request.engine,
            storage_namespace=graph.namespace, local_root=graph.local_root, min_age_seconds=min_age.total_seconds(), commits=len(graph.commits),
            lakefs_retained_commits=len(graph.lakefs_retained), metaranges=len(metaranges), ranges=len(range_ids),
            uncommitted_addresses=len(uncommitted), seconds={k: round(v, 3) for k, v in seconds.items()},
            cache={"state": "off"} if loaded is None else {**loaded.stats, **source.stats()})
        if cache_written is not None:
            how = cache_written.result()
            summary.cache.update({"written": how is not None, **({"write": how} if how else {})})
        if request.record:
            report.write_plan(ctx.ns, summary, deleted=deleted, ranges=range_ids, retained=decision.commits)
        return Marked(summary, deleted, graph, decision.commits, dict(decision.why), kept | uncommitted, listed,
                      cutoff.timestamp(), range_ids, uncommitted)
    except (StorageError, LakeFSApiError) as exc:
        raise GCError(str(exc), getattr(exc, "reason", "storage")) from exc
    except ValueError as exc:  # SSTableError: a corrupt range or metarange
        raise GCError(f"committed metadata is unreadable: {exc}", "corrupt-metadata") from exc
    finally:
        if cache_written is not None:  # a run that failed after the mark still leaves it whole
            wait([cache_written])
        ctx.close()


def write_cache(ns: Namespace, source: mark_source.Source, loaded: mark_cache.Loaded, *, request: MarkRequest,
                graph: Graph) -> str | None:
    """Store what this run used in the mark cache: how ("appended", "compacted", "unchanged"), or None when it
    failed (that costs the next run its reads, not this run)."""
    try:
        return mark_cache.save(ns, source.to_keep(), loaded, repository_id=request.repository_id,
                               namespace=graph.namespace, run_id=request.run_id)
    except Exception as exc:  # noqa: BLE001 - an optimisation only: whatever failed, the run's plan stands
        mark_cache.log.warning("GC mark cache of %s not written: %s: %s", request.repository_id,
                               type(exc).__name__, exc)
        return None


def reached(runner: Runner, config: JobConfig, graph: Graph, *, retention: ScopedRetention,
            metaranges: list[str], partitions: int) -> tuple[set[str], list[str]]:
    """The addresses the retained commits keep (``metaranges``: those of ``retention.bound()``), and the ranges
    read. Without path policies every entry of a retained commit's ranges is kept (each distinct data block
    decoded once); with them, each entry only when its path's scope retains a commit holding the range."""
    if not retention.by_path:
        spans = set(runner.map_units(metaranges, unit_metarange_spans, config.open, partitions=partitions))
        # In key order, so the versions of one key span fall in one partition, which then decodes the data
        # blocks they share once (OpenContext.seen_blocks)
        range_ids = list(dict.fromkeys(range_id for _, range_id in sorted(spans)))
        return set(runner.map_units(range_ids, unit_range_addresses, config.open, partitions=partitions)), range_ids
    members = runner.map_units(metaranges, unit_metarange_members, config.open, partitions=partitions)
    range_ids = list(dict.fromkeys(range_id for _, _, range_id in sorted(members, key=lambda m: (m[1], m[2]))))
    holding = range_commits(members, retention.bound().commits, metarange_of=graph.metarange_of)
    path_policies = tuple(p for p in graph.cleaning if p.paths)
    entries = runner.map_units([(r, path_policies) for r in range_ids], unit_range_scoped, config.open,
                               partitions=partitions)
    retention.of(Scope())  # the branch-level decision is always part of the record
    return kept_addresses(entries, holding, retention), range_ids


def paths_of(api: LakeFSApi, ctx: OpenContext, graph: Graph, *, keys: set[str]) -> dict[str, str]:
    """The path some commit gave each of ``keys`` (Hudi's partitions for `--by-prefix`): every commit of every
    branch's whole log (merged lines too) and every commit the mark already knows, each distinct range read once."""
    if not keys:
        return {}
    known = dict(graph.commits)
    for head in sorted(set(graph.heads.values())):
        for body in api.log(ctx.config.repository_id, head):
            known.setdefault(body["id"], commit_from_api(body))
    metaranges = {c.meta_range_id for c in known.values() if c.meta_range_id}
    ranges = sorted({r for m in sorted(metaranges) for r in sstable.metarange_range_ids(ctx.read_metarange(m))})
    paths: dict[str, str] = {}
    for range_id in ranges:
        for path, address, kind, _ in sstable.range_entries(ctx.read_range(range_id)):
            key = relative_key(address, kind, ctx.prefixes)
            if key in keys and key not in paths:
                paths[key] = path.decode(errors="replace")
        if len(paths) == len(keys):
            break
    return paths


def plan_fingerprint(summary: Summary, deleted: list[str]) -> dict:
    """What both runners must agree on: the deleted set and the decision's fields (not the run id, the runner,
    nor timings)."""
    skip = {"run_id", "engine", "seconds", "by_path", "start_time", "cutoff_time", "cache"}
    fields = summary.as_dict()
    return {"deleted": sorted(deleted), **{k: fields[k] for k in sorted(fields) if k not in skip}}
