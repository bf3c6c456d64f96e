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
from dataclasses import dataclass

from spark_jobs.core import kept_index, sstable
from spark_jobs.core.addresses import relative_key
from spark_jobs.core.incremental import State, Unit, units_of
from spark_jobs.core.plan import StoredObject
from spark_jobs.engine.context import JobConfig, OpenContext
from spark_jobs.engine.incremental import ask_for, changed, list_recent
from spark_jobs.engine.parallel import Runner


def unit_metarange_ranges(ctx: OpenContext, metarange_id: str) -> list[tuple[str, list[str]]]:
    return [(metarange_id, sstable.metarange_range_ids(ctx.read_metarange(metarange_id)))]


def unit_range_digests(ctx: OpenContext, range_id: str) -> list[tuple[str, list[bytes]]]:
    """The digests of one range's data blocks (none decoded)."""
    return [(range_id, sstable.range_block_digests(ctx.read_range(range_id)))]


def unit_block_addresses(ctx: OpenContext, unit: tuple[str, frozenset[bytes]]) \
        -> list[tuple[bytes, list[tuple[str, int]]]]:
    """(digest, [(address, address type)]) of the wanted blocks of one range (only those decoded)."""
    range_id, wanted = unit
    return sstable.range_block_addresses(ctx.read_range(range_id), set(wanted))


def changed_blocks(runner: Runner, config: JobConfig, *, dead: list[str], new: list[str], prefixes: tuple[str, ...],
                   partitions: int, tally: dict[str, int] | None = None) -> tuple[dict[int, int], set[str]]:
    """The kept index's change from the ranges that died and appeared, and the keys whose count went down.
    A new version of a range repeats most data blocks of the one before byte for byte, so a block held as often
    by the new ranges as by the dead ones changes no count: only the others are decoded. Of those (a change
    early in a range shifts the blocks after it), the entries the dead and the new blocks share cancel out, and
    only the rest is mapped to keys and hashed."""
    digests = dict(runner.map_units(dead + new, unit_range_digests, config.open, partitions=partitions))
    net: dict[bytes, int] = {}
    holder: dict[bytes, str] = {}
    for sign, ranges in ((-1, dead), (1, new)):
        for range_id in ranges:
            for digest in digests[range_id]:
                net[digest] = net.get(digest, 0) + sign
                holder.setdefault(digest, range_id)
    by_range: dict[str, set[bytes]] = {}
    for digest, times in net.items():
        if times:
            by_range.setdefault(holder[digest], set()).add(digest)
    units = [(r, frozenset(ds)) for r, ds in sorted(by_range.items())]
    count: dict[tuple[str, int], int] = {}
    decoded = runner.map_units(units, unit_block_addresses, config.open, partitions=partitions)
    for digest, addresses in decoded:
        times = net[digest]
        for entry in addresses:
            count[entry] = count.get(entry, 0) + times
    if tally is not None:
        tally.update(blocks=len(net), blocks_decoded=len(decoded), entries_decoded=sum(len(a) for _, a in decoded),
                     entries_changed=sum(1 for n in count.values() if n))
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
    index: object  # the kept index, up to date (an Arrow table)
    listing: dict


def lean_mark(state: State, index, *, runner: Runner, config: JobConfig, ctx: OpenContext, metaranges: list[str],
              uncommitted: set[str], range_partitions: int, address_partitions: int) -> LeanMark:
    clock = _Clock()
    known = state.metarange_ranges()
    missing = [m for m in metaranges if m not in known]
    read = dict(runner.map_units(missing, unit_metarange_ranges, config.open, partitions=range_partitions))
    by_metarange = {m: known[m] if m in known else read[m] for m in metaranges}
    live = sorted({r for ranges in by_metarange.values() for r in ranges})
    before = set(state.range_ids)
    dead, new = sorted(before - set(live)), sorted(set(live) - before)
    clock("metaranges")
    tally: dict[str, int] = {}
    delta, dead_keys = changed_blocks(runner, config, dead=dead, new=new, prefixes=tuple(ctx.prefixes),
                                      partitions=range_partitions, tally=tally)
    clock("changed blocks")
    index = kept_index.apply(index, delta)
    clock("index update")
    recent = list_recent(state, runner=runner, config=config, ctx=ctx, partitions=address_partitions)
    clock("recent slices")
    seen = recent.keys
    carried = state.carried()
    hashes = {k: kept_index.key_hash(k) for k in dead_keys | carried | seen | uncommitted}
    held = kept_index.holds(index, hashes.values())
    committed = {k for k, h in hashes.items() if h in held}
    wanted = sorted((dead_keys | carried) - committed - uncommitted - seen)
    clock("lookup")
    found = ask_for(wanted, runner=runner, config=config, partitions=address_partitions)
    clock("asked for")
    result = changed(state, recent, wanted=wanted, found=found, kept_index=len(index), ranges_dead=len(dead),
                     ranges_new=len(new), metaranges_read=len(missing), **tally, seconds=clock.laps)
    return LeanMark(result.objects, committed, live, units_of((r, ()) for r in live), by_metarange, index,
                    result.listing)
