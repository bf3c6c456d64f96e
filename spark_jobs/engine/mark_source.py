"""The mark over the mark cache (mark_cache.py): the retained commits' metaranges and ranges, each taken from the
cache when it holds them and read otherwise (by the runner, one unit per unseen file, each returning what its file
held), then the kept addresses computed on the driver from the entries, exactly as the reading mark does
(mark.reached, versions_kept): the same decisions over the same entries, so the same plan."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spark_jobs.core import sstable
from spark_jobs.core.addresses import key_mapper
from spark_jobs.core.cleaning import (
    Scope,
    ScopedRetention,
    kept_addresses,
    range_commits,
    scope_of,
    versions_kept_from,
)
from spark_jobs.core.mark_cache import Memory
from spark_jobs.engine.parallel import ThreadRunner

# Up to this many unseen files are read by the driver's threads, whatever the runner: a daily run reads a few
# dozen new files, and a Spark job per kind of file costs more in scheduling than reading them
DRIVER_READS = 64


# Per-unit steps (on executors or threads): what one file held, as the cache keeps it.
def unit_metarange_read(ctx: Any, metarange_id: str) -> list[tuple[str, int, list[tuple[bytes, str]]]]:
    data = ctx.read_metarange(metarange_id)
    return [(metarange_id, len(data), sstable.metarange_spans(data, seen_blocks=ctx.metarange_blocks))]


def unit_metarange_bytes(ctx: Any, metarange_id: str) -> list[tuple[str, bytes]]:
    return [(metarange_id, ctx.read_metarange(metarange_id))]


def unit_range_read(ctx: Any, range_id: str) -> list[tuple[str, int, tuple[bytes, ...], list]]:
    """(range id, size, block digests, [(digest, entries)] of the blocks this partition had not decoded yet: the
    others went back with an earlier range of the partition)."""
    data = ctx.read_range(range_id)
    digests, new = sstable.range_blocks(data, seen_blocks=ctx.seen_blocks)
    return [(range_id, len(data), tuple(digests), [(d, [(p, a, k) for p, a, k, _ in es]) for d, es in new])]


class Source:
    """The run's view of metadata files: the cache's trusted entries, then what the runner (or, for the few files
    only keep_versions asks for, the driver) reads; remembers what the run used."""

    def __init__(self, memory: Memory, *, runner: Any, open_context: Callable[[], Any], partitions: int,
                 driver: Any) -> None:
        self.memory, self.runner, self.open_context = memory, runner, open_context
        self.partitions, self.driver = partitions, driver
        self.used_metaranges: set[str] = set()
        self.used_ranges: set[str] = set()
        self.read = {"metaranges": 0, "ranges": 0}
        self.metarange_blocks: dict[bytes, list[tuple[bytes, str]]] = {}  # for the driver's decoding
        self.cached = {"metaranges": 0, "ranges": 0}

    def metaranges(self, ids: list[str]) -> None:
        self._count("metaranges", ids, self.memory.metaranges)
        unseen = [m for m in ids if m not in self.memory.metaranges]
        if len(unseen) > DRIVER_READS:
            for mid, size, spans in self._map(unseen, unit_metarange_read):
                self.memory.add_metarange(mid, size, spans)
            return
        # A daily run's new metaranges are consecutive commits' and share nearly all their blocks: fetched in
        # parallel, decoded one after another so that each distinct block is decoded once
        for mid, data in self._map(unseen, unit_metarange_bytes):
            self.memory.add_metarange(mid, len(data), sstable.metarange_spans(data, seen_blocks=self.metarange_blocks))

    def ranges(self, ids: list[str]) -> None:
        self._count("ranges", ids, self.memory.ranges)
        self._take(self._map([r for r in ids if r not in self.memory.ranges], unit_range_read))

    def _map(self, unseen: list[str], fn: Callable[[Any, str], list]) -> list:
        runner = self.runner if len(unseen) > DRIVER_READS else ThreadRunner()
        return runner.map_units(unseen, fn, self.open_context, partitions=self.partitions)

    def _count(self, kind: str, ids: list[str], known: dict) -> None:
        fresh = [i for i in ids if i not in (self.used_metaranges if kind == "metaranges" else self.used_ranges)]
        (self.used_metaranges if kind == "metaranges" else self.used_ranges).update(fresh)
        hits = sum(1 for i in fresh if i in known)
        self.cached[kind] += hits
        self.read[kind] += len(fresh) - hits

    def _take(self, results: list) -> None:
        for range_id, size, digests, new in results:
            self.memory.ranges[range_id] = (size, digests)
            for digest, entries in new:
                self.memory.blocks.setdefault(digest, entries)

    def spans(self, metarange_id: str) -> tuple[tuple[bytes, str], ...]:
        if metarange_id not in self.memory.metaranges or metarange_id not in self.used_metaranges:
            self._count("metaranges", [metarange_id], self.memory.metaranges)
            if metarange_id not in self.memory.metaranges:
                self.memory.add_metarange(*unit_metarange_read(self.driver, metarange_id)[0])
        return self.memory.spans_of(metarange_id)

    def blocks(self, range_id: str) -> tuple[bytes, ...]:
        if range_id not in self.memory.ranges or range_id not in self.used_ranges:
            self._count("ranges", [range_id], self.memory.ranges)
            if range_id not in self.memory.ranges:
                self._take(unit_range_read(self.driver, range_id))
        return self.memory.ranges[range_id][1]

    def to_keep(self) -> Memory:
        return self.memory.subset(self.used_metaranges, self.used_ranges)

    def stats(self) -> dict[str, int]:
        return {"metaranges_cached": self.cached["metaranges"], "metaranges_read": self.read["metaranges"],
                "ranges_cached": self.cached["ranges"], "ranges_read": self.read["ranges"]}


def reached(source: Source, graph: Any, *, retention: ScopedRetention, metaranges: list[str],
            prefixes: tuple[str, ...]) -> tuple[set[str], list[str]]:
    """mark.reached over ``source``: the addresses the retained commits keep, and the ranges they reach."""
    source.metaranges(metaranges)
    # In key order, as mark.reached: the versions of one key span fall in one partition, which then decodes the
    # data blocks they share once. Distinct spans only: a long history's metaranges list the same ranges again
    # and again (a thousand commits of ~500 ranges each are half a million spans, about a thousand distinct)
    range_ids = list(dict.fromkeys(r for _, r in sorted(source.memory.distinct_spans(metaranges))))
    source.ranges(range_ids)
    blocks = source.memory.blocks
    relative_key = key_mapper(prefixes)
    if not retention.by_path:
        digests = dict.fromkeys(d for r in range_ids for d in source.blocks(r))
        return {k for d in digests for _, a, t in blocks[d] if (k := relative_key(a, t)) is not None}, range_ids
    members = [(m, key, r) for m in metaranges for key, r in source.spans(m)]
    holding = range_commits(members, retention.bound().commits, metarange_of=graph.metarange_of)
    path_policies = tuple(p for p in graph.cleaning if p.paths)
    scoped: dict[bytes, dict[Scope, set[str]]] = {}  # per distinct block: its keys by scope of their paths
    entries = []
    for range_id in range_ids:
        by_scope: dict[Scope, set[str]] = {}
        for digest in source.blocks(range_id):
            if digest not in scoped:
                scoped[digest] = {}
                for path, address, kind in blocks[digest]:
                    if (key := relative_key(address, kind)) is not None:
                        scope = scope_of(path.decode(errors="replace"), path_policies)
                        scoped[digest].setdefault(scope, set()).add(key)
            for scope, keys in scoped[digest].items():
                by_scope.setdefault(scope, set()).update(keys)
        entries += [(range_id, scope, tuple(sorted(keys))) for scope, keys in by_scope.items()]
    retention.of(Scope())  # the branch-level decision is always part of the record
    return kept_addresses(entries, holding, retention), range_ids


def versions(source: Source, graph: Any, *, prefixes: tuple[str, ...]) -> set[str]:
    """keep_versions (cleaning.versions_kept) over ``source``."""
    relative_key = key_mapper(prefixes)

    def entries_of(range_id: str, seen_blocks: set[bytes]) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for digest in source.blocks(range_id):
            if digest not in seen_blocks:
                seen_blocks.add(digest)
                out += [(path.decode(), key) for path, address, kind in source.memory.blocks[digest]
                        if (key := relative_key(address, kind)) is not None]
        return out

    return versions_kept_from(commits=graph.commits, branch_heads=graph.heads, policies=graph.cleaning,
                              range_ids_of=lambda m: [r for _, r in source.spans(m)], entries_of=entries_of)
