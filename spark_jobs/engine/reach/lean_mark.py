"""An incremental run's mark from the previous run's kept index: what retained commits keep is never computed for
the whole lake, only for what changed.

The live ranges come from the retained metaranges (those the previous run already knew from its state, the new
ones read); the ranges that died and those that appeared since are read whole, and their entries, subtracted and
added, bring the kept index up to date (``core.kept_index``). Then every key the run must judge — the dead ranges'
keys, the keys carried over, the recent slices' objects, the staged entries — is looked up in it: kept when some
live range still holds it, or a staged entry does. Used only without path policies and keep_versions (an entry's
fate then depends on its range alone); every other run goes through the whole mark (``engine.mark``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from spark_jobs.core import kept_index, range_changes, sstable
from spark_jobs.core.addresses import relative_key
from spark_jobs.core.incremental import State, Unit, units_of
from spark_jobs.core.plan import StoredObject
from spark_jobs.engine.listing.incremental import STAT_BATCH, AskedEarly, ask_for, changed, list_recent
from spark_jobs.engine.runtime.context import JobConfig, OpenContext
from spark_jobs.engine.runtime.memory import map_big_blocks, released
from spark_jobs.engine.runtime.parallel import FEW_UNITS, Runner, ThreadRunner, fitting, in_background, in_process
from spark_jobs.engine.state import index_lookup
from spark_jobs.engine.state.incremental import StoredIndex
from spark_jobs.engine.stores import StorageError

# Groups of ranges compared at once on the driver: each holds its ranges' files while it is walked (the walk
# releases the GIL), so the driver holds a few range files whatever the day touched
_GROUP_THREADS = 4
# On a runner of its own (Spark), a day that touches more ranges (dead and new) than this has them compared by its
# executors, in the same groups of overlapping key spans: what comes back of a group is its change (the day's), never
# its ranges' entries. Fewer are compared on the driver's threads, a few groups at a time: a Spark job costs about a
# second in scheduling, the driver ≈ 15 ms a range (bench/README.md "A day's ranges grouped by their metaranges'
# spans"): a random-path day at 1M objects touches 40, at 10M ≈ 400. The thread runner compares every day's ranges
# on its own threads, as the driver does. Set by spark.hadoop.lakefs.gc.daily.driver_ranges (jobs/config.py).
DRIVER_RANGES = 128
# The staged keys the lean mark holds on the driver (it looks each day's keys up in them): ≈ 10–20 MB. A day with more
# staged entries is planned as datasets, its staged keys on executors (engine/mark.py); the bound matches what a
# state carries of them (core.incremental.CARRIED_STAGED_MOST).
STAGED_MOST = 100_000


def on_driver(runner: Runner, ranges: int, most: int | None = None) -> bool:
    """Whether a day's ``ranges`` (dead and new) are compared on the driver's threads (``most``: DRIVER_RANGES)."""
    return in_process(runner) or ranges <= (DRIVER_RANGES if most is None else most)


def unit_metarange_bounds(ctx: OpenContext, metarange_id: str) \
        -> list[tuple[str, list[tuple[str, bytes, bytes]] | None]]:
    """The ranges a metarange lists with their key spans; None when it cannot be read (a dead range's span is then
    read from the range itself)."""
    try:
        return [(metarange_id, sstable.metarange_bounds(ctx.read_metarange(metarange_id)))]
    except (StorageError, sstable.SSTableError):
        return [(metarange_id, None)]


def unit_range_span(ctx: OpenContext, range_id: str) -> list[tuple[str, tuple[bytes, bytes]]]:
    return [(range_id, range_changes.span(ctx.read_range(range_id)))]


def unit_group_changes(ctx: OpenContext, unit: tuple[tuple[str, ...], tuple[str, ...]]) \
        -> list[tuple[str, object]]:
    """The change of one group of ranges whose key spans overlap (the dead ones, the new ones): only the entries
    whose count changed leave the task, and what it cost."""
    dead, new = unit
    files = {r: ctx.map_range(r) for r in dead + new}
    dropped = 0
    try:
        found, tally = range_changes.changes(files, set(dead))
    except sstable.SSTableError:
        # a copy in the range cache gone bad (the disk's, not lakeFS's file): the group again from the store
        dropped = len(ctx.from_cache.intersection(files))
        if not ctx.drop_cached(files):
            raise
        files = {r: ctx.map_range(r) for r in dead + new}
        found, tally = range_changes.changes(files, set(dead))
    cached = len(ctx.from_cache.intersection(files))
    return [("change", c) for c in found] + [("tally", {**tally.as_dict(), "ranges_from_cache": cached,
                                                        "ranges_cache_dropped": dropped})]


def spans_of(runner: Runner, config: JobConfig, *, dead: list[str], new: list[str], known: dict[str, list[str]],
             bounds: dict[str, tuple[bytes, bytes]], partitions: int) -> dict[str, tuple[bytes, bytes]]:
    """The key span of every dead and new range without reading the ranges: a new range's from the metaranges
    read this run (``bounds``), a dead one's from a metarange of the previous run that listed it (``known``: as few
    as cover them); a range no readable metarange gives is read for its span."""
    spans = {r: bounds[r] for r in new if r in bounds}
    left = set(dead) - set(bounds)
    spans.update({r: bounds[r] for r in dead if r in bounds})
    cover: list[str] = []
    for metarange_id, ranges in sorted(known.items(), key=lambda item: -len(left.intersection(item[1]))):
        if left.intersection(ranges):
            cover.append(metarange_id)
            left.difference_update(ranges)
    for _, listed in fitting(runner, cover).map_units(cover, unit_metarange_bounds, config.open,
                                                       partitions=partitions):
        spans.update((r, (lo, hi)) for r, lo, hi in listed or () if r in dead)
    unread = [r for r in dead + new if r not in spans]
    spans.update(fitting(runner, unread).map_units(unread, unit_range_span, config.open, partitions=partitions))
    return spans


def changed_blocks(runner: Runner, config: JobConfig, *, dead: list[str], new: list[str],
                   spans: dict[str, tuple[bytes, bytes]], prefixes: tuple[str, ...], partitions: int,
                   driver_ranges: int | None = None, tally: dict[str, int | str] | None = None,
                   going_down: Callable[[list[str]], None] | None = None) -> tuple[dict[int, int], set[str]]:
    """The kept index's change from the ranges that died and appeared, and the keys whose count went down: the
    dead and the new ranges put side by side as lakeFS's diff does (``core.range_changes``: blocks that repeat
    cancel out unread, the others are walked by the compiled decoder and their entries cancel out by address), in
    groups of overlapping key ``spans`` (each version of a range with the versions it replaced). A day's ranges are
    compared on the driver's threads, a few groups at a time (``on_driver``), or by the runner's executors, a task
    returning its groups' changes and costs, nothing per entry it read. On the driver, ``going_down`` is given the
    keys whose count went down in each group as soon as that group is done (``AskedEarly``)."""
    died = set(dead)
    units = [(tuple(r for r in group if r in died), tuple(r for r in group if r not in died))
             for group in range_changes.groups(spans)]
    here = on_driver(runner, len(dead) + len(new), driver_ranges)
    if here:  # the range files and their columns, megabytes each, given back when a group is done with them
        map_big_blocks()
    where = ThreadRunner(_GROUP_THREADS) if here else runner
    compare = unit_group_changes
    if here and going_down is not None:
        def compare(ctx: OpenContext, unit: tuple[tuple[str, ...], tuple[str, ...]]) -> list[tuple[str, object]]:
            out = unit_group_changes(ctx, unit)
            going_down([key for what, item in out if what == "change" and item[2] < 0
                        and (key := relative_key(item[0], item[1], prefixes)) is not None])
            return out
    cost = range_changes.Tally()
    cache = {"ranges_from_cache": 0, "ranges_cache_dropped": 0}
    count: dict[tuple[str, int], int] = {}
    for what, item in where.map_units(units, compare, config.open, partitions=partitions):
        if what == "tally":
            for name in cache:
                cache[name] += item.pop(name, 0)
            cost.add(range_changes.Tally(**item))
        else:
            address, kind, times = item
            count[(address, kind)] = count.get((address, kind), 0) + times
    if here:
        released()
    if tally is not None:
        tally.update(cost.as_dict(), **cache, entries_changed=sum(1 for n in count.values() if n),
                     compared_on="driver" if here else "runner")
    delta: dict[int, int] = {}
    gone: set[str] = set()
    for (address, kind), times in count.items():
        if times and (key := relative_key(address, kind, prefixes)) is not None:
            h = kept_index.key_hash(key)
            delta[h] = delta.get(h, 0) + times
            if times < 0:
                gone.add(key)
    return {h: n for h, n in delta.items() if n}, gone


class _Clock:
    """Seconds per step of the lean mark, for the record (where a daily run's time goes)."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._last = time.monotonic()

    def __call__(self, step: str) -> None:
        now = time.monotonic()
        self.laps[step] = round(now - self._last, 3)
        self._last = now


@dataclass
class LeanMark:
    objects: list[StoredObject]  # listed and found: the run's candidates
    committed: set[str]  # of the keys judged, those a live range holds
    range_ids: list[str]  # the live ranges
    units: frozenset[Unit]
    metaranges: dict[str, list[str]]  # retained metarange -> its ranges
    delta: dict[int, int]  # the kept index's change since its base, this run's included (what the state stores)
    index_keys: int  # how many keys the index counts now
    listing: dict


def lean_mark(state: State, index: StoredIndex, *, runner: Runner, config: JobConfig, ctx: OpenContext,
              metaranges: list[str], uncommitted: set[str], range_partitions: int,
              address_partitions: int, driver_ranges: int | None = None) -> LeanMark:
    clock = _Clock()
    known = state.metarange_ranges()
    missing = [m for m in metaranges if m not in known]
    read = dict(fitting(runner, missing).map_units(missing, unit_metarange_bounds, config.open,
                                                   partitions=range_partitions))
    if unreadable := sorted(m for m, listed in read.items() if listed is None):
        raise StorageError(f"the retained metarange {unreadable[0]} cannot be read "
                           f"({len(unreadable)} of {len(missing)} new metaranges)")
    bounds = {r: (lo, hi) for listed in read.values() for r, lo, hi in listed}
    by_metarange = {m: known[m] if m in known else [r for r, _, _ in read[m]] for m in metaranges}
    live = sorted({r for ranges in by_metarange.values() for r in ranges})
    before = set(state.range_ids)
    dead, new = sorted(before - set(live)), sorted(set(live) - before)
    clock("metaranges")
    spans = spans_of(runner, config, dead=dead, new=new, known={m: r for m, r in known.items() if m not in
                     by_metarange}, bounds=bounds, partitions=range_partitions)
    clock("spans")
    tally: dict[str, int | str] = {}
    # the recent slices are listed while the ranges are compared: neither needs the other, and the listing waits on
    # the store where the comparison works the CPU
    listing = in_background("gc-recent-slices", list_recent, state, runner=runner, config=config, ctx=ctx,
                            partitions=address_partitions)
    carried = state.carried()
    # the keys a day's comparison sees going down, and those carried over, asked for while the comparison goes on
    # (on the driver, as ask_for would ask for that many)
    early_most = FEW_UNITS * STAT_BATCH if on_driver(runner, len(dead) + len(new), driver_ranges) else 0
    with AskedEarly(ctx, skip=uncommitted, most=early_most) as early:
        early.ask(sorted(carried))
        delta, dead_keys = changed_blocks(runner, config, dead=dead, new=new, spans=spans,
                                          prefixes=tuple(ctx.prefixes), partitions=range_partitions,
                                          driver_ranges=driver_ranges, tally=tally, going_down=early.ask)
        clock("changed blocks")
        recent = listing.result()
        clock("recent slices (after the comparison)")
        seen = recent.keys
        hashes = {k: kept_index.key_hash(k) for k in dead_keys | carried | seen | uncommitted}
        judged = _judged(index, delta, hashes, runner=runner, config=config, partitions=range_partitions)
        wanted = sorted((dead_keys | carried) - judged.committed - uncommitted - seen)
        clock("lookup")
        found, rest = early.answers(wanted)
        found += ask_for(rest, runner=runner, config=config, partitions=address_partitions)
        clock("asked for")
    result = changed(state, recent, wanted=wanted, found=found, kept_index=judged.keys, ranges_dead=len(dead),
                     ranges_new=len(new), metaranges_read=len(missing), index_blocks_read=index.blocks_read,
                     index_blocks=index.blocks, **tally, seconds=clock.laps,
                     # where the index was looked up (where the touched ranges were compared: in the tally)
                     looked_up_on="driver" if index_lookup.on_driver(runner, index, judged.looked_up) else "runner",
                     keys_looked_up=judged.looked_up, **early.record(wanted))
    return LeanMark(result.objects, judged.committed, live, units_of((r, ()) for r in live), by_metarange,
                    judged.delta, judged.keys, result.listing)


@dataclass
class _Judged:
    committed: set[str]  # of the keys judged, those a live range holds
    keys: int  # how many keys the index counts now
    delta: dict[int, int]  # the index's change since its base, this run's included
    looked_up: int  # hashes looked up in the index


def _judged(index: StoredIndex, delta: dict[int, int], hashes: dict[str, int], *, runner: Runner, config: JobConfig,
            partitions: int) -> _Judged:
    """The keys of ``hashes`` the live ranges hold, once the index (read only at the keys that changed and those
    judged, by executors when they are many) takes the day's ``delta``."""
    looked_up = set(delta) | set(hashes.values())
    counted = index_lookup.counts(index, looked_up, runner=runner, config=config, partitions=partitions)
    now = {h: n + delta.get(h, 0) for h, n in counted.items()}
    if any(n < 0 for n in now.values()):
        raise kept_index.IndexError_("a range's entries were subtracted from keys the index does not count")
    keys = index.keys + sum(1 for h in delta if counted[h] <= 0 < now[h]) - sum(
        1 for h in delta if now[h] <= 0 < counted[h])
    cumulative = dict(index.delta)
    for h, n in delta.items():
        cumulative[h] = cumulative.get(h, 0) + n
    return _Judged({k for k, h in hashes.items() if now[h] > 0}, keys, {h: n for h, n in cumulative.items() if n},
                   len(looked_up))
