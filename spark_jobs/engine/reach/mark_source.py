"""Where the mark reads committed metadata from: one interface (``Source``), two implementations. ``Files`` reads
the metaranges and range files themselves (many by the runner, one unit per file, each returning only what the
mark asks of its file; one at a time on the driver). ``Cached`` puts the mark cache (mark_cache.py) in front of
``Files``: what the cache holds is taken from it, the rest read through ``Files`` (each unit returning what its
file held, as the cache keeps it), and the answers computed on the driver from the entries. The mark's decisions
(mark.py: the ranges reached, the addresses kept, keep_versions) are written once over ``Source``, so both
implementations give the same plan."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from spark_jobs.core import kept_index, sstable
from spark_jobs.core.addresses import key_mapper
from spark_jobs.core.cleaning import CleaningPolicy, Scope
from spark_jobs.core.mark import keys_in_range, scope_of
from spark_jobs.core.mark_cache import Memory
from spark_jobs.engine.runtime.context import OpenContext
from spark_jobs.engine.runtime.parallel import FEW_UNITS, Runner, ThreadRunner

Span = tuple[bytes, str]  # (first key, range id) of one range a metarange lists
Member = tuple[str, bytes, str]  # (metarange id, first key, range id)
Scoped = tuple[str, Scope, tuple[str, ...]]  # (range id, scope, keys of the range's entries in that scope)

# Up to this many files the cache does not hold are read by the driver's threads, whatever the runner (the rule
# of parallel.fitting): a daily run reads a few dozen new files
DRIVER_READS = FEW_UNITS


class Source(Protocol):
    """What the mark asks of the committed metadata. Keys are relative to the namespace (addresses outside it are
    left out)."""

    def spans(self, metaranges: list[str]) -> Iterable[Span]:
        """The distinct spans the metaranges list."""

    def members(self, metaranges: list[str]) -> list[Member]:
        """Every range each metarange lists."""

    def addresses(self, range_ids: list[str]) -> set[str]:
        """The keys the ranges' entries point at."""

    def former_addresses(self, range_ids: list[str]) -> set[str]:
        """The keys of ranges no retained commit reaches any more (an incremental run's candidates): as
        ``addresses``, but not remembered for the next run."""

    def scoped(self, range_ids: list[str], path_policies: tuple[CleaningPolicy, ...]) -> list[Scoped]:
        """The ranges' keys grouped by the scope of their paths (which of ``path_policies`` cover them)."""

    def range_ids_of(self, metarange_id: str) -> list[str]:
        """The ranges one metarange lists (on the driver: keep_versions walks a history one commit at a time)."""

    def entries_of(self, range_id: str, seen_blocks: set[bytes]) -> list[tuple[str, str]]:
        """(path, key) of a range's entries, of its data blocks not in ``seen_blocks`` at least, which it adds
        to (on the driver, as ``range_ids_of``)."""


def by_scope(entries: Iterable[tuple[bytes, str, int]], path_policies: tuple[CleaningPolicy, ...],
             relative_key: Callable[[str, int], str | None]) -> dict[Scope, set[str]]:
    """The keys of (path, address, kind) entries grouped by the scope of their paths."""
    out: dict[Scope, set[str]] = {}
    for path, address, kind in entries:
        if (key := relative_key(address, kind)) is not None:
            out.setdefault(scope_of(path.decode(errors="replace"), path_policies), set()).add(key)
    return out


# Per-unit steps (on executors or threads). What Files asks of a file:
def unit_metarange_spans(ctx: OpenContext, metarange_id: str) -> list[Span]:
    return sstable.metarange_spans(ctx.read_metarange(metarange_id), seen_blocks=ctx.metarange_blocks)


def unit_metarange_members(ctx: OpenContext, metarange_id: str) -> list[Member]:
    return [(metarange_id, k, r) for k, r in unit_metarange_spans(ctx, metarange_id)]


def unit_metarange_counts(ctx: OpenContext, metarange_id: str) -> list[tuple[str, int]]:
    return [(r.range_id, r.count) for r in sstable.metarange_ranges(ctx.read_metarange(metarange_id))]


def unit_range_addresses(ctx: OpenContext, range_id: str) -> list[str]:
    return sorted(keys_in_range(ctx.read_range(range_id), ctx.prefixes, ctx.seen_blocks))


def unit_range_scoped(ctx: OpenContext, unit: tuple[str, tuple[CleaningPolicy, ...]]) -> list[Scoped]:
    range_id, path_policies = unit
    entries = ((p, a, k) for p, a, k, _ in sstable.range_entries(ctx.read_range(range_id)))
    return [(range_id, scope, tuple(sorted(keys)))
            for scope, keys in by_scope(entries, path_policies, key_mapper(ctx.prefixes)).items()]


# What Cached asks of a file it does not hold: what the file held, as the cache keeps it.
def unit_metarange_read(ctx: OpenContext, metarange_id: str) -> list[tuple[str, int, list[Span]]]:
    data = ctx.read_metarange(metarange_id)
    return [(metarange_id, len(data), sstable.metarange_spans(data, seen_blocks=ctx.metarange_blocks))]


def unit_metarange_bytes(ctx: OpenContext, metarange_id: str) -> list[tuple[str, bytes]]:
    return [(metarange_id, ctx.read_metarange(metarange_id))]


def unit_range_read(ctx: OpenContext, range_id: str) -> list[tuple[str, int, tuple[bytes, ...], list]]:
    """(range id, size, block digests, [(digest, entries)] of the blocks this partition had not decoded yet: the
    others went back with an earlier range of the partition)."""
    data = ctx.read_range(range_id)
    digests, new = sstable.range_blocks(data, seen_blocks=ctx.seen_blocks)
    return [(range_id, len(data), tuple(digests), [(d, [(p, a, k) for p, a, k, _ in es]) for d, es in new])]


class Files:
    """The metadata files themselves: many read by ``runner`` (one context per partition, from
    ``open_context``), one at a time by ``driver`` (an open context of the calling thread)."""

    def __init__(self, *, runner: Runner, open_context: Callable[[], OpenContext], partitions: int,
                 driver: OpenContext) -> None:
        self.runner, self.open_context, self.partitions, self.driver = runner, open_context, partitions, driver
        self.relative_key = key_mapper(driver.prefixes)

    def map(self, units: list, fn: Callable[[OpenContext, Any], list], *, local: bool = False) -> list:
        """Everything ``fn`` returns for every unit, by the runner (``local``: by the driver's threads)."""
        runner = ThreadRunner() if local else self.runner
        return runner.map_units(units, fn, self.open_context, partitions=self.partitions)

    def spans(self, metaranges: list[str]) -> set[Span]:
        return set(self.map(metaranges, unit_metarange_spans))

    def members(self, metaranges: list[str]) -> list[Member]:
        return self.map(metaranges, unit_metarange_members)

    def entries(self, metaranges: list[str], range_ids: list[str]) -> int:
        """The entries of the ranges ``range_ids``, as the metaranges' records count them (no range is read). Asked
        of few ranges (a run choosing its path), whose metaranges share most of them: read one at a time by the
        driver until every range is counted, not all of a long history again."""
        counts: dict[str, int] = {}
        wanted = set(range_ids)
        for metarange_id in metaranges:
            for range_id, count in unit_metarange_counts(self.driver, metarange_id):
                if range_id in wanted:
                    counts[range_id] = count
            if len(counts) == len(wanted):
                break
        return sum(counts.values())

    def addresses(self, range_ids: list[str]) -> set[str]:
        return set(self.map(range_ids, unit_range_addresses))

    def former_addresses(self, range_ids: list[str]) -> set[str]:
        return self.addresses(range_ids)

    def scoped(self, range_ids: list[str], path_policies: tuple[CleaningPolicy, ...]) -> list[Scoped]:
        return self.map([(r, path_policies) for r in range_ids], unit_range_scoped)

    def range_ids_of(self, metarange_id: str) -> list[str]:
        return sstable.metarange_range_ids(self.driver.read_metarange(metarange_id))

    def entries_of(self, range_id: str, seen_blocks: set[bytes]) -> list[tuple[str, str]]:
        return [(path.decode(), key) for path, address, kind, _ in
                sstable.range_entries(self.driver.read_range(range_id), seen_blocks=seen_blocks)
                if (key := self.relative_key(address, kind)) is not None]


class Cached:
    """The cache's trusted entries in front of ``files``: each file the cache does not hold is read once, by the
    runner when there are many, by the driver's threads when few, by the driver alone for the single files only
    keep_versions asks for. Remembers what the run used (``to_keep``) and what it took from where (``stats``)."""

    def __init__(self, memory: Memory, files: Files) -> None:
        self.memory, self.files = memory, files
        self.relative_key = files.relative_key
        self.used_metaranges: set[str] = set()
        self.used_ranges: set[str] = set()
        self.read = {"metaranges": 0, "ranges": 0}
        self.metarange_blocks: dict[bytes, list[Span]] = {}  # for the driver's decoding
        self.cached = {"metaranges": 0, "ranges": 0}

    def spans(self, metaranges: list[str]) -> list[Span]:
        # Distinct spans only: a long history's metaranges list the same ranges again and again (a thousand
        # commits of ~500 ranges each are half a million spans, about a thousand distinct)
        self._metaranges(metaranges)
        return self.memory.distinct_spans(metaranges)

    def members(self, metaranges: list[str]) -> list[Member]:
        self._metaranges(metaranges)
        return [(m, key, r) for m in metaranges for key, r in self._spans_of(m)]

    def addresses(self, range_ids: list[str]) -> set[str]:
        self._ranges(range_ids)
        blocks, relative_key = self.memory.blocks, self.relative_key
        digests = dict.fromkeys(d for r in range_ids for d in self._blocks(r))
        return {k for d in digests for _, a, t in blocks[d] if (k := relative_key(a, t)) is not None}

    def key_counts(self, range_ids: list[str]) -> dict[int, int]:
        """The kept index's counts (``core.kept_index``) for ``range_ids``: each key's hash -> how many entries of
        those ranges point at it. Each distinct block's keys are mapped and hashed once, then counted once per
        range that holds the block."""
        self._ranges(range_ids)
        holders: dict[bytes, int] = {}
        for range_id in range_ids:
            for digest in self._blocks(range_id):
                holders[digest] = holders.get(digest, 0) + 1
        counts: dict[int, int] = {}
        blocks, relative_key, key_hash = self.memory.blocks, self.relative_key, kept_index.key_hash
        for digest, times in holders.items():
            for _, address, kind in blocks[digest]:
                if (key := relative_key(address, kind)) is not None:
                    h = key_hash(key)
                    counts[h] = counts.get(h, 0) + times
        return counts

    def former_addresses(self, range_ids: list[str]) -> set[str]:
        held = [r for r in range_ids if r in self.memory.ranges]
        blocks, relative_key = self.memory.blocks, self.relative_key
        digests = dict.fromkeys(d for r in held for d in self.memory.ranges[r][1])
        keys = {k for d in digests for _, a, t in blocks[d] if (k := relative_key(a, t)) is not None}
        return keys | self.files.addresses([r for r in range_ids if r not in self.memory.ranges])

    def scoped(self, range_ids: list[str], path_policies: tuple[CleaningPolicy, ...]) -> list[Scoped]:
        self._ranges(range_ids)
        scoped: dict[bytes, dict[Scope, set[str]]] = {}  # per distinct block: its keys by scope of their paths
        out: list[Scoped] = []
        for range_id in range_ids:
            keys_by_scope: dict[Scope, set[str]] = {}
            for digest in self._blocks(range_id):
                if digest not in scoped:
                    scoped[digest] = by_scope(self.memory.blocks[digest], path_policies, self.relative_key)
                for scope, keys in scoped[digest].items():
                    keys_by_scope.setdefault(scope, set()).update(keys)
            out += [(range_id, scope, tuple(sorted(keys))) for scope, keys in keys_by_scope.items()]
        return out

    def range_ids_of(self, metarange_id: str) -> list[str]:
        return [r for _, r in self._spans_of(metarange_id)]

    def entries_of(self, range_id: str, seen_blocks: set[bytes]) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for digest in self._blocks(range_id):
            if digest not in seen_blocks:
                seen_blocks.add(digest)
                out += [(path.decode(), key) for path, address, kind in self.memory.blocks[digest]
                        if (key := self.relative_key(address, kind)) is not None]
        return out

    def _metaranges(self, ids: list[str]) -> None:
        self._count("metaranges", ids, self.memory.metaranges)
        unseen = [m for m in ids if m not in self.memory.metaranges]
        if len(unseen) > DRIVER_READS:
            for mid, size, spans in self.files.map(unseen, unit_metarange_read):
                self.memory.add_metarange(mid, size, spans)
            return
        # A daily run's new metaranges are consecutive commits' and share nearly all their blocks: fetched in
        # parallel, decoded one after another so that each distinct block is decoded once
        for mid, data in self.files.map(unseen, unit_metarange_bytes, local=True):
            self.memory.add_metarange(mid, len(data), sstable.metarange_spans(data, seen_blocks=self.metarange_blocks))

    def _ranges(self, ids: list[str]) -> None:
        self._count("ranges", ids, self.memory.ranges)
        unseen = [r for r in ids if r not in self.memory.ranges]
        self._take(self.files.map(unseen, unit_range_read, local=len(unseen) <= DRIVER_READS))

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

    def _spans_of(self, metarange_id: str) -> tuple[Span, ...]:
        if metarange_id not in self.memory.metaranges or metarange_id not in self.used_metaranges:
            self._count("metaranges", [metarange_id], self.memory.metaranges)
            if metarange_id not in self.memory.metaranges:
                self.memory.add_metarange(*unit_metarange_read(self.files.driver, metarange_id)[0])
        return self.memory.spans_of(metarange_id)

    def _blocks(self, range_id: str) -> tuple[bytes, ...]:
        if range_id not in self.memory.ranges or range_id not in self.used_ranges:
            self._count("ranges", [range_id], self.memory.ranges)
            if range_id not in self.memory.ranges:
                self._take(unit_range_read(self.files.driver, range_id))
        return self.memory.ranges[range_id][1]

    def to_keep(self) -> Memory:
        return self.memory.subset(self.used_metaranges, self.used_ranges)

    def stats(self) -> dict[str, int]:
        return {"metaranges_cached": self.cached["metaranges"], "metaranges_read": self.read["metaranges"],
                "ranges_cached": self.cached["ranges"], "ranges_read": self.read["ranges"]}
