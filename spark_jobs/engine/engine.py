"""One GC run, whatever the engine: full (mark, then sweep that plan), mark only, sweep a stored mark, dry run.
The caller picks the Runner (threads in-process, executors on Spark); everything else is the same code."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from spark_jobs.engine.lakefs_api import LakeFSApi, LakeFSApiConfig
from spark_jobs.engine.parallel import Runner
from spark_jobs.engine.plan import GCError, JobContextConfig, MarkRequest, load_graph, mark
from spark_jobs.engine.storage import StorageConfig
from spark_jobs.engine.sweep import sweep

MODES = ("full", "mark", "sweep", "dry-run")


def new_run_id(now: datetime) -> str:
    # Sorts newest first like lakeFS's descending xids, so listings show recent runs first.
    return f"{(10**10 - int(now.timestamp())):010d}-{uuid.uuid4().hex[:12]}"


def run(*, api_config: LakeFSApiConfig, repository_id: str, mode: str, runner: Runner, now: datetime | None = None,
        run_id: str | None = None, mark_id: str | None = None, min_age: timedelta | None = None,
        storage_options_json: str | None = None, local_root: str | None = None, metadata_from: str = "storage",
        engine: str = "inprocess", range_partitions: int = 50, address_partitions: int = 200,
        progress: Callable[..., None] = lambda **_: None) -> dict[str, Any]:
    if mode not in MODES:
        raise GCError(f"unknown GC mode {mode!r} (one of {', '.join(MODES)})", "bad-arguments")
    if mode == "sweep" and not mark_id:
        raise GCError("a sweep needs the mark id of a stored plan (--mark-id)", "bad-arguments")
    now = now or datetime.now(UTC)
    api = LakeFSApi(api_config)
    try:
        graph = load_graph(api, repository_id, now=now, local_root=local_root,
                           storage_options_json=storage_options_json)
        config = JobContextConfig(api=api_config, repository_id=repository_id, metadata_from=metadata_from,
                                  storage=StorageConfig(graph.namespace, graph.local_root, storage_options_json))
        out: dict[str, Any] = {"repository_id": repository_id, "mode": mode, "engine": engine,
                               "storage_namespace": graph.namespace, "local_root": graph.local_root}
        if mode != "sweep":
            run_id = run_id or new_run_id(now)
            out["run_id"] = run_id
            out["summary"] = mark(api, runner, config, request=MarkRequest(
                repository_id=repository_id, run_id=run_id, now=now, min_age=min_age, dry_run=mode == "dry-run",
                engine=engine, range_partitions=range_partitions, address_partitions=address_partitions),
                graph=graph, progress=progress)
            mark_id = run_id
        if mode in ("full", "sweep"):
            if mode == "full":  # the graph may have moved while we marked: the re-check reads it anew
                graph = load_graph(api, repository_id, now=now, local_root=graph.local_root,
                                   storage_options_json=storage_options_json)
            out["run_id"] = mark_id
            out["sweep"] = sweep(api, runner, config, mark_id=mark_id, graph=graph, now=now,
                                 range_partitions=range_partitions, address_partitions=address_partitions,
                                 progress=progress)
        out["success"] = True
        return out
    finally:
        api.close()
