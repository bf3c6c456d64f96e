"""Range files kept on this machine's disk from one daily run to the next.

A daily run compares the ranges that died since the previous run with those that appeared
(``engine/reach/lean_mark.py``). On a day whose changes fall at random paths lakeFS rewrites nearly every range,
so today's dead ranges are the ones the previous run saw appear: without a copy, half of what the day reads from an
object store was already read yesterday. A range's id is the hash of its contents and lakeFS never rewrites a file
under ``_lakefs/``, so a copy stays right for as long as it is kept (lakeFS keeps its own, ``committed.local_cache``,
for the same reason).

Copies live in ``<folder>/<namespace digest>/<range id>``, each written whole (a temporary file renamed, so that a
reader in another process never maps half a file), the least recently used ones removed when the folder passes its
size. A copy is mapped, not read: the decoders take any buffer. A copy the decoder refuses is dropped by the caller
and the store read (``drop``). Nothing here is needed for a right answer: a folder that cannot be written, a disk
that fills, a copy that vanishes under a concurrent trim — each only means the store is read, and the first such
problem of a process is logged once.
"""

from __future__ import annotations

import hashlib
import logging
import mmap
import os
import re
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

# lakeFS names a range by the hex digest of its contents; anything else is not looked up (nor made a file name)
_RANGE_ID = re.compile(r"[0-9a-f]{16,128}")
# a namespace's folder; the trim touches nothing else, whatever else the configured folder holds
_NAMESPACE_FOLDER = re.compile(r"[0-9a-f]{24}")
_TMP = ".tmp-"
_STALE_TMP_SECONDS = 3600  # a temporary file this old was left by a process that died while writing it


@dataclass(frozen=True)
class RangeCacheSettings:
    """Where the copies go (``~`` is this process's home: executors each expand it) and how big the folder may
    grow, all namespaces together."""

    folder: str
    max_mib: int

    def __post_init__(self) -> None:
        if not self.folder:
            raise ValueError("the range cache's folder is empty")
        if self.max_mib <= 0:
            raise ValueError(f"the range cache's size must be positive, not {self.max_mib} MiB")


class RangeCache:
    """The copies of one storage namespace's range files (``open``), shared with every other process on the
    machine that uses the same folder."""

    _warned = False  # per process: one log line for the first problem, not one per file

    def __init__(self, root: Path, namespace: str, max_bytes: int) -> None:
        self.root = root
        self.folder = root / hashlib.sha256(namespace.encode()).hexdigest()[:24]
        self.max_bytes = max_bytes
        self._lock = threading.Lock()  # one trim at a time in this process

    @classmethod
    def open(cls, settings: RangeCacheSettings | None, namespace: str) -> RangeCache | None:
        """The cache of ``namespace`` under ``settings``; None when off or its folder cannot be made."""
        if settings is None:
            return None
        root = Path(os.path.expanduser(settings.folder))
        cache = cls(root, namespace, settings.max_mib << 20)
        try:
            root.mkdir(parents=True, exist_ok=True)
            cache.folder.mkdir(mode=0o700, exist_ok=True)
            st = cache.folder.stat()
        except OSError as exc:
            cls._problem(f"cannot make {cache.folder}", exc)
            return None
        # a copy decides what a run deletes: only this user may have written one (a shared folder such as /tmp
        # must not let another account plant ranges)
        if st.st_uid != os.getuid() or st.st_mode & 0o022:
            cls._problem(f"{cache.folder} is not this user's alone", PermissionError(oct(st.st_mode & 0o777)))
            return None
        return cache

    def path(self, range_id: str) -> Path | None:
        return self.folder / range_id if _RANGE_ID.fullmatch(range_id) else None

    def get(self, range_id: str) -> mmap.mmap | None:
        """The copy of ``range_id``, mapped read-only (its use makes it the most recent), or None."""
        path = self.path(range_id)
        if path is None:
            return None
        try:
            with open(path, "rb") as file:
                if not os.fstat(file.fileno()).st_size:  # never a range: a copy gone wrong
                    self.drop(range_id)
                    return None
                copy = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
            os.utime(path)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            self._problem(f"cannot read {path}", exc)
            return None
        return copy

    def put(self, range_id: str, data: bytes) -> None:
        """Keep a copy of ``data``, the store's file ``range_id``; then the folder trimmed to its size."""
        path = self.path(range_id)
        if path is None or not data or len(data) > self.max_bytes:
            return
        tmp = path.with_name(f"{_TMP}{os.getpid()}-{uuid.uuid4().hex[:8]}")
        try:
            with open(tmp, "wb") as file:
                file.write(data)
            os.replace(tmp, path)
        except OSError as exc:
            self._problem(f"cannot write {path}", exc)
            tmp.unlink(missing_ok=True)
            return
        self.trim()

    def drop(self, range_id: str) -> None:
        if (path := self.path(range_id)) is not None:
            path.unlink(missing_ok=True)

    def trim(self) -> None:
        """The least recently used copies removed, in every namespace's folder, until the whole fits."""
        with self._lock:
            files = []
            try:
                for folder in os.scandir(self.root):
                    if not (_NAMESPACE_FOLDER.fullmatch(folder.name) and folder.is_dir(follow_symlinks=False)):
                        continue
                    for entry in os.scandir(folder.path):
                        if not (_RANGE_ID.fullmatch(entry.name) or entry.name.startswith(_TMP)):
                            continue
                        try:
                            st = entry.stat(follow_symlinks=False)
                        except FileNotFoundError:
                            continue  # removed by another process meanwhile
                        files.append((st.st_mtime, st.st_size, entry.path, entry.name.startswith(_TMP)))
            except OSError as exc:
                self._problem(f"cannot list {self.root}", exc)
                return
            stale = time.time() - _STALE_TMP_SECONDS
            # a temporary file that old was left by a process that died writing it (a younger one is being written:
            # its rename settles it)
            doomed = [path for mtime, _, path, partial in files if partial and mtime < stale]
            over = sum(size for _, size, _, _ in files) - self.max_bytes
            for _, size, path, partial in sorted(files):
                if over <= 0:
                    break
                if not partial:
                    doomed.append(path)
                    over -= size
            for path in doomed:
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    self._problem(f"cannot remove {path}", exc)
                    return

    @classmethod
    def _problem(cls, what: str, exc: BaseException) -> None:
        if not cls._warned:
            cls._warned = True
            log.warning("range cache: %s (%s); the store is read instead", what, exc)
