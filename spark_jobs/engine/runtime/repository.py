"""The lakeFS view of a repository, as a GC run needs it: its rules and cleaning policies, the history retention
can reach (``load_graph``), the staged addresses lakeFS lists, and where a local blockstore keeps the namespace."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime

from spark_jobs.core import parquet_bytes
from spark_jobs.core.addresses import FULL, RELATIVE, local_root_from, relative_key
from spark_jobs.core.cleaning import METADATA_KEY as CLEANING_KEY
from spark_jobs.core.cleaning import (
    CleaningPolicy,
    CleaningPolicyError,
    ScopedRetention,
    parse_cleaning_policies,
    savepoint_tags,
)
from spark_jobs.core.retention import DAY, Commit, GCRules, commit_from_api, read_line
from spark_jobs.engine.runtime.context import GCError
from spark_jobs.engine.runtime.lakefs_api import LakeFSApi
from spark_jobs.engine.stores import Namespace, StorageConfig, StorageError, open_namespace


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
    ns = open_namespace(storage)
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
        reason = exc.reason_or("storage-read") if isinstance(exc, StorageError) else "storage-read"
        raise GCError(f"reading lakeFS's retained commits from the namespace failed: {exc}", reason) from exc
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


def uncommitted_files(ns: Namespace, locations: list[str]) -> list[str]:
    """The files in which lakeFS wrote the staged addresses (``prepare_uncommitted``'s locations): keys under
    ``_lakefs/``, one per page of staged entries."""
    out: list[str] = []
    for location in sorted(set(locations)):
        relative = relative_key(location, FULL, ns.prefixes)
        if relative is None:
            raise GCError(f"lakeFS wrote uncommitted addresses outside the namespace: {location}", "lakefs-prepare")
        out += ns.list_metadata(relative.rstrip("/") + "/")
    return out


def read_uncommitted(ns: Namespace, locations: list[str]) -> set[str]:
    """The staged addresses lakeFS wrote at ``locations`` (``prepare_uncommitted``), relative to the namespace."""
    out: set[str] = set()
    for keys in _uncommitted_keys(ns, locations):
        out.update(keys)
    return out


def read_few_uncommitted(ns: Namespace, locations: list[str], *, most: int) -> set[str] | None:
    """``read_uncommitted``'s addresses, or None as soon as they are more than ``most`` (read a file at a time:
    never many more held)."""
    out: set[str] = set()
    for keys in _uncommitted_keys(ns, locations):
        out.update(keys)
        if len(out) > most:
            return None
    return out


def _uncommitted_keys(ns: Namespace, locations: list[str]) -> Iterator[list[str]]:
    for key in uncommitted_files(ns, locations):
        data = ns.read(key)  # outside the try: a store that fails is not a corrupt file (its StorageError's reason)
        try:
            table = parquet_bytes.read(data, columns=["physical_address"])
        except Exception as exc:  # noqa: BLE001 - pyarrow's errors vary; without this list nothing is safe
            raise GCError(f"lakeFS's list of uncommitted addresses {key} is unreadable: {exc}",
                          "corrupt-metadata") from None
        relative = (relative_key(a, FULL if "://" in a else RELATIVE, ns.prefixes)
                    for a in table.column("physical_address").to_pylist())
        yield [rel for rel in relative if rel is not None]
