"""S3: ``s3://bucket/prefix`` (``s3a://`` read as the same) through s3fs, deleted with DeleteObjects (1,000 keys).

Reads, writes, listings and deletes go through one plain botocore client per process when the options have a plain
botocore equivalent (``s3_client.plain_s3_arguments``): s3fs's event loop costs twice the CPU per request, and s3fs is then
not even imported unless something the plain client does not do asks for it. Neither client
retries by itself: the throttle must see every throttling answer (and retries at a lowered rate)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from spark_jobs.core.freeing import Verdict, s3_verdict, unreadable
from spark_jobs.engine.stores.base import DeleteResult, Location, StorageConfig, StorageError, check_key
from spark_jobs.engine.stores.faults import THROTTLING, error_text
from spark_jobs.engine.stores.namespace import Namespace
from spark_jobs.engine.stores.s3_client import plain_s3_client, s3_session, session_options
from spark_jobs.engine.stores.s3_head import HandOver, SignedHead, signed_head


class S3Namespace(Namespace):
    store = "s3"
    protocol = "s3"
    batch = 1000
    package = "s3fs"

    def __init__(self, config: StorageConfig, location: Location) -> None:
        # every request of a run through one plain botocore client, when the options allow one (None: s3fs does
        # all); s3fs itself (0.25 s of imports, its own client on its event loop) is then built only if asked for
        self._options_json = json.dumps(config.options(self.store), sort_keys=True)
        self.s3 = plain_s3_client(self._options_json, config.max_in_flight)
        self._signed_heads: dict[str, SignedHead | None] = {}  # per bucket, built at its first HEAD
        super().__init__(config, location)

    def defers_filesystem(self) -> bool:
        return self.s3 is not None

    @classmethod
    def fsspec_options(cls, location: Location, options: dict[str, Any]) -> dict[str, Any]:
        # The throttle retries throttled requests at a lowered rate: botocore's own retries would hide every
        # throttling answer from it (and retry at full speed).
        options.setdefault("config_kwargs", {}).setdefault("retries", {"total_max_attempts": 1})
        if not session_options(options):  # a profile (or another session option) needs s3fs's own session
            options.setdefault("session", s3_session())
        return options

    @classmethod
    def tuned(cls, fs):
        fs.retries = 1  # s3fs's own SlowDown retries, for the same reason
        return fs

    def _s3_call(self, operation: str, **kwargs: Any) -> dict:
        if self.s3 is not None:
            return getattr(self.s3, operation)(**kwargs)
        return self.fs.call_s3(operation, **kwargs)

    def freeing(self) -> Verdict:
        bucket, _, prefix = self.root.partition("/")
        try:
            versioning = self._s3_call("get_bucket_versioning", Bucket=bucket).get("Status")
        except Exception as exc:  # noqa: BLE001 - denied, or not implemented: said, not raised
            return unreadable("s3", f"versioning of bucket {bucket}", permission="s3:GetBucketVersioning",
                              error=error_text(exc))
        why = None
        try:
            rules = self._s3_call("get_bucket_lifecycle_configuration", Bucket=bucket).get("Rules", [])
        except Exception as exc:  # noqa: BLE001
            rules = [] if "NoSuchLifecycleConfiguration" in f"{_client_error_code(exc)} {exc}" else None
            why = f"cannot read the lifecycle rules of bucket {bucket} (needs s3:GetLifecycleConfiguration): " \
                  f"{error_text(exc)}"
        verdict = s3_verdict(versioning, rules, prefix)
        if rules is None and versioning:
            return replace(verdict, notes=(why, *verdict.notes))
        return verdict

    def purge_noncurrent(self, keys: list[str]) -> DeleteResult:
        bucket, _, _ = self.root.partition("/")
        result = DeleteResult()
        versions = [v for found in self._each(self._versions, [check_key(k) for k in keys]) for v in found]
        for start in range(0, len(versions), self.batch):
            batch = versions[start:start + self.batch]
            answer = self._call("removing noncurrent versions", lambda b=batch: self._s3_call(
                "delete_objects", Bucket=bucket, Delete={"Objects": [{"Key": v["Key"], "VersionId": v["VersionId"]}
                                                                     for v in b], "Quiet": True}))
            failed = {(e["Key"], e.get("VersionId")) for e in answer.get("Errors", [])}
            result.failed += [f"{e['Key']} version {e.get('VersionId')}: {e.get('Code')}" for e in
                              answer.get("Errors", [])]
            removed = [v for v in batch if (v["Key"], v["VersionId"]) not in failed]
            result.deleted += sum(1 for v in removed if "Size" in v)  # versions; delete markers hold no bytes
            result.freed_bytes += sum(int(v.get("Size") or 0) for v in removed)
            result.requests += 1
        return result

    def _versions(self, key: str) -> list[dict]:
        """The noncurrent versions and delete markers of exactly ``key``: none when it has a current version
        (written again since this run deleted it, it is not garbage any more)."""
        bucket, _, name = self.path(key).partition("/")
        found, marker = [], {}
        while True:
            page = self._call(f"listing the versions of {key}", lambda m=marker: self._s3_call(
                "list_object_versions", Bucket=bucket, Prefix=name, **m))
            # the prefix also lists longer keys that start with this one: only the key itself
            found += [v for v in page.get("Versions", []) + page.get("DeleteMarkers", []) if v["Key"] == name]
            if not page.get("IsTruncated"):
                break
            marker = {"KeyMarker": page["NextKeyMarker"], "VersionIdMarker": page["NextVersionIdMarker"]}
        if any(v.get("IsLatest") and "Size" in v for v in found):
            return []
        return found

    def _get(self, key: str) -> bytes:
        if self.s3 is None:
            return super()._get(key)
        bucket, _, name = self.path(key).partition("/")
        try:
            return self.s3.get_object(Bucket=bucket, Key=name)["Body"].read()
        except Exception as exc:
            if _client_error_code(exc) in ("NoSuchKey", "NoSuchBucket", "404"):
                raise FileNotFoundError(key) from None
            raise

    def _get_range(self, key: str, start: int, end: int) -> bytes:
        if self.s3 is None:
            return super()._get_range(key, start, end)
        bucket, _, name = self.path(key).partition("/")
        try:
            return self.s3.get_object(Bucket=bucket, Key=name, Range=f"bytes={start}-{end - 1}")["Body"].read()
        except Exception as exc:
            code = _client_error_code(exc)
            if code in ("NoSuchKey", "NoSuchBucket", "404"):
                raise FileNotFoundError(key) from None
            raise

    def list_units(self) -> list[str]:
        if self.s3 is None:
            return super().list_units()
        bucket, _, prefix = self.path("data").partition("/")
        request = {"Bucket": bucket, "Prefix": prefix + "/", "Delimiter": "/"}
        slices: set[str] = set()
        try:
            for page in self._pages("data/", request):
                slices.update(p["Prefix"][len(request["Prefix"]):].strip("/") for p in page.get("CommonPrefixes", []))
        except FileNotFoundError:
            pass
        return sorted(f"data/{name}/" for name in slices if name) + [""]

    def _info(self, key: str) -> dict[str, Any]:
        if self.s3 is None:
            return super()._info(key)
        bucket, _, name = self.path(key).partition("/")
        try:
            head = self._head(bucket, name)
        except Exception as exc:
            if _client_error_code(exc) in ("NoSuchKey", "NoSuchBucket", "404", "NotFound"):
                raise FileNotFoundError(key) from None
            raise
        return {"name": f"{bucket}/{name}", "size": head.get("ContentLength"), "type": "file",
                "LastModified": head.get("LastModified")}

    def _head(self, bucket: str, name: str) -> dict[str, Any]:
        """One object's HEAD: signed and sent by this module's lighter path (``s3_head``) when it can be built for
        the bucket, else (and once it handed a request over: a redirect, a refusal) by the client's call."""
        if bucket not in self._signed_heads:
            self._signed_heads[bucket] = signed_head(self.s3, bucket)
        head = self._signed_heads[bucket]  # read once: another thread may hand the bucket over meanwhile
        if head is not None:
            try:
                return head(name)
            except HandOver:
                self._signed_heads[bucket] = None
        return self.s3.head_object(Bucket=bucket, Key=name)

    def _write(self, key: str, path: str, data: bytes) -> None:
        if self.s3 is None:
            super()._write(key, path, data)
            return
        bucket, _, name = path.partition("/")
        self._call(f"writing {key}", lambda: self.s3.put_object(Bucket=bucket, Key=name, Body=data))

    def _metadata_listing(self) -> list[dict[str, Any]]:
        if self.s3 is None:
            return super()._metadata_listing()
        return self._listed("_lakefs", recursive=False)

    def _unit_pages(self, unit: str) -> Iterator[list[dict[str, Any]]]:
        """ListObjectsV2 a page at a time (each request under the throttle; the plain client's when there is one,
        else s3fs's), each page's objects as fsspec describes files: everything under ``data/<slice>/``, or the
        objects directly in the root for ``""``."""
        bucket, _, prefix = (f"{self.root}/{check_key(unit)}" if unit else self.root).partition("/")
        prefix = prefix.rstrip("/") + "/" if prefix else ""
        request = {"Bucket": bucket, "Prefix": prefix, "MaxKeys": self.page_size, **({"Delimiter": "/"} if not unit
                                                                                    else {})}
        for page in self._pages(unit or "the root", request):
            yield [{"name": f"{bucket}/{entry['Key']}", "size": entry.get("Size"), "type": "file",
                    "LastModified": entry.get("LastModified")}
                   for entry in page.get("Contents", []) if entry["Key"] != prefix and not entry["Key"].endswith("/")]

    def _pages(self, what: str, request: dict[str, Any]) -> Iterator[dict]:
        """The ListObjectsV2 pages of ``request``, each asked for under the throttle, following the continuation
        token (a page that says more follows without one fails the listing)."""
        request = dict(request)
        while True:
            page = self._call(f"listing {what}", lambda r=dict(request): self._list_page(r))
            yield page
            if not page.get("IsTruncated"):
                return
            if not page.get("NextContinuationToken"):
                raise StorageError(f"listing {what} on {self.config.namespace}: a page said more follows and gave no "
                                   "continuation token")
            request["ContinuationToken"] = page["NextContinuationToken"]

    def _list_page(self, request: dict[str, Any]) -> dict:
        try:
            return self._s3_call("list_objects_v2", **request)
        except Exception as exc:
            if _client_error_code(exc) == "NoSuchBucket" or isinstance(exc, FileNotFoundError):
                raise FileNotFoundError(request["Bucket"]) from None
            raise

    def _listed(self, folder: str, *, recursive: bool) -> list[dict[str, Any]]:
        """The objects under ``folder`` (a folder of the namespace, "" for its root; only those directly in it
        unless ``recursive``) as fsspec describes files: name (bucket/key), size, LastModified."""
        bucket, _, prefix = (f"{self.root}/{check_key(folder)}" if folder else self.root).partition("/")
        prefix = prefix.rstrip("/") + "/" if prefix else ""
        pages = self.s3.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=prefix, **({} if recursive else {"Delimiter": "/"}))
        try:
            return [{"name": f"{bucket}/{entry['Key']}", "size": entry.get("Size"), "type": "file",
                     "LastModified": entry.get("LastModified")}
                    for page in pages for entry in page.get("Contents", [])
                    if entry["Key"] != prefix and not entry["Key"].endswith("/")]
        except Exception as exc:
            if _client_error_code(exc) == "NoSuchBucket":
                raise FileNotFoundError(folder) from None
            raise

    def _batch_request(self, keys: list[str]) -> tuple[int, list[str], list[str]]:
        bucket, _, _ = self.root.partition("/")
        names = self._names(keys)
        out = self._s3_call("delete_objects", Bucket=bucket,
                            Delete={"Objects": [{"Key": n} for n in names], "Quiet": True})
        errors = out.get("Errors", [])
        again = [names[e["Key"]] for e in errors if any(w in str(e.get("Code")) for w in THROTTLING)]
        failed = [f"{names.get(e['Key'], e['Key'])}: {e.get('Code')} {e.get('Message', '')}" for e in errors
                  if e.get("Code") != "NoSuchKey" and names.get(e["Key"]) not in again]
        return len(keys) - len(again) - len(failed), again, failed


def _client_error_code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    return str(response.get("Error", {}).get("Code", "")) if isinstance(response, dict) else ""
