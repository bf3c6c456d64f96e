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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from spark_jobs.core import kept_index, range_changes, sstable
from spark_jobs.core.addresses import relative_key
from spark_jobs.core.incremental import State, Unit, units_of
from spark_jobs.core.plan import StoredObject
from spark_jobs.engine.listing.incremental import ask_for, changed, list_recent
from spark_jobs.engine.runtime.context import JobConfig, OpenContext
from spark_jobs.engine.runtime.parallel import FEW_UNITS, Runner, fitting, in_process
from spark_jobs.engine.state import index_lookup
from spark_jobs.engine.state.incremental import StoredIndex

_WALKERS = 2  # threads walking a day's ranges on the driver: the walk releases the GIL, the machine has cores
# On a runner of its own (Spark), a day that touches more ranges than this has them read and compared by its
# executors, in groups of overlapping key spans: what comes back of a group is its change (the day's), never its
# ranges' entries, so the driver holds a few range files at most, whatever the lake holds. (A random-path day
# touches most ranges: lakeFS rewrites every range a commit changes.) The thread runner keeps up to FEW_UNITS on the
# driver's threads: its process holds them wherever they are read. 16 (dead and new: 8 touched ranges, at most
# 160 MiB of range files at lakeFS's 20 MiB cut) keeps a small lake's day off the executors, whose two Spark jobs
# cost seconds more than the driver's threads take (bench/README.md "A day's ranges on executors").
DRIVER_RANGES = 16


def on_driver(runner: Runner, ranges: int) -> bool:
    """Whether a day's ``ranges`` (dead and new) are read and compared on the driver's threads."""
    return ranges <= (FEW_UNITS if in_process(runner) else DRIVER_RANGES)


def unit_metarange_ranges(ctx: OpenContext, metarange_id: str) -> list[tuple[str, list[str]]]:
    return [(metarange_id, sstable.metarange_range_ids(ctx.read_metarange(metarange_id)))]


def unit_read_range(ctx: OpenContext, range_id: str) -> list[tuple[str, bytes]]:
    return [(range_id, ctx.read_range(range_id))]


def unit_range_span(ctx: OpenContext, range_id: str) -> list[tuple[str, tuple[bytes, bytes]]]:
    return [(range_id, range_changes.span(ctx.read_range(range_id)))]


def unit_group_changes(ctx: OpenContext, unit: tuple[tuple[str, ...], tuple[str, ...]]) \
        -> list[tuple[str, object]]:
    """The change of one group of ranges whose key spans overlap (the dead ones, the new ones): only the entries
    whose count changed leave the executor, and what it cost."""
    dead, new = unit
    found, tally = range_changes.changes({r: ctx.read_range(r) for r in dead + new}, set(dead))
    return [("change", c) for c in found] + [("tally", tally.as_dict())]


def changed_blocks(runner: Runner, config: JobConfig, *, dead: list[str], new: list[str], prefixes: tuple[str, ...],
                   partitions: int, tally: dict[str, int] | None = None) -> tuple[dict[int, int], set[str]]:
    """The kept index's change from the ranges that died and appeared, and the keys whose count went down: the
    dead and the new ranges put side by side as lakeFS's diff does (``core.range_changes``: blocks that repeat
    cancel out unread, the others are walked by the compiled decoder and their entries cancel out by address).
    A day's few ranges (``on_driver``) are read on the driver's threads and walked on two (the walk runs without
    the GIL); more go to the runner in groups of overlapping key spans, each group's change computed where it is
    read: on Spark, a task returns its groups' changes and costs, nothing per entry it read."""
    ranges = dead + new
    cost = range_changes.Tally()
    count: dict[tuple[str, int], int] = {}
    if on_driver(runner, len(ranges)):
        files = dict(fitting(runner, ranges).map_units(ranges, unit_read_range, config.open, partitions=partitions))
        with ThreadPoolExecutor(_WALKERS) as pool:
            found, cost = range_changes.changes(files, set(dead), map_=pool.map)
        del files
        for address, kind, times in found:
            count[(address, kind)] = count.get((address, kind), 0) + times
    else:
        spans = dict(runner.map_units(ranges, unit_range_span, config.open, partitions=partitions))
        died = set(dead)
        units = [(tuple(r for r in group if r in died), tuple(r for r in group if r not in died))
                 for group in range_changes.groups(spans)]
        for what, item in runner.map_units(units, unit_group_changes, config.open, partitions=partitions):
            if what == "tally":
                cost.add(range_changes.Tally(**item))
            else:
                address, kind, times = item
                count[(address, kind)] = count.get((address, kind), 0) + times
    if tally is not None:
        tally.update(cost.as_dict(), entries_changed=sum(1 for n in count.values() if n))
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
              address_partitions: int) -> LeanMark:
    clock = _Clock()
    known = state.metarange_ranges()
    missing = [m for m in metaranges if m not in known]
    read = dict(fitting(runner, missing).map_units(missing, unit_metarange_ranges, config.open,
                                                   partitions=range_partitions))
    by_metarange = {m: known[m] if m in known else read[m] for m in metaranges}
    live = sorted({r for ranges in by_metarange.values() for r in ranges})
    before = set(state.range_ids)
    dead, new = sorted(before - set(live)), sorted(set(live) - before)
    clock("metaranges")
    tally: dict[str, int] = {}
    delta, dead_keys = changed_blocks(runner, config, dead=dead, new=new, prefixes=tuple(ctx.prefixes),
                                      partitions=range_partitions, tally=tally)
    clock("changed blocks")
    recent = list_recent(state, runner=runner, config=config, ctx=ctx, partitions=address_partitions)
    clock("recent slices")
    seen = recent.keys
    carried = state.carried()
    hashes = {k: kept_index.key_hash(k) for k in dead_keys | carried | seen | uncommitted}
    # the index is read only at the keys that changed and those judged (by executors when they are many)
    looked_up = set(delta) | set(hashes.values())
    counted = index_lookup.counts(index, looked_up, runner=runner, config=config, partitions=range_partitions)
    now = {h: n + delta.get(h, 0) for h, n in counted.items()}
    if any(n < 0 for n in now.values()):
        raise kept_index.IndexError_("a range's entries were subtracted from keys the index does not count")
    committed = {k for k, h in hashes.items() if now[h] > 0}
    keys = index.keys + sum(1 for h in delta if counted[h] <= 0 < now[h]) - sum(
        1 for h in delta if now[h] <= 0 < counted[h])
    cumulative = dict(index.delta)
    for h, n in delta.items():
        cumulative[h] = cumulative.get(h, 0) + n
    wanted = sorted((dead_keys | carried) - committed - uncommitted - seen)
    clock("lookup")
    found = ask_for(wanted, runner=runner, config=config, partitions=address_partitions)
    clock("asked for")
    result = changed(state, recent, wanted=wanted, found=found, kept_index=keys, ranges_dead=len(dead),
                     ranges_new=len(new), metaranges_read=len(missing), index_blocks_read=index.blocks_read,
                     index_blocks=index.blocks, **tally, seconds=clock.laps,
                     # where the touched ranges were compared and the index looked up: the driver, or the runner
                     compared_on="driver" if on_driver(runner, len(dead) + len(new)) else "runner",
                     looked_up_on="driver" if index_lookup.on_driver(runner, index, len(looked_up)) else "runner",
                     keys_looked_up=len(looked_up))
    return LeanMark(result.objects, committed, live, units_of((r, ()) for r in live), by_metarange,
                    {h: n for h, n in cumulative.items() if n}, keys, result.listing)
