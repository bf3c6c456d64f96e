"""The incremental run's I/O: the state a run leaves under ``_lakefs/`` (``core.incremental``), and how a run finds
the objects that may have become garbage since without listing the namespace: the recent slices listed, the dead
units' and the carried keys asked for one by one.

The mark writes the state it would leave beside its plan (``core.report.pending_state_key``); the sweep, once it knows what it did
not delete, stores it as the repository's state (``promote``). A dry run reads the state and writes none, so
whatever it plans stays for the next real run to find.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from spark_jobs.core import kept_index
from spark_jobs.core import report as core_report
from spark_jobs.core.incremental import State, StateError, dead_ranges, decode, encode, why_full
from spark_jobs.core.plan import StoredObject
from spark_jobs.core.slices import slices_to_list
from spark_jobs.engine.context import JobConfig, OpenContext
from spark_jobs.engine.mark_source import Source
from spark_jobs.engine.parallel import Runner
from spark_jobs.engine.stores import Namespace, StorageConfig, StorageError, open_namespace

log = logging.getLogger(__name__)

PREFIX = "_lakefs/retention/gc/janitor-incremental/v1"  # a name lakeFS never writes
STATE_KEY = f"{PREFIX}/state.json.gz"
# The kept index goes to the slot the stored state does not name, then the state: a run killed in between leaves
# the stored state and its index whole
INDEX_SLOTS = ("a", "b")
STAT_BATCH = 500  # keys per unit of work when asking for objects one by one


def index_key(slot: str) -> str:
    return f"{PREFIX}/kept-index-{slot}.parquet"


@dataclass(frozen=True)
class Previous:
    """The stored state, when it could be read, and why this run lists everything (None: it need not)."""

    state: State | None
    full_because: str | None

    @property
    def incremental(self) -> bool:
        return self.full_because is None


def load(ns: Namespace, *, repository_id: str, namespace: str, now: datetime, every: timedelta,
         asked_full: bool, key_prefixes: tuple[str, ...] | None = None) -> Previous:
    problem = None
    state = None
    try:
        state = decode(ns.read(STATE_KEY))
    except StorageError as exc:
        if "does not exist" not in str(exc):
            problem = f"it is unreadable: {exc}"
    except StateError as exc:
        problem = str(exc)
    reason = why_full(state, problem, repository_id=repository_id, namespace=namespace, now=now, every=every,
                      asked=asked_full, key_prefixes=key_prefixes)
    if state is not None and (state.repository_id != repository_id or state.namespace != namespace):
        state = None  # nothing of another namespace's state is used, not even to count what it would miss
    return Previous(state, reason)


def left_an_index(storage: StorageConfig) -> bool:
    """Whether the namespace's stored state names a kept index (read before the run loads its history, to skip
    reading the mark cache it will not need); False when it cannot be read yet (a local blockstore whose folder is
    learnt from lakeFS)."""
    try:
        return bool(decode(open_namespace(storage).read(STATE_KEY)).index_sha256)
    except (StorageError, StateError):
        return False


def write_pending(ns: Namespace, run_id: str, state: State, *, index: bytes | None = None) -> None:
    """The state (and kept index) this plan's sweep stores; the index first, named by the state."""
    if index is not None:
        ns.write(core_report.pending_index_key(run_id), index)
        state = replace(state, index_sha256=hashlib.sha256(index).hexdigest())
    ns.write(core_report.pending_state_key(run_id), encode(state))


def promote(ns: Namespace, run_id: str, leftover: Iterable[str]) -> bool:
    """Store the state a swept plan left, with what the sweep did not delete. False when there is none to store
    (a dry run's plan, a plan of an older version) or it could not be stored: the state stored before stays,
    which is safe (it names more than needed) and costs the next run more requests, or a full listing."""
    try:
        pending = decode(ns.read(core_report.pending_state_key(run_id)))
        if pending.index_sha256:
            index = ns.read(core_report.pending_index_key(run_id))
            if hashlib.sha256(index).hexdigest() != pending.index_sha256:
                raise StateError("its kept index does not match its digest")
            slot = _other_slot(ns)
            ns.write(index_key(slot), index)
            pending = replace(pending, index_slot=slot)
        ns.write(STATE_KEY, encode(pending.with_leftover(leftover)))
        return True
    except StorageError as exc:
        if "does not exist" not in str(exc):
            log.warning("GC plan %s: its incremental state was not stored (%s); the next run starts from the "
                        "previous one", run_id, exc)
        return False
    except StateError as exc:
        log.warning("GC plan %s: its incremental state is unusable (%s); the next run starts from the previous one",
                    run_id, exc)
        return False


def _other_slot(ns: Namespace) -> str:
    """The index slot the stored state does not name (its index stays whole until the new state names the other)."""
    try:
        current = decode(ns.read(STATE_KEY)).index_slot
    except (StorageError, StateError):
        current = ""
    return INDEX_SLOTS[1] if current == INDEX_SLOTS[0] else INDEX_SLOTS[0]


def read_index(ns: Namespace, state: State):
    """The kept index the state names (an Arrow table), or the reason it cannot be used."""
    try:
        data = ns.read(index_key(state.index_slot))
    except StorageError as exc:
        return None, f"its kept index is unreadable: {exc}"
    if hashlib.sha256(data).hexdigest() != state.index_sha256:
        return None, "its kept index is not the one it names"
    try:
        return kept_index.decode(data), None
    except kept_index.IndexError_ as exc:
        return None, f"its kept index: {exc}"


def unit_list(ctx: OpenContext, unit: str) -> list[StoredObject]:
    """One slice of the namespace's listing (on executors or threads)."""
    return ctx.ns.list_unit(unit)


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
    listed = runner.map_units(recent, unit_list, config.open, partitions=partitions)
    return Recent(listed, len(recent) - 1, len(units) - 1)


def ask_for(wanted: list[str], *, runner: Runner, config: JobConfig, partitions: int) -> list[StoredObject]:
    """Of ``wanted``, the objects still in the store, with their sizes and times (a request each, in batches)."""
    batches = [wanted[i:i + STAT_BATCH] for i in range(0, len(wanted), STAT_BATCH)]
    return runner.map_units(batches, unit_stat, config.open, partitions=partitions)


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
