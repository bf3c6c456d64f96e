"""The mark's memory: what each range file and metarange held, kept in the repository's namespace so a run reads
only the metadata files it has not seen before (range files and metaranges are immutable and named by content).

Use: on by default (``RunRequest(cache=True)``, ``MarkRequest(cache=True)``, ``tests.gc_engine.Collector(..., cache=True)``);
``gc run --no-cache`` / ``RunRequest(cache=False)`` / ``Collector(endpoint, cache=False)`` reads everything as before.
What the mark took from it is in the run's record: ``Summary.cache`` (summary.json; ``gc show`` prints it).

Where: ``_lakefs/retention/gc/janitor-mark-cache/v1/`` (a name lakeFS never writes; under ``_lakefs/``, which the
sweep never lists nor deletes). The pointer ``current.json`` names the slot (``a``/``b``) holding the four parquet
files (spark_jobs/core/mark_cache.py) with their sizes and SHA-256; a run writes the other slot, then the pointer,
so a run killed midway leaves the old cache whole. It is an optimisation only: a missing, unreadable, foreign or
older-format cache is ignored (logged, and rebuilt by the run), and an entry is used only when the file it came
from is still listed under ``_lakefs/`` with the size remembered. The new cache holds what this run used, so
files no retained commit reaches any more drop out.

On either runner the driver reads the cache and hands the runner only the unseen files; each unit returns what
its file held, from which the driver computes the kept addresses and writes the new cache (mark_source.py).
"""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from spark_jobs.core.mark_cache import (
    FILES,
    SLOTS,
    CacheError,
    Memory,
    check_file,
    check_pointer,
    decode,
    encode,
    pointer,
    trusted,
)
from spark_jobs.engine.storage import Namespace, StorageConfig, StorageError

log = logging.getLogger(__name__)
PREFIX = "_lakefs/retention/gc/janitor-mark-cache/v1"
POINTER = f"{PREFIX}/current.json"


def slot_key(slot: str, name: str) -> str:
    return f"{PREFIX}/slot-{slot}/{name}"


@dataclass
class Loaded:
    memory: Memory
    slot: str | None  # the slot the pointer names (None: no usable cache)
    stats: dict[str, Any] = field(default_factory=dict)


class Listing:
    """The listing of ``_lakefs/`` that checks the cache's entries, started on a thread before the run reads its
    history: it grows with the history (2,000 files on the bench's 1,000 commits) and is then done while lakeFS
    prepares the run's commits, instead of competing with the cache's decoding for the interpreter."""

    def __init__(self, ns: Namespace) -> None:
        self.store, self.root = ns.store, ns.root
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="gc-cache-sizes")
        self.sizes: Future = self._pool.submit(ns.metadata_sizes)
        self._pool.shutdown(wait=False)  # the thread ends with the listing; nothing waits for it unless asked

    @classmethod
    def start(cls, storage: StorageConfig) -> Listing | None:
        """None when the namespace cannot be reached before lakeFS is asked (a local blockstore whose folder is
        learnt from lakeFS): ``load`` then lists it itself."""
        try:
            return cls(Namespace(storage))
        except StorageError:
            return None

    def of(self, ns: Namespace) -> bool:
        return (self.store, self.root) == (ns.store, ns.root)


def load(ns: Namespace, *, repository_id: str, namespace: str, listing: Listing | None = None) -> Loaded:
    """The trusted part of the repository's cache (empty when there is none or it is ignored, and why).
    ``listing``: the namespace's listing, when the run started it early (it must be of ``ns``)."""
    if listing is not None and listing.of(ns):
        return _load(ns, listing.sizes, repository_id=repository_id, namespace=namespace)
    # The listing grows with the history and is the store's time as much as ours: it runs while the cache is read
    listing = Listing(ns)
    try:
        return _load(ns, listing.sizes, repository_id=repository_id, namespace=namespace)
    finally:
        listing.sizes.cancel()  # no cache to check: not waited for


def _load(ns: Namespace, sizes: Future, *, repository_id: str, namespace: str) -> Loaded:
    try:
        raw = ns.read(POINTER)
    except StorageError as exc:
        if "does not exist" in str(exc):
            return Loaded(Memory(), None, {"state": "empty", "reason": "no cache yet"})
        return _ignored(f"its pointer is unreadable: {exc}")
    try:
        doc = check_pointer(raw, repository_id=repository_id, namespace=namespace)
        files = {}
        for name in FILES:
            try:
                files[name] = ns.read(slot_key(doc["slot"], name))
            except StorageError as exc:
                raise CacheError(f"{name} is unreadable: {exc}") from None
            check_file(name, files[name], doc["files"][name])
        memory = decode(files)
    except CacheError as exc:
        return _ignored(str(exc))
    try:
        listed = sizes.result()
    except StorageError as exc:  # an optimisation only: without the sizes to check it against, read everything
        log.warning("GC mark cache ignored (listing _lakefs/ failed): %s", exc)
        # the pointer's slot is kept, so this run's cache goes to the other one and the current stays whole
        return Loaded(Memory(), doc["slot"], {"state": "ignored", "reason": f"listing _lakefs/ failed: {exc}"})
    memory, dropped = trusted(memory, listed)
    return Loaded(memory, doc["slot"], {"state": "used", "reason": None, "stale_entries": dropped})


def _ignored(why: str) -> Loaded:
    log.warning("GC mark cache ignored (it is rebuilt by this run): %s", why)
    return Loaded(Memory(), None, {"state": "ignored", "reason": why})


def save(ns: Namespace, memory: Memory, *, previous_slot: str | None, repository_id: str, namespace: str,
         run_id: str) -> None:
    """Write ``memory`` to the slot the pointer does not name, then point at it."""
    slot = SLOTS[1] if previous_slot == SLOTS[0] else SLOTS[0]
    files = encode(memory)
    for name, data in files.items():
        ns.write(slot_key(slot, name), data)
    ns.write(POINTER, pointer(files, slot=slot, repository_id=repository_id, namespace=namespace, run_id=run_id))
