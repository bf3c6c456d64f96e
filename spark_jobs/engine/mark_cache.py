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
from spark_jobs.engine.storage import Namespace, StorageError

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


def load(ns: Namespace, *, repository_id: str, namespace: str) -> Loaded:
    """The trusted part of the repository's cache (empty when there is none or it is ignored, and why)."""
    # The listing of _lakefs/ (to check every entry against its file) grows with the history and is the store's
    # time, not ours: it runs while the cache is read and decoded
    pool = ThreadPoolExecutor(1, thread_name_prefix="gc-cache-sizes")
    try:
        return _load(ns, pool.submit(ns.metadata_sizes), repository_id=repository_id, namespace=namespace)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)  # no cache to check: the listing is not waited for


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
