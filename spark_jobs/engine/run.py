"""One GC run, whatever the runner: full (mark, then sweep that plan), mark only, sweep a stored plan, dry run.
The caller picks the Runner (threads in process, executors on Spark); everything else is this code. The result is
the run's one record (``core.report.Summary``), as stored in summary.json."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from spark_jobs.core.mark import unique_range_ids
from spark_jobs.core.report import Summary
from spark_jobs.engine.mark import Marked, mark
from spark_jobs.engine.reach import mark_cache
from spark_jobs.engine.request import MODES, RunRequest
from spark_jobs.engine.runtime import cyclic_gc
from spark_jobs.engine.runtime.context import GCError, JobConfig, Progress
from spark_jobs.engine.runtime.imports import arrow_without_pandas
from spark_jobs.engine.runtime.lakefs_api import LakeFSApi, LakeFSApiConfig, LakeFSApiError
from spark_jobs.engine.runtime.parallel import Runner, in_background, wants_datasets
from spark_jobs.engine.runtime.repository import learn_local_root, load_graph
from spark_jobs.engine.state import incremental
from spark_jobs.engine.state.report import new_run_id
from spark_jobs.engine.stores import StorageConfig, StorageError
from spark_jobs.engine.sweep.sweep import sweep


def _check(request: RunRequest) -> datetime:
    if request.mode not in MODES:
        raise GCError(f"unknown GC mode {request.mode!r} (one of {', '.join(MODES)})", "bad-arguments")
    if request.mode == "sweep" and not request.mark_id:
        raise GCError("a sweep needs the id of a stored plan (--mark-id)", "bad-arguments")
    now = request.now or datetime.now(UTC)
    if request.mode in ("full", "mark") and now > datetime.now(UTC) + timedelta(seconds=5):
        raise GCError("a run dated in the future would delete objects not yet expired; only a dry run may look "
                      "ahead", "future-now")
    return now


def run(api_config: LakeFSApiConfig, storage: StorageConfig, request: RunRequest, *, runner: Runner,
        progress: Progress = lambda phase, count: None) -> Summary:
    """``storage`` carries the store options (and the local blockstore's folder when configured); the namespace
    itself is the repository's, read from lakeFS."""
    return run_marked(api_config, storage, request, runner=runner, progress=progress)[0]


def run_marked(api_config: LakeFSApiConfig, storage: StorageConfig, request: RunRequest, *, runner: Runner,
               progress: Progress = lambda phase, count: None) -> tuple[Summary, Marked | None]:
    """``run``, with what the mark saw (None for a sweep of a stored plan)."""
    with cyclic_gc.paused():  # a run's structures are large and acyclic (engine/runtime/cyclic_gc.py)
        return _run_marked(api_config, storage, request, runner=runner, progress=progress)


def _run_marked(api_config: LakeFSApiConfig, storage: StorageConfig, request: RunRequest, *, runner: Runner,
                progress: Progress) -> tuple[Summary, Marked | None]:
    now = _check(request)
    arrow_without_pandas()
    api = LakeFSApi(api_config)
    try:
        marked = None
        if request.mode == "sweep":
            storage = resolve_storage(api, request.repository_id, storage)
            mark_id = request.mark_id or ""
        else:
            namespace = api.repository(request.repository_id)["storage_namespace"]
            # the store's first reads (its client built: ≈ 0.3 s on S3) happen while lakeFS answers for the history
            preloading = in_background("gc-preload", _preload, replace(storage, namespace=namespace), request,
                                       runner)
            try:
                graph, storage = load_graph(api, request.repository_id, now=now, storage=storage,
                                            namespace=namespace)
            except BaseException:
                _settle(preloading)
                raise
            preload = preloading.result()
            config = JobConfig(api_config, storage, request.repository_id, request.metadata_from,
                               request.range_cache)
            mark_id = request.run_id or new_run_id(now)
            marked = mark(api, runner, config, request=replace(request, now=now, run_id=mark_id), graph=graph,
                          progress=progress, preload=preload)
            if request.mode != "full":
                return marked.summary, marked
        config = JobConfig(api_config, storage, request.repository_id, request.metadata_from)
        summary = sweep(api, runner, config, mark_id=mark_id, range_partitions=request.range_partitions,
                        address_partitions=request.address_partitions, max_deletions=request.max_deletions,
                        progress=progress, lease=request.lease, purge_noncurrent=request.purge_noncurrent)
        summary.runner = request.runner
        return summary, marked
    except LakeFSApiError as exc:
        raise GCError(str(exc), exc.reason) from exc
    except StorageError as exc:
        raise GCError(str(exc), exc.reason) from exc
    finally:
        api.close()


def _preload(storage: StorageConfig, request: RunRequest, runner: Runner) -> mark_cache.Preload | None:
    """The mark cache and the listing of _lakefs/ that checks it (both history-sized), being read; None when the
    run will not read them: the previous run left a kept index (an incremental run then reads no cache at all),
    the run is told to read none, or its runner plans full runs as datasets, without the cache."""
    if not request.cache or wants_datasets(runner, ranges=0, cache=True):
        return None
    if request.listing == "auto" and incremental.left_an_index(storage):
        return None
    return mark_cache.Preload.start(storage, repository_id=request.repository_id)


def _settle(preloading: Future) -> None:
    """A run that failed before its mark leaves no thread reading the cache behind it (``Preload.settle``)."""
    try:
        preload = preloading.result()
    except Exception:  # noqa: BLE001 - the run's own error is the one to report
        return
    if preload is not None:
        preload.settle()


def resolve_storage(api: LakeFSApi, repository_id: str, storage: StorageConfig) -> StorageConfig:
    """The repository's namespace in ``storage``; a local blockstore's folder learnt from lakeFS when not set."""
    namespace = api.repository(repository_id)["storage_namespace"]
    local_root = storage.local_root
    if namespace.startswith("local://") and not local_root:
        local_root = learn_local_root(api, repository_id, namespace, branches=api.branches(repository_id),
                                      location=api.prepare_commits(repository_id).get("gc_commits_location", ""))
    return replace(storage, namespace=namespace, local_root=local_root)


def head_range_count(api_config: LakeFSApiConfig, repository_id: str) -> int:
    """The distinct ranges the branch HEADs reach, read through lakeFS (no storage access needed): a cheap
    measure of a repository's size, the one ``--runner auto`` decides by."""
    api = LakeFSApi(api_config)
    try:
        heads = set(api.branches(repository_id).values())
        metaranges = {api.commit(repository_id, h).get("meta_range_id", "") for h in heads}
        return len(unique_range_ids(metaranges, lambda m: api.metadata_object(repository_id, "meta_range", m)))
    except LakeFSApiError as exc:
        raise GCError(f"sizing lakefs://{repository_id} failed: {exc}", exc.reason) from exc
    except ValueError as exc:
        raise GCError(f"sizing lakefs://{repository_id}: unreadable metarange: {exc}", "corrupt-metadata") from exc
    finally:
        api.close()
