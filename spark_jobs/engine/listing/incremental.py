"""The incremental listing: how a run finds the objects that may have become garbage since the previous run without
listing the namespace: the recent slices listed (those that can hold an object written since the previous run's
horizon, and the root), the dead units' and the carried keys asked for one by one. The state those come from is
``state/incremental.py``'s; a full run counts what this rule would have missed (``missed``: the proof it holds)."""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime

from spark_jobs.core.incremental import State, dead_ranges
from spark_jobs.core.plan import StoredObject
from spark_jobs.core.slices import slices_to_list
from spark_jobs.engine.listing.full import unit_list
from spark_jobs.engine.reach.mark_source import Source
from spark_jobs.engine.runtime.context import JobConfig, OpenContext
from spark_jobs.engine.runtime.parallel import Runner, fitting

STAT_BATCH = 500  # keys per unit of work when asking for objects one by one


def unit_stat(ctx: OpenContext, keys: list[str]) -> list[StoredObject]:
    """The objects of ``keys`` that exist, with their sizes and times (on executors or threads)."""
    return ctx.ns.stat(keys)


def unit_of(key: str) -> str:
    """The listing unit that holds ``key``: ``data/<slice>/`` or the root."""
    if key.startswith("data/") and key.count("/") >= 2:
        return "data/" + key.split("/", 2)[1] + "/"
    return ""


def recent_units(units: list[str], since: datetime) -> list[str]:
    """Of a namespace's units (``Namespace.list_units``), the slices that can hold an object written at or after
    ``since``, and the root (always: a legacy namespace keeps its objects there)."""
    slices = [u for u in units if u]
    names = {u[len("data/"):].rstrip("/"): u for u in slices}
    recent = set(slices_to_list(names, since=since))
    return [names[n] for n in names if n in recent] + [""]


@dataclass
class Changed:
    """What an incremental run found: the objects listed and those asked for, and the record of how."""

    objects: list[StoredObject]
    listing: dict


@dataclass
class Recent:
    """The recent slices of a namespace, listed (``list_recent``)."""

    objects: list[StoredObject]
    slices: int  # listed
    slices_total: int

    @property
    def keys(self) -> set[str]:
        return {o.key for o in self.objects}


def list_recent(state: State, *, runner: Runner, config: JobConfig, ctx: OpenContext, partitions: int) -> Recent:
    """The objects of the slices that can hold an object written since ``state``'s horizon, and of the root."""
    units = ctx.ns.list_units()
    recent = recent_units(units, state.horizon)
    listed = fitting(runner, recent).map_units(recent, unit_list, config.open, partitions=partitions)
    return Recent(listed, len(recent) - 1, len(units) - 1)


def ask_for(wanted: list[str], *, runner: Runner, config: JobConfig, partitions: int) -> list[StoredObject]:
    """Of ``wanted``, the objects still in the store, with their sizes and times (a request each, in batches)."""
    batches = [wanted[i:i + STAT_BATCH] for i in range(0, len(wanted), STAT_BATCH)]
    return fitting(runner, batches).map_units(batches, unit_stat, config.open, partitions=partitions)


class AskedEarly:
    """Objects asked for while the run still works out which it needs: the keys a day's comparison finds going down
    in a group of ranges, asked for as each group is done, while the other groups are compared (the comparison works
    in compiled code without the GIL, a request mostly in botocore's Python: on one process they overlap, run one
    after the other they add up; 400 HEADs cost ≈ 0.4 s of a core). A key asked for early that the run then does not
    need (still kept by another range, listed in a recent slice) is one request spent; ``most`` bounds them, past
    it the keys wait for ``ask_for``. A failed early request fails the run only if the key is needed."""

    def __init__(self, ctx: OpenContext, *, skip: set[str], most: int) -> None:
        self.ns = ctx.ns
        self.skip = skip
        self.most = most  # 0: nothing is asked for early
        self.asked: dict[str, Future] = {}
        self._pool: ThreadPoolExecutor | None = None

    def __enter__(self) -> AskedEarly:
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def ask(self, keys: Iterable[str]) -> None:
        for key in keys:
            if len(self.asked) >= self.most:
                return
            if key not in self.asked and key not in self.skip:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(max(1, self.ns.config.max_in_flight),
                                                    thread_name_prefix="gc-asked-early")
                self.asked[key] = self._pool.submit(self.ns.stat, [key])

    def answers(self, wanted: list[str]) -> tuple[list[StoredObject], list[str]]:
        """Of ``wanted``, the objects asked for early that exist, and the keys not asked for yet."""
        found = [o for k in wanted if k in self.asked for o in self.asked[k].result()]
        return found, [k for k in wanted if k not in self.asked]

    def record(self, wanted: list[str]) -> dict[str, int]:
        return {"asked_early": len(self.asked), "asked_early_unused": len(set(self.asked) - set(wanted))}


def changed(state: State, recent: Recent, *, wanted: list[str], found: list[StoredObject], **record) -> Changed:
    """The candidates of an incremental run and its record (``Summary.listing``)."""
    listing = {"kind": "incremental", "previous_run": state.run_id, "since": state.horizon.isoformat(),
               "slices": recent.slices, "slices_total": recent.slices_total, "objects": len(recent.objects),
               "checked": len(wanted), "found_without_listing": len(found), **record}
    return Changed(recent.objects + found, listing)


def would_check(state: State, source: Source, units_now: Iterable[tuple[str, tuple[str, ...]]]) -> set[str]:
    """The keys an incremental run from ``state`` asks for one by one: the dead units' and the carried ones."""
    return source.former_addresses(dead_ranges(state.units, units_now)) | state.carried()


def find_changed(state: State, *, runner: Runner, config: JobConfig, ctx: OpenContext, checked: set[str],
                 kept: set[str], partitions: int) -> Changed:
    """The objects that may have become garbage since ``state``'s run: the recent slices' objects (listed), and of
    ``checked`` (``would_check``) those still in the store and not kept now (asked for, a request each)."""
    recent = list_recent(state, runner=runner, config=config, ctx=ctx, partitions=partitions)
    wanted = sorted(checked - kept - recent.keys)
    return changed(state, recent, wanted=wanted,
                   found=ask_for(wanted, runner=runner, config=config, partitions=partitions))


def missed(deleted: Iterable[StoredObject], state: State, checked: set[str]) -> int:
    """Of what a full run deletes, how many objects an incremental run from ``state`` would not have found: not in
    a slice it lists, not among the keys it checks (``would_check``). The proof the incremental rule holds: 0."""
    units = {unit_of(o.key) for o in deleted}
    recent = set(recent_units(sorted(units), state.horizon))
    return sum(1 for o in deleted if unit_of(o.key) not in recent and o.key not in checked)
