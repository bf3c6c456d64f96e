"""The mark: what a GC run may delete, written as a plan before anything is deleted.

retained commits -> unique metaranges -> unique ranges -> kept addresses (+ every staged address), subtracted
from the namespace's data objects older than the safety cutoff. The per-unit steps (``unit_*``) run wherever the
engine's Runner puts them; the rest runs on the driver / calling thread. Both engines call ``mark`` and get the
same plan for the same repository, ``now`` and cutoff.
"""

from __future__ import annotations

import csv
import io
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from spark_jobs.core import sstable
from spark_jobs.core.addresses import FULL, RELATIVE, local_root_from, namespace_prefixes, relative_key
from spark_jobs.core.cleaning import METADATA_KEY as CLEANING_KEY
from spark_jobs.core.cleaning import (
    CleaningPolicy,
    CleaningPolicyError,
    parse_cleaning_policies,
    retained_set,
    versions_kept,
)
from spark_jobs.core.mark import keys_in_range
from spark_jobs.core.plan import StoredObject, plan_deletions
from spark_jobs.core.report import Summary
from spark_jobs.core.retention import DAY, Commit, GCRules, commit_from_api, metarange_ids, oldest_retained, read_line
from spark_jobs.engine import report
from spark_jobs.engine.lakefs_api import LakeFSApi, LakeFSApiConfig
from spark_jobs.engine.parallel import Runner
from spark_jobs.engine.storage import Namespace, StorageConfig, StorageError


class GCError(RuntimeError):
    """A run that must not go on; ``reason`` is a short label for metrics."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class JobContextConfig:
    """Everything an executor needs to rebuild its clients (picklable, no sockets)."""

    api: LakeFSApiConfig
    storage: StorageConfig
    repository_id: str
    metadata_from: str = "storage"  # or "lakefs": read ranges through lakeFS's metadata-object endpoint

    def open(self) -> OpenContext:
        return OpenContext(self)


class OpenContext:
    def __init__(self, config: JobContextConfig) -> None:
        self.config = config
        self.ns = Namespace(config.storage)
        self._api: LakeFSApi | None = None
        self.prefixes = namespace_prefixes(config.storage.namespace, config.storage.local_root)
        self.seen_blocks: set[bytes] = set()  # data blocks this partition decoded (see sstable.range_addresses)

    @property
    def api(self) -> LakeFSApi:
        if self._api is None:
            self._api = LakeFSApi(self.config.api)
        return self._api

    def read_metadata(self, kind: str, object_id: str) -> bytes:
        if self.config.metadata_from == "lakefs":
            return self.api.metadata_object(self.config.repository_id, kind, object_id)
        return self.ns.read(f"_lakefs/{object_id}")

    def close(self) -> None:
        if self._api is not None:
            self._api.close()


# Per-unit steps (run on executors or threads).
def unit_metarange_ranges(ctx: OpenContext, metarange_id: str) -> list[str]:
    return sstable.metarange_range_ids(ctx.read_metadata("meta_range", metarange_id))


def unit_metarange_spans(ctx: OpenContext, metarange_id: str) -> list[tuple[bytes, str]]:
    """(first key, range id) of every range a metarange lists."""
    return [(r.min_key, r.range_id)
            for r in sstable.metarange_ranges(ctx.read_metadata("meta_range", metarange_id))]


def unit_range_addresses(ctx: OpenContext, range_id: str) -> list[str]:
    return sorted(keys_in_range(ctx.read_metadata("range", range_id), ctx.prefixes, ctx.seen_blocks))


def unit_list(ctx: OpenContext, unit: str) -> list[StoredObject]:
    return ctx.ns.list_unit(unit)


@dataclass
class Graph:
    namespace: str
    local_root: str | None
    rules: GCRules
    heads: dict[str, str]
    commits: dict[str, Commit]
    lakefs_retained: set[str] = field(default_factory=set)
    cleaning: list[CleaningPolicy] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)


def _first_full_address(api: LakeFSApi, repository_id: str, heads: dict[str, str]) -> str | None:
    for branch_id in sorted(heads):
        page = api._get(f"{api._repo(repository_id)}/refs/{branch_id}/objects/ls",  # noqa: SLF001
                        f"list objects of {repository_id}@{branch_id}", amount=1)
        for obj in page.get("results", []):
            if obj.get("physical_address", "").startswith("local://"):
                return obj["physical_address"]
    return None


def load_graph(api: LakeFSApi, repository_id: str, *, now: datetime, local_root: str | None = None,
               storage_options_json: str | None = None) -> Graph:
    repo = api.repository(repository_id)
    namespace = repo["storage_namespace"]
    body = api.gc_rules(repository_id)
    if body is None:
        raise GCError(f"repository {repository_id} has no GC rules: nothing is collected until they are set "
                      f"(lakefs-janitor gc rules set lakefs://{repository_id} ...)", "no-rules")
    rules = GCRules.from_api(body)
    heads = api.branches(repository_id)
    cleaning = _cleaning(api, repository_id)
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
    # lakeFS's own retained set (it sees dangling commits of deleted branches, which the API cannot list):
    # ours must contain it.
    prepared = api.prepare_commits(repository_id)
    location = prepared.get("gc_commits_location", "")
    if namespace.startswith("local://") and not local_root:
        # Where lakeFS itself just wrote, in the namespace's real folder. (Objects' addresses are a poorer
        # source: the API shows staged full local addresses with the blockstore root prepended once more.)
        local_root = local_root_from(namespace, location)
        if local_root is None:
            found = _first_full_address(api, repository_id, heads)
            local_root = local_root_from(namespace, found) if found else None
    graph = Graph(namespace, local_root, rules, heads, commits, cleaning=cleaning)
    if graph.cleaning:  # savepoints may tag commits no branch reaches any more
        graph.tags = api.tags(repository_id)
        for commit_id in sorted(set(graph.tags.values()) - commits.keys()):
            commits[commit_id] = commit_from_api(api.commit(repository_id, commit_id))
    ns = Namespace(StorageConfig(namespace, local_root, storage_options_json))
    relative = relative_key(location, FULL, namespace_prefixes(namespace, local_root))
    if relative is None:
        raise GCError(f"lakeFS wrote its commits list outside the namespace: {location}", "lakefs-prepare")
    if relative and not relative.endswith(".csv"):
        relative = relative.rstrip("/") + "/commits.csv"
    for row in csv.DictReader(io.StringIO(ns.read(relative).decode())):
        if row.get("expired", "false").lower() == "false":
            graph.lakefs_retained.add(row["commit_id"])
    for commit_id in sorted(graph.lakefs_retained - commits.keys()):  # dangling leaves only lakeFS knows of
        line(commit_id, now_s - rules.default_retention_days * DAY)
    return graph


def _cleaning(api: LakeFSApi, repository_id: str) -> list[CleaningPolicy]:
    raw = api.repository_metadata(repository_id).get(CLEANING_KEY)
    if not raw:
        return []
    try:
        return parse_cleaning_policies(json.loads(raw))
    except (ValueError, CleaningPolicyError) as exc:
        raise GCError(f"the cleaning policies stored on {repository_id} are unusable: {exc}; no GC runs until "
                      "they are replaced (gc policy set --force) or removed (gc policy clear)", "bad-policies") from None


def uncommitted_addresses(api: LakeFSApi, ns: Namespace, repository_id: str, *, prefixes: tuple[str, ...]) -> set[str]:
    import pyarrow.parquet as pq  # noqa: PLC0415

    _run_id, locations = api.prepare_uncommitted(repository_id)
    out: set[str] = set()
    for location in sorted(set(locations)):
        relative = relative_key(location, FULL, prefixes)
        if relative is None:
            raise GCError(f"lakeFS wrote uncommitted addresses outside the namespace: {location}", "lakefs-prepare")
        for info in ns.fs.find(ns.path(relative), detail=True).values():
            table = pq.read_table(io.BytesIO(ns.fs.cat_file(info["name"])), columns=["physical_address"])
            for address in table.column("physical_address").to_pylist():
                rel = relative_key(address, FULL if "://" in address else RELATIVE, prefixes)
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


def retained_metaranges(graph: Graph, now: datetime) -> tuple[set[str], list[str]]:
    """The retained commits (GC rules, lakeFS's own set and the cleaning policies: the same function as the
    in-process engine) and their distinct metaranges."""
    kept = set(retained_set(commits=graph.commits, branch_heads=graph.heads, rules=graph.rules,
                            lakefs_retained=graph.lakefs_retained, policies=graph.cleaning, tags=graph.tags,
                            now=now).commits)
    return kept, metarange_ids(graph.commits, kept)


def mark(api: LakeFSApi, runner: Runner, config: JobContextConfig, *, request: MarkRequest, graph: Graph,
         progress: Callable[..., None] = lambda **_: None) -> dict[str, Any]:
    """Compute and write the plan; returns its summary (also at <ns>/_lakefs/retention/gc/unified/<run_id>/)."""
    started = time.monotonic()
    ctx = config.open()
    try:
        min_age = request.min_age if request.min_age is not None else timedelta(
            seconds=api.gc_grace_period_seconds())
        cutoff = request.now - min_age
        kept_commits, metaranges = retained_metaranges(graph, request.now)
        progress(phase="commits", commits=len(graph.commits), retained=len(kept_commits),
                 metaranges=len(metaranges))
        t = time.monotonic()
        spans = set(runner.map_units(metaranges, unit_metarange_spans, config.open,
                                     partitions=request.range_partitions))
        # In key order, so the versions of one key span fall in one partition, which then decodes the data
        # blocks they share once (OpenContext.seen_blocks)
        range_ids = list(dict.fromkeys(range_id for _, range_id in sorted(spans)))
        kept = set(runner.map_units(range_ids, unit_range_addresses, config.open, partitions=request.range_partitions))
        progress(phase="ranges", ranges=len(range_ids), kept=len(kept))
        uncommitted = uncommitted_addresses(api, ctx.ns, request.repository_id, prefixes=ctx.prefixes)
        if graph.cleaning:  # keep_versions: on the driver, each distinct range read once
            kept |= versions_kept(commits=graph.commits, branch_heads=graph.heads, policies=graph.cleaning,
                                  read_metarange=lambda m: ctx.read_metadata("meta_range", m),
                                  read_range=lambda r: ctx.read_metadata("range", r), namespace_uris=ctx.prefixes)
        mark_seconds = time.monotonic() - t
        t = time.monotonic()
        units = ctx.ns.list_units()
        candidates: list[StoredObject] = runner.map_units(units, unit_list, config.open, partitions=request.address_partitions)
        progress(phase="listed", objects=len(candidates), units=len(units))
        list_seconds = time.monotonic() - t
        reachable = kept | uncommitted
        # The subtraction and its safety rules (data keys only, nothing newer than the cutoff) are core's, the
        # same function the in-process engine calls.
        deleted, plan = plan_deletions(candidates, reachable,
                                       cutoff.timestamp())
        summary = Summary(
            run_id=request.run_id, repository_id=request.repository_id, success=True,
            start_time=request.now.isoformat(), cutoff_time=cutoff.isoformat(), num_deleted_objects=plan.deleted,
            deleted_bytes=plan.deleted_bytes, retained_commits=len(kept_commits), kept_objects=plan.kept,
            candidates=plan.candidates, too_new=plan.too_new, dry_run=request.dry_run, by_prefix=plan.by_prefix,
            oldest_retained=oldest_retained(graph.commits, graph.heads, kept_commits),
            policies=["gc rules", *(p.id for p in graph.cleaning)]).as_dict()
        summary.update({  # what only this engine reports
            "first_slice": units[0].removeprefix("data/").rstrip("/") if len(units) > 1 else "",
            "storage_namespace": graph.namespace, "now": request.now.isoformat(),
            "min_age_seconds": min_age.total_seconds(), "engine": request.engine, "commits": len(graph.commits),
            "lakefs_retained_commits": len(graph.lakefs_retained), "metaranges": len(metaranges),
            "ranges": len(range_ids), "kept_addresses": len(kept), "uncommitted_addresses": len(uncommitted),
            "skipped_recent": plan.too_new,
            "seconds": {"mark": round(mark_seconds, 3), "list": round(list_seconds, 3)},
        })
        report.write_plan(ctx.ns, request.run_id, summary=summary, deleted=deleted, ranges=range_ids)
        summary["seconds"]["total"] = round(time.monotonic() - started, 3)
        return summary
    except StorageError as exc:
        raise GCError(str(exc), "storage") from exc
    finally:
        ctx.close()


def plan_fingerprint(summary: dict[str, Any], deleted: list[str]) -> dict[str, Any]:
    """What every engine must agree on: the deleted set and the summary fields all of them write (not the run
    id, nor ``by_path``, which only the in-process engine names)."""
    shared = set(Summary.__dataclass_fields__) - {"run_id", "by_path"}
    return {"deleted": sorted(deleted), **{k: summary.get(k) for k in sorted(shared)}}

