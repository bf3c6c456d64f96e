"""Committed garbage collection of one repository, in process: mark (a stored plan), then sweep (that plan only).

The rules are the pure functions of ``spark_jobs.core`` (the Spark engine runs the same ones on executors); this
module gathers their inputs from lakeFS and the storage namespace and carries out the verdict.

Safety, in the order it applies:
- no GC rules on the repository: nothing is marked or deleted (never "delete everything");
- retained = the seed's rule ∪ lakeFS's own retained set (``prepare_garbage_collection_commits``);
- kept = every address a retained commit reaches ∪ every staged address on every branch (hidden ones too);
- candidates: ``data/`` and legacy root objects only, never ``_lakefs/``, never outside the namespace, never newer
  than the safety cutoff (modification time);
- the mark writes its plan and summary first; the sweep runs only a successful plan, after re-reading every
  branch HEAD and staged area, and deletes nothing a branch reaches now.
"""

from __future__ import annotations

import csv
import io
import logging
import secrets
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from spark_jobs.core import report
from spark_jobs.core.addresses import FULL, RELATIVE, local_root_from, relative_key
from spark_jobs.core.cleaning import retained_set, versions_kept
from spark_jobs.core.mark import kept_keys, keys_in_range, unique_range_ids
from spark_jobs.core.plan import StoredObject, by_path_prefix, plan_deletions
from spark_jobs.core.retention import Commit, GCRules, oldest_retained, read_line
from spark_jobs.core.sstable import metarange_range_ids, range_entries
from workers.gc.cleaning_store import get_cleaning
from workers.gc.rules import get_rules_document
from workers.gc.storage import Namespace, StorageError, namespace_uris
from workers.lakefs.client import LakeFS
from workers.lakefs.errors import LakeFSError, NotFound

log = logging.getLogger(__name__)
Progress = Callable[[str, int], None]  # (what, count so far)


class GCError(RuntimeError):
    """The run cannot go on; nothing was deleted by the failing phase. ``reason`` labels the failure metric."""

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.reason = reason


class NoRules(GCError):
    def __init__(self, repository_id: str):
        super().__init__(f"lakefs://{repository_id} has no GC rules: skipped (nothing is collected without them; "
                         f"set them with `lakefs-janitor gc rules set lakefs://{repository_id} ...`)", "no-rules")


@dataclass
class MarkResult:
    summary: report.Summary
    deleted: list[StoredObject]
    retained: set[str]
    seconds: dict[str, float] = field(default_factory=dict)
    ranges: int = 0  # distinct range files read
    # why the seed's rule retains each commit it retains ("branch main", "dangling leaf …"); lakeFS's own retained
    # set is the rest of ``retained`` (minus what cleaning policies add)
    why: dict[str, str] = field(default_factory=dict)
    lakefs_retained: frozenset[str] = frozenset()
    # what the mark saw, for the impact view: commits, heads, rules, policies, listing, staged keys per branch,
    # and a reader of the keys a metarange reaches (cached per range)
    seen: dict = field(default_factory=dict)


def new_run_id(now: datetime) -> str:
    # Sorts newest first like lakeFS's descending xids: 9999999999 - seconds, then randomness.
    return f"{9_999_999_999 - int(now.timestamp()):010d}-{secrets.token_hex(4)}"


def get_rules(lakefs: LakeFS, repository_id: str) -> GCRules | None:
    document = get_rules_document(lakefs, repository_id)
    return None if document is None else GCRules.from_api(document)


def grace_period(lakefs: LakeFS) -> timedelta:
    """lakeFS's own safety period for unlinked uploads (``grace_period``, 24 h by default)."""
    try:
        config = lakefs.call("get GC config", lakefs.internal.get_garbage_collection_config)
        return timedelta(seconds=int(config.grace_period or 86400))
    except (LakeFSError, TypeError, ValueError):
        return timedelta(hours=24)


def _commit(c) -> Commit:
    return Commit(c.id, tuple(c.parents or ()), int(c.creation_date), c.meta_range_id or "")


def _first_parent_line(lakefs: LakeFS, repository_id: str, ref: str, threshold: int | None,
                       into: dict[str, Commit], depth: dict[str, float]) -> None:
    """A ref's first-parent line down to the first commit at or before ``threshold`` (None: all of it), pages
    fetched only as far as read_line goes."""
    log = (_commit(c) for c in lakefs.paginate("log commits", lakefs.refs.log_commits, repository_id, ref,
                                               first_parent=True, amount=1000))
    read_line(log, threshold, into, depth=depth)


def prepared_commits_location(lakefs: LakeFS, repository_id: str, *, timeout: float = 600) -> str:
    """Have lakeFS write its retained commits (``prepare_garbage_collection_commits``); where it wrote them."""
    task = lakefs.call("prepare GC commits", lakefs.internal.prepare_garbage_collection_commits_async, repository_id)
    deadline = time.monotonic() + timeout
    while True:
        status = lakefs.call("prepare GC commits status", lakefs.internal.prepare_garbage_collection_commits_status,
                             repository_id, task.id)
        if status.completed:
            break
        if time.monotonic() > deadline:
            raise GCError(f"lakeFS did not finish preparing GC commits in {timeout:.0f}s", "lakefs-timeout")
        time.sleep(0.2)
    if status.error:
        raise GCError(f"lakeFS failed to prepare GC commits: {status.error}", "lakefs-prepare")
    return status.result.gc_commits_location


def discover_local_root(lakefs: LakeFS, repository_id: str, namespace: str) -> str | None:
    """The folder of lakeFS's local blockstore, learnt from the full address of the commit list lakeFS writes for
    its GC (``local:///<folder>/<name>/_lakefs/...``), for deployments that did not configure it."""
    return local_root_from(namespace, prepared_commits_location(lakefs, repository_id))


def lakefs_retained(lakefs: LakeFS, ns: Namespace, ns_uris: tuple[str, ...], *, repository_id: str,
                    timeout: float = 600) -> dict[str, str]:
    """lakeFS's own retained commits (commit id → metarange id) from ``prepare_garbage_collection_commits``."""
    location = prepared_commits_location(lakefs, repository_id, timeout=timeout)
    key = relative_key(location, FULL, ns_uris)
    if key is None:
        raise GCError(f"lakeFS wrote its commit list outside the namespace ({location})", "lakefs-prepare")
    rows = csv.DictReader(io.StringIO(ns.read(key).decode()))
    return {r["commit_id"]: r.get("metarange_id", "") for r in rows if r.get("expired", "false") == "false"}


def lakefs_uncommitted(lakefs: LakeFS, ns: Namespace, ns_uris: tuple[str, ...], *, repository_id: str) -> set[str]:
    """Every staged address on every branch, hidden ones included, as lakeFS's own GC gets them: lakeFS writes
    them as parquet under ``_lakefs/retention/gc/uncommitted/`` (``prepare_garbage_collection_uncommitted``,
    paged by continuation token). One call per page, whatever the number of staged objects; the Spark engine
    reads the same files."""
    import lakefs_sdk  # noqa: PLC0415 - the SDK model, only here
    import pyarrow.parquet as pq  # noqa: PLC0415

    out: set[str] = set()
    token: str | None = None
    while True:
        answer = lakefs.call("prepare GC uncommitted", lakefs.internal.prepare_garbage_collection_uncommitted,
                             repository_id, lakefs_sdk.PrepareGCUncommittedRequest(continuation_token=token))
        if answer.gc_uncommitted_location:
            prefix = relative_key(answer.gc_uncommitted_location, FULL, ns_uris)
            if prefix is None:
                raise GCError(f"lakeFS wrote the uncommitted addresses outside the namespace "
                              f"({answer.gc_uncommitted_location})", "lakefs-prepare")
            for key in ns.list_metadata(prefix.rstrip("/") + "/"):
                table = pq.read_table(io.BytesIO(ns.read(key)), columns=["physical_address"])
                for address in table.column("physical_address").to_pylist():
                    relative = relative_key(address, FULL if "://" in address else RELATIVE, ns_uris)
                    if relative is not None:
                        out.add(relative)
        token = answer.continuation_token
        if not token:
            return out


def staged_keys_by_branch(lakefs: LakeFS, repository_id: str, branches: list[str], *,
                          ns_uris: tuple[str, ...]) -> dict[str, set[str]]:
    """Each branch's staged addresses (the impact view needs them per branch; a run takes lakeFS's own list)."""
    out: dict[str, set[str]] = {}
    for branch in branches:
        keys = out.setdefault(branch, set())
        for diff in lakefs.paginate("list uncommitted changes", lakefs.branches.diff_branch, repository_id, branch):
            if diff.type == "removed" or diff.path_type != "object":
                continue
            try:
                stat = lakefs.call("stat staged object", lakefs.objects.stat_object, repository_id, branch, diff.path)
            except NotFound:
                continue
            address = stat.physical_address
            key = relative_key(address, FULL if "://" in address else RELATIVE, ns_uris)
            if key is not None:
                keys.add(key)
    return out


def metadata_reader(lakefs: LakeFS, ns: Namespace, repository_id: str, *, source: str) -> tuple[Callable, Callable]:
    """Readers of metarange and range files: from ``<ns>/_lakefs/<id>``, or through lakeFS's metadata-object
    endpoint (for deployments that give the janitor no storage credentials for metadata)."""
    if source == "storage":
        return (lambda mid: ns.read(f"_lakefs/{mid}")), (lambda rid: ns.read(f"_lakefs/{rid}"))

    def via_api(kind: str) -> Callable[[str], bytes]:
        def read(object_id: str) -> bytes:
            response = lakefs.call(f"read {kind}", lakefs.internal.get_metadata_object_with_http_info, repository_id,
                                   object_id, kind, _preload_content=False)
            return response.raw_data
        return read

    return via_api("meta_range"), via_api("range")


def head_range_count(lakefs: LakeFS, ns: Namespace, repository_id: str, *, metadata_source: str = "storage") -> int:
    """The distinct ranges the branch HEADs reach: a cheap measure of a repository's size (one metarange read per
    distinct HEAD), the one ``--engine auto`` decides by."""
    heads = {head for _, head in lakefs.branch_heads(repository_id, show_hidden=True)}
    metaranges = {lakefs.call("get commit", lakefs.commits.get_commit, repository_id, h).meta_range_id for h in heads}
    read_metarange, _ = metadata_reader(lakefs, ns, repository_id, source=metadata_source)
    try:
        return len(unique_range_ids(metaranges, read_metarange))
    except (StorageError, LakeFSError, ValueError) as exc:
        raise GCError(f"reading the HEADs' metaranges to size the repository failed: {exc}", "metadata") from exc


def mark(lakefs: LakeFS, ns: Namespace, repository_id: str, *, now: datetime, min_age: timedelta | None,
         metadata_source: str = "storage", threads: int = 8, dry_run: bool = False, local_root: str | None = None,
         progress: Progress | None = None, prefix_depth: int = 2, by_path: bool = False) -> MarkResult:
    progress = progress or (lambda what, n: None)
    timings: dict[str, float] = {}
    started = time.monotonic()
    rules = get_rules(lakefs, repository_id)
    if rules is None:
        raise NoRules(repository_id)
    try:
        ns.probe()
    except StorageError as exc:
        raise GCError(str(exc), "storage-read") from exc
    cutoff = now - (min_age if min_age is not None else grace_period(lakefs))
    ns_uris = namespace_uris(ns, local_root=local_root)
    run_id = new_run_id(now)
    heads = dict(lakefs.branch_heads(repository_id, show_hidden=True))
    commits: dict[str, Commit] = {}
    depth: dict[str, float] = {}  # how deep each commit's line has been read (see read_line)
    now_s = int(now.timestamp())
    for branch, head in heads.items():
        _first_parent_line(lakefs, repository_id, head, now_s - rules.days(branch) * 86400, commits, depth)
    try:
        theirs = lakefs_retained(lakefs, ns, ns_uris, repository_id=repository_id)
    except StorageError as exc:
        raise GCError(f"reading lakeFS's retained commits from the namespace failed: {exc}", "storage-read") from exc
    for commit_id in theirs:  # dangling leaves only lakeFS knows of (deleted branches), with their lines
        if commit_id not in commits:
            _first_parent_line(lakefs, repository_id, commit_id, now_s - rules.default_retention_days * 86400,
                               commits, depth)
    cleaning = get_cleaning(lakefs, repository_id).policies
    versions_keys: set[str] = set()
    tags: dict[str, str] = {}
    if cleaning:  # the policies need whole first-parent lines and the tags' commits
        for branch, head in heads.items():
            if any(p.matches(branch) for p in cleaning):
                _first_parent_line(lakefs, repository_id, head, None, commits, depth)
        tags = {t.id: t.commit_id for t in lakefs.paginate("list tags", lakefs.tags.list_tags, repository_id)}
        for commit_id in set(tags.values()) - commits.keys():
            commits[commit_id] = _commit(lakefs.call("get commit", lakefs.commits.get_commit, repository_id, commit_id))
    decision = retained_set(commits=commits, branch_heads=heads, rules=rules, lakefs_retained=theirs,
                            policies=cleaning, tags=tags, now=now)
    retained = set(decision.commits)
    progress("commits", len(retained))
    metaranges = {commits[c].meta_range_id if c in commits else theirs.get(c, "") for c in retained}
    timings["commits"] = time.monotonic() - started

    t = time.monotonic()
    read_metarange, read_range = metadata_reader(lakefs, ns, repository_id, source=metadata_source)
    with ThreadPoolExecutor(threads) as pool:
        try:
            range_ids = unique_range_ids(metaranges, read_metarange, map_=pool.map)
            progress("ranges", len(range_ids))
            kept = kept_keys(range_ids, read_range, ns_uris, map_=pool.map)
        except (StorageError, LakeFSError) as exc:
            raise GCError(f"reading committed metadata failed: {exc}", "metadata") from exc
        except ValueError as exc:  # SSTableError: a corrupt range or metarange
            raise GCError(f"committed metadata is unreadable: {exc}", "corrupt-metadata") from exc
        if cleaning:
            try:
                versions_keys = versions_kept(commits=commits, branch_heads=heads, policies=cleaning,
                                              read_metarange=read_metarange, read_range=read_range,
                                              namespace_uris=ns_uris)
            except (StorageError, LakeFSError, ValueError) as exc:
                raise GCError(f"reading file versions for keep_versions failed: {exc}", "metadata") from exc
    kept |= versions_keys
    try:
        kept |= lakefs_uncommitted(lakefs, ns, ns_uris, repository_id=repository_id)
    except StorageError as exc:
        raise GCError(f"reading lakeFS's list of uncommitted addresses failed: {exc}", "storage-read") from exc
    timings["mark"] = time.monotonic() - t

    t = time.monotonic()
    try:
        listed = list(ns.list_data())
    except StorageError as exc:
        raise GCError(str(exc), "storage-list") from exc
    progress("objects listed", len(listed))
    deleted, plan = plan_deletions(listed, kept, cutoff.timestamp(), prefix_depth=prefix_depth)
    paths: dict[str, str] = {}
    if by_path:  # names for what goes: read the expired commits too (only when asked for: it reads history)
        try:
            paths = _paths_of(lakefs, repository_id, heads=heads, commits=commits, keys={o.key for o in deleted},
                              read_metarange=read_metarange, read_range=read_range, ns_uris=ns_uris)
        except (StorageError, LakeFSError, ValueError) as exc:
            raise GCError(f"naming the planned objects by path failed: {exc}", "metadata") from exc
    timings["plan"] = time.monotonic() - t
    summary = report.Summary(
        run_id=run_id, repository_id=repository_id, success=True, start_time=now.isoformat(),
        cutoff_time=cutoff.isoformat(), num_deleted_objects=plan.deleted, deleted_bytes=plan.deleted_bytes,
        retained_commits=len(retained), kept_objects=plan.kept, candidates=plan.candidates, too_new=plan.too_new,
        dry_run=dry_run, by_prefix=plan.by_prefix, oldest_retained=oldest_retained(commits, heads, retained),
        policies=["gc rules", *(p.id for p in cleaning)],
        by_path=by_path_prefix(deleted, paths, prefix_depth) if by_path else {})
    try:  # the plan is on record before anything can be deleted
        ns.write(report.deleted_key(run_id), report.deleted_parquet([o.key for o in deleted],
                                                                   [o.size for o in deleted]))
        ns.write(report.summary_key(run_id), summary.dumps())
    except StorageError as exc:
        raise GCError(f"writing the plan failed: {exc}", "storage-write") from exc
    seen = {"commits": commits, "heads": heads, "rules": rules, "cleaning": cleaning, "tags": tags, "listed": listed,
            "staged_by_branch": lambda: staged_keys_by_branch(lakefs, repository_id, list(heads), ns_uris=ns_uris),
            "kept": kept, "cutoff": cutoff.timestamp(),
            "keys_of": _keys_reader(read_metarange, read_range, ns_uris), "read_metarange": read_metarange,
            "read_range": read_range, "ns_uris": ns_uris}
    return MarkResult(summary, deleted, retained, seconds=timings, ranges=len(range_ids), seen=seen,
                      why=dict(decision.why), lakefs_retained=frozenset(theirs))


def _paths_of(lakefs: LakeFS, repository_id: str, *, heads: dict[str, str], commits: dict[str, Commit],
              keys: set[str], read_metarange: Callable, read_range: Callable, ns_uris: tuple[str, ...]) -> dict[str, str]:
    """The path some commit gave each of ``keys``: every commit of every branch's whole log (merged lines too)
    and every commit the mark already knows (dangling ones), each distinct range read once."""
    if not keys:
        return {}
    known = dict(commits)
    for head in set(heads.values()):
        for c in lakefs.paginate("log commits", lakefs.refs.log_commits, repository_id, head, amount=1000):
            known.setdefault(c.id, _commit(c))
    paths: dict[str, str] = {}
    ranges = unique_range_ids({c.meta_range_id for c in known.values()}, read_metarange)
    for range_id in sorted(ranges):
        for path, address, kind, _ in range_entries(read_range(range_id)):
            key = relative_key(address, kind, ns_uris)
            if key in keys and key not in paths:
                paths[key] = path.decode(errors="replace")
        if len(paths) == len(keys):
            break
    return paths


def _keys_reader(read_metarange: Callable, read_range: Callable, ns_uris: tuple[str, ...]) -> Callable:
    """keys_of(metarange id) -> the namespace keys that metarange reaches, each range read once."""
    cache: dict[str, set[str]] = {}

    def keys_of(meta_range_id: str) -> set[str]:
        out: set[str] = set()
        for range_id in metarange_range_ids(read_metarange(meta_range_id)) if meta_range_id else []:
            if range_id not in cache:
                cache[range_id] = keys_in_range(read_range(range_id), ns_uris)
            out |= cache[range_id]
        return out

    return keys_of


def load_plan(ns: Namespace, run_id: str) -> tuple[report.Summary, list[StoredObject]]:
    try:
        summary = report.Summary.parse(ns.read(report.summary_key(run_id)))
    except StorageError as exc:
        raise GCError(f"no GC plan {run_id!r} in {ns.uri}: {exc}", "no-plan") from exc
    except ValueError as exc:
        raise GCError(f"GC plan {run_id!r} has an unreadable summary: {exc}", "no-plan") from exc
    if not summary.success:
        raise GCError(f"GC plan {run_id} did not succeed; it will not be executed", "failed-plan")
    keys, sizes = report.read_deleted(ns.read(report.deleted_key(run_id)))
    return summary, [StoredObject(k, s, 0.0) for k, s in zip(keys, sizes, strict=True)]


def reachable_now(lakefs: LakeFS, ns: Namespace, repository_id: str, *, retained: set[str], metadata_source: str,
                  threads: int, local_root: str | None = None) -> set[str]:
    """What branches reach right now and the mark did not account for: HEADs that moved (a reset to an old
    commit during the run) and every staged address."""
    ns_uris = namespace_uris(ns, local_root=local_root)
    heads = dict(lakefs.branch_heads(repository_id, show_hidden=True))
    moved = [h for h in heads.values() if h not in retained]
    metaranges = {lakefs.call("get commit", lakefs.commits.get_commit, repository_id, h).meta_range_id for h in moved}
    read_metarange, read_range = metadata_reader(lakefs, ns, repository_id, source=metadata_source)
    with ThreadPoolExecutor(threads) as pool:
        kept = kept_keys(unique_range_ids(metaranges, read_metarange, map_=pool.map), read_range, ns_uris,
                         map_=pool.map)
    return kept | lakefs_uncommitted(lakefs, ns, ns_uris, repository_id=repository_id)


def sweep(lakefs: LakeFS, ns: Namespace, repository_id: str, *, run_id: str, retained: set[str] | None = None,
          metadata_source: str = "storage", threads: int = 8, local_root: str | None = None,
          progress: Progress | None = None, max_deletions: int | None = None) -> report.Summary:
    progress = progress or (lambda what, n: None)
    summary, planned = load_plan(ns, run_id)
    if summary.repository_id != repository_id:
        raise GCError(f"plan {run_id} belongs to lakefs://{summary.repository_id}, not {repository_id}", "no-plan")
    if summary.dry_run:
        raise GCError(f"plan {run_id} was a dry run; run a plan without --dry-run to sweep", "dry-run-plan")
    try:
        spare = reachable_now(lakefs, ns, repository_id, retained=retained or set(), metadata_source=metadata_source,
                              threads=threads, local_root=local_root)
    except (StorageError, LakeFSError, ValueError) as exc:
        raise GCError(f"re-checking branches before the sweep failed: {exc}; nothing deleted", "recheck") from exc
    doomed = [o.key for o in planned if o.key not in spare]
    summary.spared_by_recheck = len(planned) - len(doomed)
    if max_deletions is not None and len(doomed) > max_deletions:
        # a long pause must not produce one huge run: the rest is still garbage next time
        log.warning("gc: %d objects to delete, capped at %d this run", len(doomed), max_deletions)
        summary.capped = len(doomed) - max_deletions
        doomed = doomed[:max_deletions]
    if summary.spared_by_recheck:
        log.warning("gc: %d planned objects became reachable during the run and are kept", summary.spared_by_recheck)
    try:
        deleted = 0
        for i in range(0, len(doomed), 1000):
            deleted += ns.delete(doomed[i:i + 1000])
            progress("deleted", deleted)
    except StorageError as exc:
        summary.error = f"sweep stopped after {deleted} objects: {exc}"
        summary.success = False
        summary.swept = deleted
        ns.write(report.summary_key(run_id), summary.dumps())
        raise GCError(summary.error, "storage-delete") from exc
    summary.phase, summary.swept = "swept", deleted
    summary.num_deleted_objects = deleted
    ns.write(report.summary_key(run_id), summary.dumps())
    return summary


def run(lakefs: LakeFS, ns: Namespace, repository_id: str, *, now: datetime | None = None,
        min_age: timedelta | None = None, dry_run: bool = False, metadata_source: str = "storage", threads: int = 8,
        local_root: str | None = None, progress: Progress | None = None,
        max_deletions: int | None = None) -> tuple[report.Summary, MarkResult]:
    """Mark, then (unless a dry run) sweep exactly that plan."""
    if now is not None and not dry_run and now > datetime.now(UTC) + timedelta(seconds=5):
        raise GCError("a run dated in the future would delete objects not yet expired; only --dry-run may look "
                      "ahead", "future-now")
    now = now or datetime.now(UTC)
    marked = mark(lakefs, ns, repository_id, now=now, min_age=min_age, metadata_source=metadata_source,
                  threads=threads, dry_run=dry_run, local_root=local_root, progress=progress)
    if dry_run:
        return marked.summary, marked
    summary = sweep(lakefs, ns, repository_id, run_id=marked.summary.run_id, retained=marked.retained,
                    metadata_source=metadata_source, threads=threads, local_root=local_root, progress=progress,
                    max_deletions=max_deletions)
    return summary, marked
