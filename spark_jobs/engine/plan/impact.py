"""Impact views: what deleting one branch, or one savepoint, then a GC run would free — the objects and bytes only it
keeps alive. Computed from one dry mark, with the run's own decision (path policies included): for a branch, the
same retention with the branch gone (its HEAD then follows the default retention as a dangling leaf, as lakeFS's
own GC treats it) and its staged entries dropped; for a savepoint, the same retention without its tag."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from spark_jobs.core.addresses import FULL, RELATIVE, relative_key
from spark_jobs.core.cleaning import ScopedRetention
from spark_jobs.core.mark import keys_in_range
from spark_jobs.core.plan import is_data_key
from spark_jobs.engine.mark import Marked
from spark_jobs.engine.reach.mark_source import Files
from spark_jobs.engine.reach.retained import reached, versions
from spark_jobs.engine.runtime.context import JobConfig, OpenContext
from spark_jobs.engine.runtime.lakefs_api import LakeFSApi
from spark_jobs.engine.runtime.parallel import ThreadRunner


@dataclass(frozen=True)
class Impact:
    branch_id: str  # the branch, or the savepoint's tag
    objects: int
    bytes: int


class _Still:
    """What a what-if retention still keeps, reading each range once across questions."""

    def __init__(self, config: JobConfig, ctx: OpenContext, marked: Marked) -> None:
        self.ctx, self.marked = ctx, marked
        self.files = Files(runner=ThreadRunner(4), open_context=config.open, partitions=4, driver=ctx)
        self.cache: dict[str, set[str]] = {}
        self.sizes = {o.key: (o.size, o.mtime) for o in marked.listed if is_data_key(o.key)}

    def keys_of(self, meta_range_id: str) -> set[str]:
        out: set[str] = set()
        for range_id in self.files.range_ids_of(meta_range_id) if meta_range_id else []:
            if range_id not in self.cache:
                self.cache[range_id] = keys_in_range(self.ctx.read_range(range_id), self.ctx.prefixes)
            out |= self.cache[range_id]
        return out

    def kept(self, retention: ScopedRetention, heads: dict[str, str]) -> set[str]:
        graph = self.marked.graph
        if retention.by_path:
            metaranges = sorted({m for c in retention.bound().commits if (m := graph.metarange_of(c))})
            still = reached(self.files, graph, retention=retention, metaranges=metaranges).kept
        else:
            still = set()
            for commit_id in retention.of(frozenset()).commits:
                still |= self.keys_of(graph.metarange_of(commit_id))
        if graph.cleaning:
            still |= versions(self.files, graph, heads=heads)
        return still

    def freed(self, name: str, still: set[str]) -> Impact:
        freed = [k for k in self.marked.kept - still if k in self.sizes and self.sizes[k][1] < self.marked.cutoff]
        return Impact(name, len(freed), sum(self.sizes[k][0] for k in freed))


def branch_impact(api: LakeFSApi, config: JobConfig, marked: Marked, *, branch_ids: list[str],
                  now: datetime) -> dict[str, Impact]:
    graph = marked.graph
    ctx = config.open()
    try:
        view = _Still(config, ctx, marked)
        staged: dict[str, set[str]] = {}
        for branch in graph.heads:
            addresses = api.staged_addresses(config.repository_id, branch)
            staged[branch] = {k for a in addresses
                              if (k := relative_key(a, FULL if "://" in a else RELATIVE, ctx.prefixes)) is not None}
        out: dict[str, Impact] = {}
        for branch in branch_ids:
            if branch not in graph.heads:
                continue
            others = {b: h for b, h in graph.heads.items() if b != branch}
            # What lakeFS itself would keep without the branch is not known: its set is left out, and the seed's
            # rule keeps at least as much on every history tested
            still = view.kept(graph.retention(now, heads=others, lakefs_retained=()), others)
            for b in others:
                still |= staged.get(b, set())
            out[branch] = view.freed(branch, still)
        return out
    finally:
        ctx.close()


def savepoint_impact(config: JobConfig, marked: Marked, *, tag_ids: list[str], now: datetime) -> dict[str, Impact]:
    """For each savepoint tag, what deleting the tag frees at the next run (lakeFS's own retained set ignores tags,
    so it stays as it is; staged entries stay kept)."""
    graph = marked.graph
    ctx = config.open()
    try:
        view = _Still(config, ctx, marked)
        out: dict[str, Impact] = {}
        for tag in tag_ids:
            others = {t: c for t, c in graph.tags.items() if t != tag}
            still = view.kept(graph.retention(now, tags=others), graph.heads) | marked.uncommitted
            out[tag] = view.freed(tag, still)
        return out
    finally:
        ctx.close()
