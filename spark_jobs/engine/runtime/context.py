"""A run's context: what every unit of work rebuilds its clients from (``JobConfig``, picklable), the clients one
partition opens (``OpenContext``), how a run reports its progress, and the one error a run stops with."""

from __future__ import annotations

import mmap
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from spark_jobs.engine.runtime.lakefs_api import LakeFSApi, LakeFSApiConfig
from spark_jobs.engine.runtime.range_cache import RangeCache, RangeCacheSettings
from spark_jobs.engine.stores import StorageConfig, open_namespace

Progress = Callable[[str, int], None]  # (phase, count so far)


class GCError(RuntimeError):
    """A run that must not go on; nothing was deleted by the failing phase. ``reason`` labels the failure metric."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class JobConfig:
    """Everything an executor needs to rebuild its clients (picklable, no sockets)."""

    api: LakeFSApiConfig
    storage: StorageConfig
    repository_id: str
    metadata_from: str = "storage"  # or "lakefs": read ranges through lakeFS's metadata-object endpoint
    range_cache: RangeCacheSettings | None = None  # copies of the ranges a daily run compares (None: none kept)

    def open(self) -> OpenContext:
        return OpenContext(self)


class OpenContext:
    def __init__(self, config: JobConfig) -> None:
        self.config = config
        self.ns = open_namespace(config.storage)
        self._api: LakeFSApi | None = None
        self.prefixes = self.ns.prefixes
        self.seen_blocks: set[bytes] = set()  # data blocks this partition decoded (see sstable.range_addresses)
        # metarange data blocks this partition decoded, with their spans (see sstable.metarange_spans)
        self.metarange_blocks: dict[bytes, list[tuple[bytes, str]]] = {}
        self.from_cache: set[str] = set()  # ranges map_range gave from the range cache

    @property
    def api(self) -> LakeFSApi:
        if self._api is None:
            self._api = LakeFSApi(self.config.api)
        return self._api

    def read_metadata(self, kind: str, object_id: str) -> bytes:
        if self.config.metadata_from == "lakefs":
            return self.api.metadata_object(self.config.repository_id, kind, object_id)
        return self.ns.read(f"_lakefs/{object_id}")

    def read_metarange(self, metarange_id: str) -> bytes:
        return self.read_metadata("meta_range", metarange_id)

    def read_range(self, range_id: str) -> bytes:
        return self.read_metadata("range", range_id)

    @cached_property
    def range_cache(self) -> RangeCache | None:
        """Copies of range files on this machine (``runtime.range_cache``); none for a namespace read from this
        machine's disk already."""
        if self.config.metadata_from != "lakefs" and self.ns.store == "local":
            return None
        return RangeCache.open(self.config.range_cache, self.config.storage.namespace)

    def map_range(self, range_id: str) -> bytes | mmap.mmap:
        """``read_range`` for a day's comparison, which reads hundreds of MB of range files, mostly to find that their
        blocks are equal: mapped rather than copied where the namespace is on this machine's disk
        (``Namespace.read_mapped``), else from the range cache when it holds the file (``from_cache`` then names
        it), and the file read kept there for the next day."""
        cache = self.range_cache
        if cache is None:
            return self.read_range(range_id) if self.config.metadata_from == "lakefs" else \
                self.ns.read_mapped(f"_lakefs/{range_id}")
        if (copy := cache.get(range_id)) is not None:
            self.from_cache.add(range_id)
            return copy
        data = self.read_range(range_id)
        cache.put(range_id, data)
        return data

    def drop_cached(self, range_ids) -> bool:
        """The range cache's copies among ``range_ids`` dropped (a decoder refused one of them); whether any was."""
        dropped = self.from_cache.intersection(range_ids)
        for range_id in dropped:
            self.range_cache.drop(range_id)
        self.from_cache -= dropped
        return bool(dropped)

    def close(self) -> None:
        if self._api is not None:
            self._api.close()
