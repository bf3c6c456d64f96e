"""lakeFS's local blockstore: ``local://<name>`` is the folder ``<name>`` under lakeFS's blockstore.local.path,
through fsspec's "file"; written atomically, deleted one unlink per object."""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator
from typing import Any

from spark_jobs.core.freeing import Verdict, local_verdict
from spark_jobs.engine.stores.base import DeleteResult, Location, StorageError
from spark_jobs.engine.stores.namespace import Namespace
from spark_jobs.engine.stores.throttle import ThrottleStats


class LocalNamespace(Namespace):
    store = "local"
    protocol = "file"
    batch = 1000
    settings_hint = "the store settings and the blockstore folder"

    @classmethod
    def where(cls, rest: str, local_root: str | None) -> Location:
        if not local_root:
            raise StorageError(f"local://{rest} is on lakeFS's local blockstore: set the blockstore folder "
                               "(LAKEFS_JANITOR_GC__LOCAL_BLOCKSTORE_PATH, lakeFS's blockstore.local.path)")
        return Location(cls.store, cls.protocol, f"{local_root.rstrip('/')}/{rest.strip('/')}")

    @classmethod
    def filesystem(cls, location: Location, options: dict[str, Any]):
        import fsspec  # noqa: PLC0415

        return fsspec.filesystem("file")  # a folder: no options, no listing cache to turn off

    def freeing(self) -> Verdict:
        return local_verdict()

    def read_mapped(self, key: str) -> bytes | mmap.mmap:
        def mapped() -> bytes | mmap.mmap:
            with open(self.path(key), "rb") as file:
                # an empty file cannot be mapped; lakeFS never rewrites nor truncates a file under _lakefs/
                return mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) if os.fstat(file.fileno()).st_size \
                    else b""
        try:
            return self._call(f"reading {key}", mapped)
        except (FileNotFoundError, IsADirectoryError):
            raise StorageError(f"{self.config.namespace}/{key} does not exist") from None

    def _write(self, key: str, path: str, data: bytes) -> None:
        self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        tmp = f"{path}.tmp-{os.getpid()}"
        self.fs.pipe_file(tmp, data)
        os.replace(tmp, path)  # a reader never sees half a file

    def _unit_pages(self, unit: str) -> Iterator[list[dict[str, Any]]]:
        """A walk of the unit's folder with os.scandir, ``page_size`` files a page, each described as fsspec's
        "file" store does (its name, its own modification time, the size of what a link points at, 0 when that is
        gone): every entry that is not a folder under ``data/<slice>/`` (a folder that cannot be read is left out,
        as fsspec's walk does), the regular files directly in the root for ``""`` (an unreadable root fails)."""
        recursive = bool(unit)
        folders, page = [self.path(unit.rstrip("/")) if unit else self.root], []
        while folders:
            folder = folders.pop()
            try:
                with os.scandir(folder) as entries:
                    for entry in entries:
                        if entry.is_dir(follow_symlinks=False):
                            if recursive:
                                folders.append(entry.path)
                            continue
                        if not recursive and not entry.is_file(follow_symlinks=False):
                            continue
                        info = _described(entry)
                        if info is not None:
                            page.append(info)
                        if len(page) >= self.page_size:
                            yield page
                            page = []
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError as exc:
                if recursive:
                    continue
                raise StorageError(f"listing the root on {self.config.namespace} failed: {exc}") from None
        if page:
            yield page

    def _delete_batch(self, batch: list[str], result: DeleteResult, tally: ThrottleStats) -> None:
        # a disk does not throttle: one unlink per object, a failure (permissions) reported with its key
        for key in batch:
            try:
                os.unlink(self.path(key))
            except FileNotFoundError:
                pass
            except OSError as exc:
                result.failed.append(f"{key}: {exc.strerror}")
                continue
            result.deleted += 1
        tally.requests += len(batch)


def _described(entry: os.DirEntry) -> dict[str, Any] | None:
    """One file as fsspec's local ``info`` describes it (the fields the listing reads); None when it is gone."""
    try:
        own = entry.stat(follow_symlinks=False)
    except FileNotFoundError:
        return None
    size = own.st_size
    if entry.is_symlink():
        try:
            size = entry.stat(follow_symlinks=True).st_size
        except OSError:
            size = 0
    return {"name": entry.path, "size": size, "type": "file", "mtime": own.st_mtime}
