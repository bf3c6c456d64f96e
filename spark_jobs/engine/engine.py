"""One GC run, whatever the runner: full (mark, then sweep that plan), mark only, sweep a stored plan, dry run.
The caller picks the Runner (threads in process, executors on Spark); everything else is this code. The result is
the run's one record (``core.report.Summary``), as stored in summary.json."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from spark_jobs.core.mark import unique_range_ids
from spark_jobs.core.report import Summary
from spark_jobs.engine import cyclic_gc, mark_cache
from spark_jobs.engine.context import GCError, JobConfig, Progress
from spark_jobs.engine.lakefs_api import LakeFSApi, LakeFSApiConfig, LakeFSApiError
from spark_jobs.engine.lease import LeaseRef
from spark_jobs.engine.mark import Marked, MarkRequest, mark
from spark_jobs.engine.parallel import Runner
from spark_jobs.engine.report import new_run_id
from spark_jobs.engine.repository import learn_local_root, load_graph
from spark_jobs.engine.storage import StorageConfig, StorageError
from spark_jobs.engine.sweep import sweep

MODES = ("full", "mark", "sweep", "dry-run")


@dataclass(frozen=True)
class RunRequest:
    repository_id: str
    mode: str = "full"
    now: datetime | None = None
    run_id: str | None = None
    mark_id: str | None = None  # the plan a sweep executes
    min_age: timedelta | None = None
    max_deletions: int | None = None
    prefix_depth: int = 2
    by_path: bool = False
    engine: str = "inprocess"  # the runner's name, for the record
    metadata_from: str = "storage"
    range_partitions: int = 50
    address_partitions: int = 200
    lease: LeaseRef | None = None  # checked before each batch of deletions (None: no lease, e.g. a benchmark)
    cache: bool = True  # the mark cache (engine/mark_cache.py); False: every range and metarange read

    def to_args(self) -> list[str]:
        """The request on a Spark job's command line: ``--field-name VALUE`` for each field of ARGUMENTS that is
        set."""
        args: list[str] = []
        for name, argument in ARGUMENTS.items():
            value = getattr(self, name)
            if value is not None:
                args += [_flag(name), argument.write(value)]
        return args

    @classmethod
    def from_args(cls, argv: Sequence[str], *, parser: argparse.ArgumentParser, **given: Any) -> RunRequest:
        """The request ``to_args`` wrote, with ``given`` for the fields that are not arguments; ``parser`` reports
        bad arguments (a job's turns them into an error event)."""
        for name, argument in ARGUMENTS.items():
            parser.add_argument(_flag(name), dest=name, type=argument.read, choices=argument.choices,
                                required=name == "repository_id")
        parsed = {name: value for name, value in vars(parser.parse_args(list(argv))).items() if value is not None}
        return cls(**parsed, **given)


@dataclass(frozen=True)
class Argument:
    """How one field of a RunRequest is written to a job's command line and read back."""

    write: Callable[[Any], str] = str
    read: Callable[[str], Any] = str
    choices: tuple[str, ...] | None = None


def _time(text: str) -> datetime:
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _yes_no(yes: bool) -> str:
    return "true" if yes else "false"


def _boolean(text: str) -> bool:
    if text not in ("true", "false"):
        raise ValueError(text)  # argparse names the argument and the value
    return text == "true"


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


# The fields of a RunRequest that travel to a Spark job (spark_jobs/jobs/gc.py) as arguments, each with its text
# form both ways. The others are the job's own: the runner's name ("spark"), and the partition counts and the lease,
# which are settings (the lease a secret too) and so arrive with the job's configuration (jobs/config.py).
ARGUMENTS: dict[str, Argument] = {
    "repository_id": Argument(),
    "mode": Argument(choices=MODES),
    "now": Argument(datetime.isoformat, _time),
    "run_id": Argument(),
    "mark_id": Argument(),
    "min_age": Argument(lambda age: str(age.total_seconds()), lambda text: timedelta(seconds=float(text))),
    "max_deletions": Argument(read=int),
    "prefix_depth": Argument(read=int),
    "by_path": Argument(_yes_no, _boolean),
    "metadata_from": Argument(choices=("storage", "lakefs")),
    "cache": Argument(_yes_no, _boolean),
}


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
    with cyclic_gc.paused():  # a run's structures are large and acyclic (engine/cyclic_gc.py)
        return _run_marked(api_config, storage, request, runner=runner, progress=progress)


def _run_marked(api_config: LakeFSApiConfig, storage: StorageConfig, request: RunRequest, *, runner: Runner,
                progress: Progress) -> tuple[Summary, Marked | None]:
    now = _check(request)
    api = LakeFSApi(api_config)
    try:
        marked = None
        if request.mode == "sweep":
            storage = resolve_storage(api, request.repository_id, storage)
            mark_id = request.mark_id or ""
        else:
            namespace = api.repository(request.repository_id)["storage_namespace"]
            # the mark cache and the listing of _lakefs/ that checks it (both history-sized) are read while lakeFS
            # answers for the history
            preload = mark_cache.Preload.start(replace(storage, namespace=namespace),
                                               repository_id=request.repository_id) if request.cache else None
            graph, storage = load_graph(api, request.repository_id, now=now, storage=storage, namespace=namespace)
            config = JobConfig(api_config, storage, request.repository_id, request.metadata_from)
            mark_id = request.run_id or new_run_id(now)
            marked = mark(api, runner, config, request=MarkRequest(
                repository_id=request.repository_id, run_id=mark_id, now=now, min_age=request.min_age,
                dry_run=request.mode == "dry-run", engine=request.engine, range_partitions=request.range_partitions,
                address_partitions=request.address_partitions, prefix_depth=request.prefix_depth,
                by_path=request.by_path, cache=request.cache), graph=graph, progress=progress, preload=preload)
            if request.mode != "full":
                return marked.summary, marked
        config = JobConfig(api_config, storage, request.repository_id, request.metadata_from)
        summary = sweep(api, runner, config, mark_id=mark_id, range_partitions=request.range_partitions,
                        address_partitions=request.address_partitions, max_deletions=request.max_deletions,
                        progress=progress, lease=request.lease)
        summary.engine = request.engine
        return summary, marked
    except LakeFSApiError as exc:
        raise GCError(str(exc), exc.reason) from exc
    except StorageError as exc:
        raise GCError(str(exc), exc.reason) from exc
    finally:
        api.close()


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
    measure of a repository's size, the one ``--engine auto`` decides by."""
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
