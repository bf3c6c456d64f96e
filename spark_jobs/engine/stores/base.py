"""The values every store module shares: the configuration an executor rebuilds a namespace from
(``StorageConfig``), where a namespace lives (``Location``), what a delete did (``DeleteResult``), the key check
(``check_key``), and the one error (``StorageError``) with its reason.

``StorageError`` stays defined here: an executor's failure reaches the Spark driver as its traceback's text, and the
driver reads it back by this qualified name (``spark_jobs.engine.stores.base.StorageError``,
``backends.spark_base.executor_error``). The contract each store implements is ``namespace.Namespace``; how a store's
failures are read and retried, ``faults``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from spark_jobs.engine.stores.throttle import THROTTLED_TEXT

# What a run's StorageError says when the store did not answer (THROTTLED_TEXT: kept throttling): its reason read
# back from its text (``reason_of``)
UNREACHABLE_TEXT = "the store is unreachable"


class StorageError(RuntimeError):
    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        # labels the failure metric: storage, storage-unavailable, storage-throttled. None: read from the message,
        # as when a Spark task's StorageError reaches the driver as its traceback's text only (jobs/gc.py)
        self.reason = reason or reason_of(message)

    def __reduce__(self):  # from an executor to the driver with its reason
        return type(self), (str(self), self.reason)

    def reason_or(self, step: str) -> str:
        """A step's reason for this error (``step``: storage-read, storage-delete, …), unless the store did not
        answer or kept throttling: that is what an operator acts on, whichever step met it."""
        return self.reason if self.reason in ("storage-unavailable", "storage-throttled") else step


def reason_of(message: str) -> str:
    """The reason of a StorageError that says only its message (the one ``faults.throttled_call`` gave it)."""
    return ("storage-unavailable" if UNREACHABLE_TEXT in message else
            "storage-throttled" if THROTTLED_TEXT in message else "storage")


@dataclass(frozen=True)
class Location:
    store: str  # local | s3 | azure | gcs
    protocol: str  # fsspec protocol
    root: str  # the namespace's path as fsspec names it: bucket/prefix, container/prefix, or a local folder
    account: str | None = None  # Azure storage account


# Requests to the store at once, per process (the throttle backs off when the store says slow down): what a daily
# run's few hundred HEADs take is this many round trips apart (at 8, 400 HEADs cost 0.7 s on versitygw)
MAX_IN_FLIGHT = 32


@dataclass(frozen=True)
class StorageConfig:
    namespace: str  # as lakeFS gives it
    local_root: str | None = None  # the local blockstore's folder, for local:// namespaces
    # fsspec options per store, a JSON object {"s3": {...}, "azure": {...}, "gcs": {...}}: endpoint, credentials
    options_json: str | None = None
    max_in_flight: int = MAX_IN_FLIGHT  # requests to the store at once, per process

    def options(self, store: str) -> dict[str, Any]:
        try:
            every = json.loads(self.options_json) if self.options_json else {}
        except ValueError as exc:
            raise StorageError(f"the storage options are not JSON: {exc}") from None
        if not isinstance(every, dict) or not isinstance(every.get(store, {}), dict):
            raise StorageError('the storage options must be a JSON object {"s3": {...}, "azure": {...}, "gcs": {...}}')
        return dict(every.get(store) or {})


@dataclass
class DeleteResult:
    deleted: int = 0
    requests: int = 0
    freed_bytes: int = 0  # purge_noncurrent: the bytes of the versions it removed
    backoffs: int = 0
    failed: list[str] = field(default_factory=list)


def check_key(key: str) -> str:
    if not key or key.startswith("/") or ".." in key.split("/") or "://" in key:
        raise StorageError(f"refusing a key that leaves the namespace: {key!r}")
    return key
