"""What-if views that change nothing: a dry mark that writes no plan, what other cleaning policies would delete or
keep in addition to the stored ones (``gc policy set --dry-run``), and a past run's report broken down by the path
prefix its objects had (``gc show RUN_ID --by-prefix``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from spark_jobs.core import report as core
from spark_jobs.core.cleaning import CleaningPolicy
from spark_jobs.core.plan import StoredObject, by_path_prefix
from spark_jobs.engine.mark import Marked, mark
from spark_jobs.engine.plan.by_path import paths_of
from spark_jobs.engine.request import RunRequest
from spark_jobs.engine.run import resolve_storage
from spark_jobs.engine.runtime import cyclic_gc
from spark_jobs.engine.runtime.context import GCError, JobConfig
from spark_jobs.engine.runtime.lakefs_api import LakeFSApi, LakeFSApiConfig, LakeFSApiError
from spark_jobs.engine.runtime.parallel import Runner
from spark_jobs.engine.runtime.repository import Graph, load_graph
from spark_jobs.engine.state import report
from spark_jobs.engine.stores import StorageConfig, StorageError


def dry_mark(api: LakeFSApi, api_config: LakeFSApiConfig, storage: StorageConfig, *, repository_id: str,
             now: datetime, min_age: timedelta | None, runner: Runner,
             cleaning: list[CleaningPolicy] | None = None) -> tuple[Marked, JobConfig]:
    """The mark a run at ``now`` would make (with ``cleaning`` instead of the stored policies when given); no plan
    is written."""
    with cyclic_gc.paused():
        graph, storage = load_graph(api, repository_id, now=now, storage=storage, cleaning=cleaning)
        config = JobConfig(api_config, storage, repository_id)
        # a full listing: what a policy or a branch would free is measured by the sizes of what is kept now
        request = RunRequest(repository_id, "dry-run", now=now, run_id="preview", min_age=min_age, listing="full")
        return mark(api, runner, config, request=request, graph=graph, record=False), config


@dataclass
class Effect:
    """What the next run would delete (and keep) in addition under other policies, by path prefix."""

    delete_more: dict[str, list[int]] = field(default_factory=dict)  # prefix -> [objects, bytes]
    keep_more: dict[str, list[int]] = field(default_factory=dict)
    deleted_now: int = 0  # what the next run deletes under the stored policies
    deleted_then: int = 0  # ... and under the proposed ones
    delete_more_keys: list[str] = field(default_factory=list)
    keep_more_keys: list[str] = field(default_factory=list)

    def document(self) -> dict:
        def rows(breakdown: dict[str, list[int]]) -> dict:
            return {p: {"objects": o, "bytes": b} for p, (o, b) in sorted(breakdown.items())}

        return {"delete_in_addition": rows(self.delete_more), "keep_in_addition": rows(self.keep_more),
                "objects_deleted_now": self.deleted_now, "objects_deleted_with_these_policies": self.deleted_then,
                "delete_in_addition_total": _total(self.delete_more), "keep_in_addition_total": _total(self.keep_more)}


def _total(breakdown: dict[str, list[int]]) -> dict:
    return {"objects": sum(o for o, _ in breakdown.values()), "bytes": sum(b for _, b in breakdown.values())}


def policy_effect(api_config: LakeFSApiConfig, storage: StorageConfig, *, repository_id: str,
                  proposed: list[CleaningPolicy], now: datetime, min_age: timedelta | None, runner: Runner,
                  depth: int = 2) -> Effect:
    """Both marks at the same ``now``: the stored policies', and ``proposed``'s; their difference by the path
    prefix (``depth`` folders) the objects had in lakeFS."""
    api = LakeFSApi(api_config)
    try:
        current, config = dry_mark(api, api_config, storage, repository_id=repository_id, now=now,
                                   min_age=min_age, runner=runner)
        then, _ = dry_mark(api, api_config, storage, repository_id=repository_id, now=now, min_age=min_age,
                           runner=runner, cleaning=proposed)
        before = {o.key: o for o in current.deleted}
        after = {o.key: o for o in then.deleted}
        more = [after[k] for k in sorted(after.keys() - before.keys())]
        fewer = [before[k] for k in sorted(before.keys() - after.keys())]
        ctx = config.open()
        try:
            paths = paths_of(api, ctx, then.graph, keys={o.key for o in more + fewer})
        finally:
            ctx.close()
        return Effect(by_path_prefix(more, paths, depth), by_path_prefix(fewer, paths, depth), len(before),
                      len(after), [o.key for o in more], [o.key for o in fewer])
    except LakeFSApiError as exc:
        raise GCError(str(exc), exc.reason) from exc
    except StorageError as exc:
        raise GCError(str(exc), exc.reason_or("storage")) from exc
    finally:
        api.close()


@dataclass
class RunBreakdown:
    summary: core.Summary
    rows: dict[str, dict[str, int]]  # prefix -> planned, deleted, failed, bytes deleted
    exact: bool  # False when spared or capped objects cannot be told apart by prefix
    note: str = ""


def run_breakdown(api_config: LakeFSApiConfig, storage: StorageConfig, *, repository_id: str, run_id: str,
                  depth: int = 2) -> RunBreakdown:
    """A past run's report by path prefix: what its plan listed, what failed (the failures its record lists), and
    what was deleted. Names come from the commits that named each object (their ranges are never collected)."""
    api = LakeFSApi(api_config)
    try:
        storage = resolve_storage(api, repository_id, storage)
        config = JobConfig(api_config, storage, repository_id)
        ctx = config.open()
        try:
            summary = report.read_summary(ctx.ns, run_id)
            keys, sizes = report.read_deleted_list(ctx.ns, summary)
            graph = Graph(storage.namespace, storage.local_root, rules=None, heads=api.branches(repository_id),  # type: ignore[arg-type]
                          commits={})
            paths = paths_of(api, ctx, graph, keys=set(keys))
        finally:
            ctx.close()
    except report.PlanError as exc:
        raise GCError(str(exc), exc.reason) from exc
    except LakeFSApiError as exc:
        raise GCError(str(exc), exc.reason) from exc
    except StorageError as exc:
        raise GCError(f"run {run_id}: its list of objects is unreadable: {exc}", exc.reason_or("storage")) from exc
    return breakdown_of(summary, keys, sizes, paths=paths, depth=depth)


def breakdown_of(summary: core.Summary, keys: list[str], sizes: list[int], *, paths: dict[str, str],
                 depth: int) -> RunBreakdown:
    failed = {f.split(": ", 1)[0] for f in summary.failed}
    swept = summary.phase == "swept"
    # The sweep deletes the plan's keys in order, less those the re-check spared, up to the cap: with nothing
    # spared, the capped ones are the plan's last keys
    capped = set(keys[len(keys) - summary.capped:]) if swept and summary.capped and not summary.spared_by_recheck \
        else set()
    exact = not swept or (not summary.spared_by_recheck and len(failed) == summary.num_failed)
    rows: dict[str, dict[str, int]] = {}
    for key, size in zip(keys, sizes, strict=True):
        [(prefix, _)] = by_path_prefix([StoredObject(key, size, 0)], paths, depth).items()
        row = rows.setdefault(prefix, {"planned": 0, "deleted": 0, "failed": 0, "bytes_deleted": 0})
        row["planned"] += 1
        if key in failed:
            row["failed"] += 1
        elif swept and key not in capped:
            row["deleted"] += 1
            row["bytes_deleted"] += size
    note = ""
    if not swept:
        note = "a plan or dry run: nothing was deleted"
    elif not exact:
        note = (f"{summary.spared_by_recheck} spared by the re-check, {summary.capped} left by the cap and "
                f"{summary.num_failed - len(failed)} unlisted failures are not told apart by prefix: 'deleted' "
                "counts them as deleted")
    return RunBreakdown(summary, rows, exact, note)
