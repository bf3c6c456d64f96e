"""The kept index looked up where the runner runs: a daily run that judges many keys (a day that touched many ranges)
has the blocks of the stored index that hold them read and searched by Spark's executors, part by part, and only
each key's count comes back; a day's few keys are looked up on the driver (``incremental.StoredIndex.counts``:
16 KiB of blocks a key at most)."""

from __future__ import annotations

from collections.abc import Iterable

from spark_jobs.core import kept_index
from spark_jobs.engine.runtime.context import JobConfig, OpenContext
from spark_jobs.engine.runtime.parallel import Runner, in_process
from spark_jobs.engine.state.incremental import StoredIndex, open_part

DRIVER_KEYS = 4096  # keys a driver looks up itself (≤ 64 MiB of blocks, a part at a time) when its runner has executors
UNIT_KEYS = 4096  # keys of one part looked up by one unit of work (a part's head is read once per unit)

Unit = tuple[str, int, str, int, tuple[int, ...]]  # base's run, part, its head's digest, bits, hashes (sorted)


def unit_counts(ctx: OpenContext, unit: Unit) -> list[tuple[dict[int, int], int]]:
    """(hash -> count in the base for each hash of the unit, blocks read): one part's head checked against its
    digest, and the blocks holding the hashes."""
    import numpy as np  # noqa: PLC0415

    run_id, part, sha256, bits, hashes = unit
    base = open_part(ctx.ns, run_id, part=part, sha256=sha256, bits=bits)
    return [base.counts_in(np.array(hashes, np.uint64))]


def units_of(index: StoredIndex, hashes: list[int]) -> list[Unit]:
    """The lookups of ``hashes`` (sorted, distinct) in a base in parts, by part, UNIT_KEYS at most each."""
    import numpy as np  # noqa: PLC0415

    numbers = kept_index.part_numbers(np.array(hashes, np.uint64), index.bits).tolist()
    by_part: dict[int, list[int]] = {}
    for h, part in zip(hashes, numbers, strict=True):
        by_part.setdefault(part, []).append(h)
    state = index.state
    return [(state.index_run, part, state.index_parts[part], index.bits, tuple(mine[i:i + UNIT_KEYS]))
            for part, mine in sorted(by_part.items()) for i in range(0, len(mine), UNIT_KEYS)]


def on_driver(runner: Runner, index: StoredIndex, keys: int) -> bool:
    """Whether ``keys`` lookups are made on the driver."""
    return in_process(runner) or keys <= DRIVER_KEYS or index.single is not None


def counts(index: StoredIndex, hashes: Iterable[int], *, runner: Runner, config: JobConfig,
           partitions: int) -> dict[int, int]:
    """``index.counts(hashes)``: on the driver for a few keys (or in process, or a base in one file, a plan of
    0.x), else on ``runner`` by part, each task returning the counts of the keys it was given."""
    wanted = sorted(set(hashes))
    if on_driver(runner, index, len(wanted)):
        return index.counts(wanted)
    found: dict[int, int] = {}
    for part_counts, read in runner.map_units(units_of(index, wanted), unit_counts, config.open,
                                              partitions=partitions):
        found.update(part_counts)
        index.blocks_read += read
    return index.with_delta(found)
