"""Impact view: for each branch, the objects and bytes that only it keeps alive — what deleting it, then a GC run,
would free. Computed from one mark: the same retention with the branch gone (its HEAD then follows the default
retention as a dangling leaf, as lakeFS's own GC treats it) and its staged entries dropped."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from spark_jobs.core.cleaning import retained_set, versions_kept
from spark_jobs.core.plan import is_data_key
from workers.gc.run import MarkResult, mark
from workers.gc.runner import min_age_of, open_repository_namespace
from workers.settings import GCSettings


@dataclass(frozen=True)
class Impact:
    branch_id: str
    objects: int
    bytes: int


def branch_impact(marked: MarkResult, branch_ids: list[str], *, now: datetime) -> dict[str, Impact]:
    seen = marked.seen
    commits, heads, rules, cleaning = seen["commits"], seen["heads"], seen["rules"], seen["cleaning"]
    keys_of, kept, cutoff = seen["keys_of"], seen["kept"], seen["cutoff"]
    sizes = {o.key: (o.size, o.mtime) for o in seen["listed"] if is_data_key(o.key)}
    staged = seen["staged_by_branch"]()  # per branch: once, whatever the number of branches asked about
    out: dict[str, Impact] = {}
    for branch in branch_ids:
        if branch not in heads:
            continue
        others = {b: h for b, h in heads.items() if b != branch}
        # The run's own decision without the branch (what lakeFS itself would keep then is not known: its set
        # is left out, and the seed's rule keeps at least as much on every history tested)
        retained = retained_set(commits=commits, branch_heads=others, rules=rules, lakefs_retained=(),
                                policies=cleaning, tags=seen["tags"], now=now).commits
        still: set[str] = set()
        for commit_id in retained:
            if commit_id in commits:
                still |= keys_of(commits[commit_id].meta_range_id)
        for b in others:
            still |= staged.get(b, set())
        if cleaning:
            still |= versions_kept(commits=commits, branch_heads=others, policies=cleaning,
                                   read_metarange=seen["read_metarange"], read_range=seen["read_range"],
                                   namespace_uris=seen["ns_uris"])
        freed = [k for k in kept - still if k in sizes and sizes[k][1] < cutoff]
        out[branch] = Impact(branch, len(freed), sum(sizes[k][0] for k in freed))
    return out


def repository_impact(lakefs, gc: GCSettings, repository_id: str, *, branch_ids: list[str] | None = None,
                      min_age: timedelta | None = None) -> dict[str, Impact]:
    """Impact of deleting each branch (all when None), from one dry mark (its plan goes under _lakefs/ only)."""
    now = datetime.now(UTC)
    ns, local_root = open_repository_namespace(lakefs, gc, repository_id)
    marked = mark(lakefs, ns, repository_id, now=now,
                  min_age=min_age_of(gc, min_age), dry_run=True, metadata_source=gc.metadata_source,
                  threads=gc.threads, local_root=local_root)
    return branch_impact(marked, branch_ids or list(marked.seen["heads"]), now=now)
