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

from spark_jobs.core import block_scan, kept_index, sstable
from spark_jobs.core.addresses import relative_key
from spark_jobs.core.incremental import State, Unit, units_of
from spark_jobs.core.plan import StoredObject
from spark_jobs.engine.context import JobConfig, OpenContext
from spark_jobs.engine.incremental import StoredIndex, ask_for, changed, list_recent
from spark_jobs.engine.parallel import Runner, fitting


def unit_metarange_ranges(ctx: OpenContext, metarange_id: str) -> list[tuple[str, list[str]]]:
    return [(metarange_id, sstable.metarange_range_ids(ctx.read_metarange(metarange_id)))]


def unit_range_digests(ctx: OpenContext, range_id: str) -> list[tuple[str, list[bytes]]]:
    """The digests of one range's data blocks (none decoded)."""
    return [(range_id, sstable.range_block_digests(ctx.read_range(range_id)))]


def unit_block_scan(ctx: OpenContext, unit: tuple[str, frozenset[bytes]]) \
        -> list[tuple[str, list[bytes], block_scan.Scan]]:
    """The wanted blocks of one range, every entry fingerprinted at once (none turned into Python objects)."""
    range_id, wanted = unit
    blocks = sstable.range_wanted_blocks(ctx.read_range(range_id), set(wanted))
    return [(range_id, [d for d, _ in blocks], block_scan.scan([b for _, b in blocks]))]


def unit_block_picks(ctx: OpenContext, unit: tuple[str, tuple[tuple[bytes, tuple[int, ...] | None], ...]]) \
        -> list[tuple[bytes, int, tuple[str, int]]]:
    """(digest, entry ordinal, (address, address type)) of the picked entries of one range's blocks; ordinals
    None: every entry of the block (ordinal -1)."""
    range_id, picks = unit
    wanted = dict(picks)
    out: list[tuple[bytes, int, tuple[str, int]]] = []
    for digest, block in sstable.range_wanted_blocks(ctx.read_range(range_id), set(wanted)):
        addresses = sstable.block_addresses(block)
        ordinals = wanted[digest]
        if ordinals is None:
            out += [(digest, -1, entry) for entry in addresses]
        else:
            out += [(digest, i, addresses[i]) for i in ordinals]
    return out


def changed_blocks(runner: Runner, config: JobConfig, *, dead: list[str], new: list[str], prefixes: tuple[str, ...],
                   partitions: int, tally: dict[str, int] | None = None) -> tuple[dict[int, int], set[str]]:
    """The kept index's change from the ranges that died and appeared, and the keys whose count went down.
    A new version of a range repeats most data blocks of the one before byte for byte, so a block held as often
    by the new ranges as by the dead ones changes no count: only the others are read. Of those (a change early
    in a range shifts the blocks after it), every entry is fingerprinted at once (``core.block_scan``); the
    entries the dead and the new blocks share cancel out by fingerprint, and only one entry of each fingerprint
    whose count changed is decoded, mapped to its key and hashed. Blocks of another shape are decoded whole."""
    digests = dict(fitting(runner, dead + new).map_units(dead + new, unit_range_digests, config.open,
                                                          partitions=partitions))
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
    scans = fitting(runner, units).map_units(units, unit_block_scan, config.open, partitions=partitions)
    picks, weight, irregular = _changed_entries(scans, net)
    wanted: dict[str, dict[bytes, tuple[int, ...] | None]] = {}
    for range_id, digest, ordinal in picks:
        wanted.setdefault(range_id, {}).setdefault(digest, ())
        wanted[range_id][digest] += (ordinal,)  # type: ignore[operator]
    for range_id, digest in irregular:
        wanted.setdefault(range_id, {})[digest] = None
    units2 = [(r, tuple(sorted(ds.items()))) for r, ds in sorted(wanted.items())]
    count: dict[tuple[str, int], int] = {}
    decoded = fitting(runner, units2).map_units(units2, unit_block_picks, config.open, partitions=partitions)
    for digest, ordinal, entry in decoded:
        times = net[digest] if ordinal < 0 else weight[(digest, ordinal)]
        count[entry] = count.get(entry, 0) + times
    if tally is not None:
        tally.update(blocks=len(net), blocks_decoded=sum(len(d) for _, d, _ in scans),
                     entries_decoded=sum(len(s.fp1) for _, _, s in scans) + sum(1 for _, o, _ in decoded if o < 0),
                     blocks_irregular=len(irregular), entries_changed=sum(1 for n in count.values() if n))
    delta: dict[int, int] = {}
    gone: set[str] = set()
    for (address, kind), times in count.items():
        if times and (key := relative_key(address, kind, prefixes)) is not None:
            h = kept_index.key_hash(key)
            delta[h] = delta.get(h, 0) + times
            if times < 0:
                gone.add(key)
    return {h: n for h, n in delta.items() if n}, gone


def _changed_entries(scans: list[tuple[str, list[bytes], block_scan.Scan]], net: dict[bytes, int]) \
        -> tuple[list[tuple[str, bytes, int]], dict[tuple[bytes, int], int], list[tuple[str, bytes]]]:
    """From the scanned blocks: one (range, digest, entry ordinal) per fingerprint whose entries do not cancel
    out, with its net count (by (digest, ordinal)); and the blocks the scan did not take."""
    import numpy as np  # noqa: PLC0415

    irregular = [(r, digests[i]) for r, digests, scan in scans for i in scan.irregular]
    parts = [(u, s) for u, (_, _, s) in enumerate(scans) if len(s.fp1)]
    if not parts:
        return [], {}, irregular
    fp1 = np.concatenate([s.fp1 for _, s in parts])
    fp2 = np.concatenate([s.fp2 for _, s in parts])
    unit = np.concatenate([np.full(len(s.fp1), u, np.int64) for u, s in parts])
    block = np.concatenate([s.block for _, s in parts])
    entry = np.concatenate([s.entry for _, s in parts])
    times = np.concatenate([np.array([net[d] for d in scans[u][1]], np.int64)[s.block] for u, s in parts])
    order = np.lexsort((fp2, fp1))
    f1, f2 = fp1[order], fp2[order]
    first = np.ones(len(order), bool)
    first[1:] = (f1[1:] != f1[:-1]) | (f2[1:] != f2[:-1])
    starts = np.flatnonzero(first)
    sums = np.add.reduceat(times[order], starts)
    changed = sums != 0
    picks: list[tuple[str, bytes, int]] = []
    weight: dict[tuple[bytes, int], int] = {}
    for i, total in zip(order[starts[changed]].tolist(), sums[changed].tolist(), strict=True):
        range_id, digests, _ = scans[int(unit[i])]
        digest, ordinal = digests[int(block[i])], int(entry[i])
        picks.append((range_id, digest, ordinal))
        weight[(digest, ordinal)] = int(total)
    return picks, weight, irregular


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
    # the index is read only at the keys that changed and those judged
    counted = index.counts(set(delta) | set(hashes.values()))
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
                     index_blocks=len(index.head.firsts), **tally, seconds=clock.laps)
    return LeanMark(result.objects, committed, live, units_of((r, ()) for r in live), by_metarange,
                    {h: n for h, n in cumulative.items() if n}, keys, result.listing)
