"""The storage namespace as the GC sees it, on every store lakeFS supports, through fsspec: list data objects by
unit (one unit per ``data/<slice>/`` plus the legacy flat root), read, write under ``_lakefs/``, and delete in the
store's batches under its throttling (``throttle.Throttle``).

One contract, ``namespace.Namespace``, and one module per store implementing it (``local``, ``s3``, ``azure``,
``gcs``; ``azure_client`` and ``gcs_client``: adlfs's and gcsfs's filesystems with the GC's client settings, no
retries of their own, so that every throttling answer and time-out reaches the throttle, as botocore's on S3);
``base`` holds the values they share (``StorageConfig``, ``Location``, ``DeleteResult``, ``StorageError``, the key
check) and ``faults`` how a store's failure is read and retried (throttling, unreachable, ``throttled_call``). The
store is chosen here only, from the namespace's scheme (``SCHEMES``). Code outside this package imports from the
package itself (``open_namespace``, ``Namespace``, ``StorageConfig``, ``StorageError``, …).

Built from plain configuration (``StorageConfig``) so an executor can rebuild it. Never lists, writes or deletes
outside the namespace (keys are relative to it by construction and checked), and never deletes under ``_lakefs/``.

=========  ==========================================================  ===========  ===========================
store      namespace forms (as lakeFS accepts them)                     fsspec       delete batch
=========  ==========================================================  ===========  ===========================
local      ``local://<name>`` (under lakeFS's blockstore.local.path)   file         one unlink per object
S3         ``s3://bucket/prefix`` (``s3a://`` read as the same)         s3fs         DeleteObjects, 1,000 keys
Azure      ``https://<account>.blob.core.windows.net/<container>/…``   adlfs        blob batch, 256 blobs
           (ADLS Gen2: ``…dfs.core.windows.net/…``, the same blobs)
GCS        ``gs://bucket/prefix``                                      gcsfs        JSON batch, 100 objects
=========  ==========================================================  ===========  ===========================

A new store: a module here with its ``Namespace`` subclass, its schemes in ``SCHEMES``.
"""

from __future__ import annotations

from spark_jobs.engine.stores.azure import AzureNamespace
from spark_jobs.engine.stores.base import DeleteResult, Location, StorageConfig, StorageError, check_key
from spark_jobs.engine.stores.faults import is_throttling, is_unreachable
from spark_jobs.engine.stores.gcs import GCSNamespace
from spark_jobs.engine.stores.local import LocalNamespace
from spark_jobs.engine.stores.namespace import Namespace
from spark_jobs.engine.stores.s3 import S3Namespace

__all__ = ["SCHEMES", "STORES", "DeleteResult", "Location", "Namespace", "StorageConfig", "StorageError",
           "check_key", "is_throttling", "is_unreachable", "locate", "open_namespace"]

# A namespace's scheme -> its store's Namespace (lakeFS's forms; Azure's are https:// on a *.core.windows.net host)
SCHEMES: dict[str, type[Namespace]] = {"local": LocalNamespace, "s3": S3Namespace, "s3a": S3Namespace,
                                       "gs": GCSNamespace, "https": AzureNamespace, "http": AzureNamespace}
# The same classes by store name (local | s3 | azure | gcs)
STORES: dict[str, type[Namespace]] = {cls.store: cls for cls in SCHEMES.values()}


def locate(namespace: str, local_root: str | None = None) -> Location:
    """Where a storage namespace lives, or a StorageError that says which forms are supported."""
    scheme, _, rest = namespace.partition("://")
    if not rest.strip("/"):
        raise StorageError(f"storage namespace {namespace!r} is not a URL with a bucket, container or name")
    store = SCHEMES.get(scheme)
    where = store.where(rest, local_root) if store is not None else None
    if where is None:
        raise StorageError(f"storage namespace {namespace!r}: supported are local://name, s3://bucket/prefix, "
                           "gs://bucket/prefix and https://<account>.blob.core.windows.net/<container>/<prefix>")
    return where


def open_namespace(config: StorageConfig) -> Namespace:
    """The namespace ``config`` names, on its store's ``Namespace``."""
    location = locate(config.namespace, config.local_root)
    return STORES[location.store](config, location)
