"""lakeFS's local blockstore: ``local://<name>`` is the folder ``<name>`` under lakeFS's blockstore.local.path,
through fsspec's "file"; written atomically, deleted one unlink per object."""

from __future__ import annotations

import os
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

    def _write(self, key: str, path: str, data: bytes) -> None:
        self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        tmp = f"{path}.tmp-{os.getpid()}"
        self.fs.pipe_file(tmp, data)
        os.replace(tmp, path)  # a reader never sees half a file

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
