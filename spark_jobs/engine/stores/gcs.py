"""GCS: ``gs://bucket/prefix`` through gcsfs, deleted with JSON API batches (100 objects)."""

from __future__ import annotations

import os
import re
from typing import Any

from spark_jobs.engine.stores.base import THROTTLING_STATUS, Location, Namespace


class GCSNamespace(Namespace):
    store = "gcs"
    batch = 100
    package = "gcsfs"

    @classmethod
    def where(cls, rest: str, local_root: str | None) -> Location:
        return Location("gcs", "gcs", rest.strip("/"))

    @classmethod
    def fsspec_options(cls, location: Location, options: dict[str, Any]) -> dict[str, Any]:
        # gcsfs otherwise first probes a gRPC API for the bucket type, which stalls 60 s against emulators
        os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
        return options

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
