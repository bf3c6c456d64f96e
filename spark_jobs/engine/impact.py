"""Impact view: for each branch, the objects and bytes that only it keeps alive — what deleting it, then a GC run,
would free. Computed from one dry mark, with the run's own decision: the same retention with the branch gone (its
HEAD then follows the default retention as a dangling leaf, as lakeFS's own GC treats it) and its staged entries
dropped."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from spark_jobs.core.addresses import FULL, RELATIVE, relative_key
from spark_jobs.core.cleaning import retained_set, versions_kept
from spark_jobs.core.mark import keys_in_range
from spark_jobs.core.plan import is_data_key
from spark_jobs.core.sstable import metarange_range_ids
from spark_jobs.engine.lakefs_api import LakeFSApi
from spark_jobs.engine.mark import JobConfig, Marked


@dataclass(frozen=True)
class Impact:
    branch_id: str
    objects: int
    bytes: int


def branch_impact(api: LakeFSApi, config: JobConfig, marked: Marked, *, branch_ids: list[str],
                  now: datetime) -> dict[str, Impact]:
    graph = marked.graph
    ctx = config.open()
    try:
        cache: dict[str, set[str]] = {}

        def keys_of(meta_range_id: str) -> set[str]:
            out: set[str] = set()
            for range_id in metarange_range_ids(ctx.read_metarange(meta_range_id)) if meta_range_id else []:
                if range_id not in cache:
                    cache[range_id] = keys_in_range(ctx.read_range(range_id), ctx.prefixes)
                out |= cache[range_id]
            return out

        staged: dict[str, set[str]] = {}
        for branch in graph.heads:
            addresses = api.staged_addresses(config.repository_id, branch)
            staged[branch] = {k for a in addresses
                              if (k := relative_key(a, FULL if "://" in a else RELATIVE, ctx.prefixes)) is not None}
        sizes = {o.key: (o.size, o.mtime) for o in marked.listed if is_data_key(o.key)}
        out: dict[str, Impact] = {}
        for branch in branch_ids:
            if branch not in graph.heads:
                continue
            others = {b: h for b, h in graph.heads.items() if b != branch}
            # What lakeFS itself would keep without the branch is not known: its set is left out, and the seed's
            # rule keeps at least as much on every history tested
            retained = retained_set(commits=graph.commits, branch_heads=others, rules=graph.rules,
                                    lakefs_retained=(), policies=graph.cleaning, tags=graph.tags, now=now,
                                    not_leaves=graph.tag_only).commits
            still: set[str] = set()
            for commit_id in retained:
                if commit_id in graph.commits:
                    still |= keys_of(graph.commits[commit_id].meta_range_id)
            for b in others:
                still |= staged.get(b, set())
            if graph.cleaning:
                still |= versions_kept(commits=graph.commits, branch_heads=others, policies=graph.cleaning,
                                       read_metarange=ctx.read_metarange, read_range=ctx.read_range,
                                       namespace_uris=ctx.prefixes)
            freed = [k for k in marked.kept - still if k in sizes and sizes[k][1] < marked.cutoff]
            out[branch] = Impact(branch, len(freed), sum(sizes[k][0] for k in freed))
        return out
    finally:
        ctx.close()
