"""GCS: ``gs://bucket/prefix`` through gcsfs, deleted with JSON API batches (100 objects)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

from spark_jobs.core.freeing import Verdict, gcs_verdict, unreadable
from spark_jobs.engine.stores.base import DeleteResult, Location, check_key
from spark_jobs.engine.stores.faults import THROTTLING_STATUS, error_text
from spark_jobs.engine.stores.namespace import Namespace


class GCSNamespace(Namespace):
    store = "gcs"
    protocol = "gcs"
    batch = 100
    package = "gcsfs"

    @classmethod
    def fsspec_options(cls, location: Location, options: dict[str, Any]) -> dict[str, Any]:
        # gcsfs otherwise first probes a gRPC API for the bucket type, which stalls 60 s against emulators
        os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
        return options

    @classmethod
    def filesystem_class(cls, location: Location):
        # gcsfs with one attempt per request: the throttle retries
        from spark_jobs.engine.stores.gcs_client import GCSFileSystem  # noqa: PLC0415 - imports gcsfs

        return GCSFileSystem

    def _json(self, method: str, path: str, *args: str, **params: Any) -> dict:
        from fsspec.asyn import sync  # noqa: PLC0415

        return sync(self.fs.loop, self.fs._call, method, path, *args, json_out=method == "GET",  # noqa: SLF001
                    **params) or {}

    def _unit_pages(self, unit: str) -> Iterator[list[dict[str, Any]]]:
        """The JSON API's object listing a page at a time (each request under the throttle), each object as gcsfs
        describes it; the root unit through fsspec, as by default."""
        if not unit:
            yield from super()._unit_pages(unit)
            return
        bucket, _, name = self.path(unit.rstrip("/")).partition("/")
        token: dict[str, str] = {}
        while True:
            page = self._call(f"listing {unit}", lambda t=token: self._json(
                "GET", "b/{}/o", bucket, prefix=f"{name}/", maxResults=self.page_size, **t))
            yield [self.fs._process_object(bucket, item) for item in page.get("items", [])]  # noqa: SLF001
            if not page.get("nextPageToken"):
                return
            token = {"pageToken": page["nextPageToken"]}

    def freeing(self) -> Verdict:
        bucket, _, prefix = self.root.partition("/")
        try:
            meta = self._json("GET", "b/{}", bucket)
        except Exception as exc:  # noqa: BLE001 - denied: said, not raised
            return unreadable("gcs", f"settings of bucket {bucket}", permission="storage.buckets.get",
                              error=error_text(exc))
        return gcs_verdict(bool((meta.get("versioning") or {}).get("enabled")),
                           float((meta.get("softDeletePolicy") or {}).get("retentionDurationSeconds") or 0),
                           (meta.get("lifecycle") or {}).get("rule") or [], prefix=prefix)

    def purge_noncurrent(self, keys: list[str]) -> DeleteResult:
        bucket, _, _ = self.root.partition("/")
        result = DeleteResult()
        for found in self._each(self._generations, [check_key(k) for k in keys]):
            for item in found:
                try:
                    self._call(f"removing generation {item['generation']} of {item['name']}", lambda i=item: self._json(
                        "DELETE", "b/{}/o/{}", bucket, i["name"], generation=i["generation"]))
                except Exception as exc:  # noqa: BLE001 - reported with its object, the rest goes on
                    result.failed.append(f"{item['name']} generation {item['generation']}: {exc}")
                    continue
                result.deleted += 1
                result.freed_bytes += int(item.get("size") or 0)
                result.requests += 1
        return result

    def _generations(self, key: str) -> list[dict]:
        """The noncurrent generations of exactly ``key``; none when it has a live one (written again since)."""
        bucket, _, name = self.path(key).partition("/")
        found, token = [], {}
        while True:
            page = self._call(f"listing the generations of {key}", lambda t=token: self._json(
                "GET", "b/{}/o", bucket, prefix=name, versions="true", **t))
            found += [i for i in page.get("items", []) if i.get("name") == name]
            if not page.get("nextPageToken"):
                break
            token = {"pageToken": page["nextPageToken"]}
        return [] if any(not i.get("timeDeleted") for i in found) else found

    def _batch_request(self, keys: list[str]) -> tuple[int, list[str], list[str]]:
        """One JSON batch request. Not gcsfs's own batch: its parts end without the blank line that closes an
        HTTP message, which GCS forgives and strict servers (fake-gcs-server) refuse; nor fs.rm, which lists."""
        from urllib.parse import quote  # noqa: PLC0415

        from fsspec.asyn import sync  # noqa: PLC0415

        bucket, _, _ = self.root.partition("/")
        boundary = f"lakefs-janitor-{os.urandom(8).hex()}"
        parts = [f"--{boundary}\r\nContent-Type: application/http\r\nContent-ID: <{i}>\r\n\r\n"
                 f"DELETE /storage/v1/b/{quote(bucket, safe='')}/o/{quote(self.path(key).partition('/')[2], safe='')}"
                 " HTTP/1.1\r\nContent-Length: 0\r\n\r\n" for i, key in enumerate(keys)]
        headers, content = sync(self.fs.loop, self.fs._call, "POST", self.fs.batch_url_base,  # noqa: SLF001
                                headers={"Content-Type": f'multipart/mixed; boundary="{boundary}"'},
                                data="\r\n".join(parts) + f"\r\n--{boundary}--\r\n")
        answer = content.decode(errors="replace")
        statuses: dict[int, int] = {}
        for part in re.split(r"content-id:\s*<response-", answer, flags=re.IGNORECASE)[1:]:
            index, _, rest = part.partition(">")
            found = re.search(r"HTTP/[0-9.]+ (\d{3})", rest)
            if index.isdigit() and found:
                statuses[int(index)] = int(found.group(1))
        again, failed = [], []
        for i, key in enumerate(keys):
            status = statuses.get(i)
            if status in THROTTLING_STATUS:
                again.append(key)
            elif status not in (200, 204, 404):
                failed.append(f"{key}: HTTP {status}" if status else f"{key}: no answer in the batch response")
        return len(keys) - len(again) - len(failed), again, failed
