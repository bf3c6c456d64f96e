"""The incremental state's I/O: the state a run leaves under ``_lakefs/`` (``core.incremental``) and its kept index
(a base written in parts, a delta; read at the keys a run looks up). How a run finds, from this state, the objects
that may have become garbage since without listing the namespace is ``listing/incremental.py``.

The mark writes the state it would leave beside its plan (``core.report.pending_state_key``); the sweep, once it knows what it did
not delete, stores it as the repository's state (``promote``). A dry run reads the state and writes none, so
whatever it plans stays for the next real run to find.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from spark_jobs.core import kept_index
from spark_jobs.core import report as core_report
from spark_jobs.core.incremental import State, StateError, decode, encode, why_full
from spark_jobs.engine.runtime.parallel import Runner
from spark_jobs.engine.stores import Namespace, StorageConfig, StorageError, open_namespace

log = logging.getLogger(__name__)

PREFIX = "_lakefs/retention/gc/janitor-incremental/v1"  # a name lakeFS never writes
STATE_KEY = f"{PREFIX}/state.json.gz"
# The kept index goes to the slot the stored state does not name, then the state: a run killed in between leaves
# the stored state and its index whole
INDEX_SLOTS = ("a", "b")


def index_key(slot: str) -> str:
    return f"{PREFIX}/kept-index-{slot}.bin"


def delta_key(slot: str) -> str:
    return f"{PREFIX}/kept-delta-{slot}.bin"


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


def write_pending(ns: Namespace, run_id: str, state: State, *, index_parts: list[dict] | None = None,
                  delta: bytes | None = None) -> None:
    """The state this plan's sweep stores, and beside it what it names that is new: the parts of a kept index's
    base a run built (already written where ``core.report.index_part_key`` says, by whoever built them:
    ``index_parts`` names each part's head digest, in part order) or its delta (a run that brought the stored index
    up to date); those first."""
    if index_parts is not None:
        shas = tuple(p["sha256"] for p in sorted(index_parts, key=lambda p: p["part"]))
        kept_index.bits_of(len(shas))
        state = replace(state, index_sha256=hashlib.sha256("".join(shas).encode()).hexdigest(), index_slot="",
                        index_parts=shas, index_run=run_id, delta_sha256=None, delta_slot="")
    if delta is not None:
        ns.write(core_report.pending_delta_key(run_id), delta)
        state = replace(state, delta_sha256=hashlib.sha256(delta).hexdigest(), delta_slot="")
    ns.write(core_report.pending_state_key(run_id), encode(state))


def write_index_parts(ns: Namespace, run_id: str, index, *, bits: int, runner: Runner | None = None) -> list[dict]:
    """Write a kept index (``kept_index.build``'s table) as the parts of a base in this process (on ``runner``'s
    threads when given); what ``write_pending`` takes."""
    parts = list(enumerate(kept_index.split_parts(index, bits)))

    def write(_ctx: object, item: tuple[int, object]) -> list[dict]:
        return [write_index_part(ns, run_id, part=item[0], table=item[1])]

    if runner is None:
        return [row for item in parts for row in write(None, item)]
    return runner.map_units(parts, write, lambda: None, partitions=0)


def write_index_part(ns: Namespace, run_id: str, *, part: int, table) -> dict:
    """One part of a kept index's base (``kept_index.build``'s table, its share of the hashes), written; the row
    ``write_pending`` takes for it."""
    data = kept_index.encode_base(table)
    ns.write(core_report.index_part_key(run_id, part), data)
    return {"part": part, "keys": len(table), "sha256": hashlib.sha256(data[:kept_index.head_size(data)]).hexdigest()}


def promote(ns: Namespace, run_id: str, leftover: Iterable[str], *, full_next: bool = False) -> bool:
    """Store the state a swept plan left, with what the sweep did not delete (``full_next``: more was left than it
    names, so the next run lists the whole namespace). False when there is none to store
    (a dry run's plan, a plan of an older version) or it could not be stored: the state stored before stays,
    which is safe (it names more than needed) and costs the next run more requests, or a full listing. A base in
    parts stays where its run wrote it (the state names that run): nothing of it is copied."""
    try:
        pending = decode(ns.read(core_report.pending_state_key(run_id)))
        stored = _stored(ns)
        if pending.index_sha256 and not pending.index_slot and not pending.index_parts:  # a plan of 0.x: one file
            index = ns.read(core_report.pending_index_key(run_id))
            if hashlib.sha256(index[:kept_index.head_size(index)]).hexdigest() != pending.index_sha256:
                raise StateError("its kept index does not match its digest")
            slot = _other(stored.index_slot if stored else "")
            ns.write(index_key(slot), index)
            pending = replace(pending, index_slot=slot)
        if pending.delta_sha256 and not pending.delta_slot:  # a new delta on the stored base
            delta = ns.read(core_report.pending_delta_key(run_id))
            if hashlib.sha256(delta).hexdigest() != pending.delta_sha256:
                raise StateError("its kept index delta does not match its digest")
            slot = _other(stored.delta_slot if stored else "")
            ns.write(delta_key(slot), delta)
            pending = replace(pending, delta_slot=slot)
        if full_next:
            pending = replace(pending, full_listing_at=datetime.fromtimestamp(0, UTC))
        ns.write(STATE_KEY, encode(pending.with_leftover(leftover)))
        return True
    except StorageError as exc:
        if "does not exist" not in str(exc):
            log.warning("GC plan %s: its incremental state was not stored (%s); the next run starts from the "
                        "previous one", run_id, exc)
        return False
    except (StateError, kept_index.IndexError_) as exc:
        log.warning("GC plan %s: its incremental state is unusable (%s); the next run starts from the previous one",
                    run_id, exc)
        return False


def _stored(ns: Namespace) -> State | None:
    try:
        return decode(ns.read(STATE_KEY))
    except (StorageError, StateError):
        return None


def _other(current: str) -> str:
    """The slot the stored state does not name (its file stays whole until the new state names the other)."""
    return INDEX_SLOTS[1] if current == INDEX_SLOTS[0] else INDEX_SLOTS[0]


# Blocks of a kept index read in one request when the bytes between them are no more than this: on an object store
# a request costs about what 256 KiB take to arrive, and a day's lookups touch blocks all over a part (720 keys at
# 1M objects: 491 of 977 blocks, 491 requests before, a few now). A request reads at most READ_RUN bytes.
GAP_BYTES = 256 * 1024
READ_RUN = 8 * 2**20


def read_runs(head: kept_index.BaseHead, blocks: list[int]) -> list[tuple[int, int, list[int]]]:
    """(first, last, the blocks wanted among them) of each request that reads ``blocks`` (sorted): neighbours, and
    blocks with few unwanted bytes between them, read together."""
    runs: list[tuple[int, int, list[int]]] = []
    for b in blocks:
        if runs:
            first, last, needed = runs[-1]
            start, end = head.span(first, b)
            gap_start, gap_end = head.span(last + 1, b - 1) if b > last + 1 else (0, 0)
            if gap_end - gap_start <= GAP_BYTES and end - start <= READ_RUN:
                needed.append(b)
                runs[-1] = (first, b, needed)
                continue
        runs.append((b, b, [b]))
    return runs


class _BaseFile:
    """One base file of a kept index (the whole base, or one part of it): its head, and the blocks that hold the
    hashes looked up (ranged reads, each block checked against its CRC)."""

    def __init__(self, ns: Namespace, key: str, head: kept_index.BaseHead) -> None:
        self.ns, self.key, self.head = ns, key, head

    def counts_in(self, wanted) -> tuple[dict[int, int], int]:
        """hash -> count in this file for each of ``wanted`` (numpy uint64, sorted, distinct; 0 when absent), and
        how many blocks were read."""
        import numpy as np  # noqa: PLC0415

        out = dict.fromkeys(wanted.tolist(), 0)
        blocks = self.head.blocks_of(wanted)
        runs = read_runs(self.head, blocks)
        spans = [self.head.span(first, last) for first, last, _ in runs]
        raws = self.ns.read_ranges(self.key, spans) if spans else []
        block_of = np.searchsorted(self.head.firsts, wanted, side="right") - 1  # sorted, as wanted is
        for (_, _, needed), (start, _), raw in zip(runs, spans, raws, strict=True):
            for b in needed:
                lo, hi = self.head.span(b, b)
                hashes_b, counts_b = self.head.block_records(b, raw[lo - start:hi - start])
                mine = wanted[np.searchsorted(block_of, b):np.searchsorted(block_of, b, side="right")]
                at = np.minimum(np.searchsorted(hashes_b, mine), len(hashes_b) - 1)
                hit = hashes_b[at] == mine
                for h, n in zip(mine[hit].tolist(), counts_b[at[hit]].tolist(), strict=True):
                    out[h] = n
        return out, len(blocks)


def open_base(ns: Namespace, key: str, sha256: str) -> _BaseFile:
    """A base file's head read and checked against the digest the state names, and its size against the head."""
    prefix = ns.read_range(key, 0, 65536)
    size = kept_index.head_size(prefix)
    head = prefix[:size] if len(prefix) >= size else prefix + ns.read_range(key, len(prefix), size)
    if hashlib.sha256(head).hexdigest() != sha256:
        raise kept_index.IndexError_("its kept index is not the one it names")
    parsed = kept_index.decode_head(head)
    if ns.size(key) != parsed.file_size:
        raise kept_index.IndexError_("its kept index is truncated or too long")
    return _BaseFile(ns, key, parsed)


def open_part(ns: Namespace, run_id: str, *, part: int, sha256: str, bits: int) -> _BaseFile:
    """One part of a base in parts (``open_base``), checked to hold only its share of the hashes."""
    try:
        base = open_base(ns, core_report.index_part_key(run_id, part), sha256)
    except StorageError as exc:  # refused like a damaged part: the run lists everything instead
        raise kept_index.IndexError_(f"its kept index is unreadable: {exc}") from None
    kept_index.check_part(base.head, part, bits)
    return base


class StoredIndex:
    """The stored kept index as an incremental run reads it: the base (one file, or the parts that hold the keys it
    looks up, each part's head read when first needed) and the delta since the base."""

    def __init__(self, ns: Namespace, state: State, delta: dict[int, int], *, single: _BaseFile | None = None) -> None:
        self.ns, self.state, self.delta, self.single = ns, state, delta, single
        self.keys = state.index_keys
        self.bits = kept_index.bits_of(len(state.index_parts)) if single is None else 0
        self.parts: dict[int, _BaseFile] = {}
        self.blocks_read = 0
        self.blocks = -(-self.keys // kept_index.BLOCK)  # about (the count of a run's statistics)

    def _part(self, part: int) -> _BaseFile:
        if part not in self.parts:
            self.parts[part] = open_part(self.ns, self.state.index_run, part=part, sha256=self.state.index_parts[part],
                                         bits=self.bits)
        return self.parts[part]

    def counts(self, hashes: Iterable[int]) -> dict[int, int]:
        """hash -> how many live entries point at it (base and delta), for each of ``hashes``."""
        import numpy as np  # noqa: PLC0415

        wanted = np.array(sorted(set(hashes)), np.uint64)
        out: dict[int, int] = {}
        if self.single is not None:
            found, read = self.single.counts_in(wanted)
            out.update(found)
            self.blocks_read += read
        else:
            numbers = kept_index.part_numbers(wanted, self.bits)
            for part in sorted(set(numbers.tolist())):  # not np.unique: it imports numpy.ma (range_changes._common)
                found, read = self._part(part).counts_in(wanted[numbers == part])
                out.update(found)
                self.blocks_read += read
        return self.with_delta(out)

    def with_delta(self, base: dict[int, int]) -> dict[int, int]:
        """The base's counts (hash -> count, as ``counts_in`` finds them) with the delta since the base added."""
        for h in base:
            base[h] += self.delta.get(h, 0)
            if base[h] < 0:
                raise kept_index.IndexError_("its delta takes a key below what its base counts")
        return base


def read_index(ns: Namespace, state: State) -> tuple[StoredIndex | None, str | None]:
    """The kept index the state names, or the reason it cannot be used. Reads its delta, and the head of a base in
    one file (a base in parts: each part's head when a lookup first needs it)."""
    try:
        single = None
        if not state.index_parts:
            single = open_base(ns, index_key(state.index_slot), state.index_sha256 or "")
        delta: dict[int, int] = {}
        if state.delta_sha256:
            data = ns.read(delta_key(state.delta_slot))
            if hashlib.sha256(data).hexdigest() != state.delta_sha256:
                return None, "its kept index delta is not the one it names"
            delta = kept_index.decode_delta(data)
        return StoredIndex(ns, state, delta, single=single), None
    except StorageError as exc:
        return None, f"its kept index is unreadable: {exc}"
    except kept_index.IndexError_ as exc:
        text = str(exc)
        return None, text if text.startswith("its kept index") else f"its kept index: {text}"
