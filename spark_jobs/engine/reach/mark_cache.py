"""The mark's memory: what each range file and metarange held, kept in the repository's namespace so a run reads
only the metadata files it has not seen before (range files and metaranges are immutable and named by content).

Use: on by default (``RunRequest(cache=True)``, ``tests.gc_engine.Collector(..., cache=True)``);
``gc run --no-cache`` / ``RunRequest(cache=False)`` / ``Collector(endpoint, cache=False)`` reads everything as before.
What the mark took from it is in the run's record: ``Summary.cache`` (summary.json; ``gc show`` prints it).

Where: ``_lakefs/retention/gc/janitor-mark-cache/v1/`` (a name lakeFS never writes; under ``_lakefs/``, which the
sweep never lists nor deletes). The pointer ``current.json`` names the slot (``a``/``b``) and its segments
(``slot-a/seg-0.parquets``, ``seg-1.parquets``, ...), each four parquet files in one object
(spark_jobs/core/mark_cache.py) whose sizes and SHA-256 the pointer names. A run that read files the cache did
not hold appends a segment of just those (a name the pointer does not name yet), then the pointer; a run that read nothing new writes nothing; at ``MAX_SEGMENTS`` segments, or when more
than ``DEAD_SHARE`` of what the cache holds was not used by the run, the run writes what it used whole into the
other slot, then the pointer. A run killed midway leaves the old cache whole. It is an optimisation only: a
missing, unreadable, foreign or older-format cache is ignored (logged, and rebuilt by the run), and an entry is
used only when the file it came from is still listed under ``_lakefs/`` with the size remembered.

On either runner the driver reads the cache and hands the runner only the unseen files; each unit returns what
its file held, from which the driver computes the kept addresses and writes the new cache (mark_source.py).
"""

from __future__ import annotations

import logging
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from spark_jobs.core.cache_segments import check_pointer, described, packed, pointer, segment_name, unpacked
from spark_jobs.core.mark_cache import SLOTS, CacheError, Held, Memory, decode, encode, merged, plan_save, trusted
from spark_jobs.engine.runtime.parallel import in_background
from spark_jobs.engine.stores import Namespace, StorageConfig, StorageError, open_namespace

log = logging.getLogger(__name__)
PREFIX = "_lakefs/retention/gc/janitor-mark-cache/v1"
POINTER = f"{PREFIX}/current.json"


def segment_key(slot: str, index: int) -> str:
    return f"{PREFIX}/{segment_name(slot, index)}"


@dataclass
class Loaded:
    memory: Memory
    slot: str | None  # the slot the pointer names (None: no usable cache)
    stats: dict[str, Any] = field(default_factory=dict)
    segments: list[dict] = field(default_factory=list)  # as the pointer names them (empty: nothing to append to)
    stored_files: int = 0  # the files the stored cache describes, trusted or not
    held: Held = field(default_factory=Held)  # what the trusted part held, before the run added to it


class Preload:
    """What the cache check needs, started on threads before the run reads its history: the listing of
    ``_lakefs/`` (it grows with the history: 2,000 files on the bench's 1,000 commits) and the cache's own files,
    read and decoded. Both are then done while lakeFS answers for the history (prepare-uncommitted, the branches'
    lines, prepare-commits), which mostly waits on the network, instead of after it."""

    def __init__(self, ns: Namespace, *, repository_id: str, namespace: str) -> None:
        self.store, self.root = ns.store, ns.root
        self.sizes = in_background("gc-cache-sizes", ns.metadata_sizes)
        self.stored = in_background("gc-cache-read", _stored, ns, repository_id=repository_id,
                                     namespace=namespace)

    @classmethod
    def start(cls, storage: StorageConfig, *, repository_id: str) -> Preload | None:
        """None when the namespace cannot be reached before lakeFS is asked (a local blockstore whose folder is
        learnt from lakeFS): ``load`` then reads it itself."""
        try:
            return cls(open_namespace(storage), repository_id=repository_id, namespace=storage.namespace)
        except StorageError:
            return None

    def of(self, ns: Namespace) -> bool:
        return (self.store, self.root) == (ns.store, ns.root)

    def cancel(self) -> None:
        self.sizes.cancel()
        self.stored.cancel()

    def settle(self) -> None:
        """Cancel what has not started and wait for what has: a run that will not use the cache must not leave a
        thread decoding its Parquet behind it (a process that exits under such a thread aborts in Arrow's C++)."""
        from concurrent.futures import wait  # noqa: PLC0415

        self.cancel()
        wait([self.sizes, self.stored])


def load(ns: Namespace, *, repository_id: str, namespace: str, preload: Preload | None = None) -> Loaded:
    """The trusted part of the repository's cache (empty when there is none or it is ignored, and why).
    ``preload``: the cache and the namespace's listing, when the run started reading them early (used only when
    it is of ``ns``: the namespace the mark reads)."""
    if preload is None or not preload.of(ns):
        if preload is not None:
            preload.cancel()
        # The listing grows with the history and is the store's time as much as ours: it runs while the cache
        # is read
        preload = Preload(ns, repository_id=repository_id, namespace=namespace)
    try:
        return _checked(preload.stored.result(), preload.sizes)
    finally:
        preload.sizes.cancel()  # no cache to check: not waited for


def _stored(ns: Namespace, *, repository_id: str, namespace: str) -> tuple[dict, Memory] | Loaded:
    """The cache as its pointer names it, decoded; or, when there is none or it cannot be trusted, why."""
    try:
        raw = ns.read(POINTER)
    except StorageError as exc:
        if "does not exist" in str(exc):
            return Loaded(Memory(), None, {"state": "empty", "reason": "no cache yet"})
        return _ignored(f"its pointer is unreadable: {exc}")
    try:
        doc = check_pointer(raw, repository_id=repository_id, namespace=namespace)
        keys = [segment_key(doc["slot"], i) for i in range(len(doc["segments"]))]
        try:
            read = ns.read_many(keys)
        except StorageError as exc:
            raise CacheError(f"a segment is unreadable: {exc}") from None
        parts, spans = [], 0
        for i, files in enumerate(doc["segments"]):
            data = unpacked(read[keys[i]], files, what=f"segment {i}")
            parts.append(decode(data, span_offset=spans))
            spans += len(parts[-1].spans)
        return doc, merged(parts)
    except CacheError as exc:
        return _ignored(str(exc))


def _checked(stored: tuple[dict, Memory] | Loaded, sizes: Future) -> Loaded:
    if isinstance(stored, Loaded):
        return stored
    doc, memory = stored
    try:
        listed = sizes.result()
    except StorageError as exc:  # an optimisation only: without the sizes to check it against, read everything
        log.warning("GC mark cache ignored (listing _lakefs/ failed): %s", exc)
        # the pointer's slot is kept, so this run's cache goes to the other one and the current stays whole
        return Loaded(Memory(), doc["slot"], {"state": "ignored", "reason": f"listing _lakefs/ failed: {exc}"})
    stored_files = memory.files()
    memory, dropped = trusted(memory, listed)
    return Loaded(memory, doc["slot"], {"state": "used", "reason": None, "stale_entries": dropped},
                  segments=doc["segments"], stored_files=stored_files, held=memory.held())


def _ignored(why: str) -> Loaded:
    log.warning("GC mark cache ignored (it is rebuilt by this run): %s", why)
    return Loaded(Memory(), None, {"state": "ignored", "reason": why})


def save(ns: Namespace, keep: Memory, loaded: Loaded, *, repository_id: str, namespace: str, run_id: str) -> str:
    """Store ``keep`` (what a run used) over the cache ``loaded``, as ``plan_save`` says: nothing when it adds
    nothing, a segment of what it adds, or all of it in the slot the pointer does not name; the pointer last, so
    a run killed midway leaves the current cache whole. Says which it did."""
    how, memory = plan_save(keep, loaded.held, stored_files=loaded.stored_files, segments=len(loaded.segments))
    if memory is None:
        return how
    if how == "appended":  # the next segment's name in the current slot: no pointer names it
        slot, segments = loaded.slot, list(loaded.segments)
    else:
        slot, segments = SLOTS[1] if loaded.slot == SLOTS[0] else SLOTS[0], []
    files = encode(memory)
    ns.write(segment_key(slot, len(segments)), packed(files))
    ns.write(POINTER, pointer([*segments, described(files)], slot=slot, repository_id=repository_id,
                              namespace=namespace, run_id=run_id))
    return how
