"""Azure Blob: ``https://<account>.blob.core.windows.net/<container>/<prefix>`` (ADLS Gen2's
``…dfs.core.windows.net/…`` names the same blobs) through adlfs, deleted with blob batches (256 blobs)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from spark_jobs.core.freeing import Verdict, azure_verdict, unreadable
from spark_jobs.engine.stores.base import Location
from spark_jobs.engine.stores.faults import THROTTLING_STATUS, error_text
from spark_jobs.engine.stores.namespace import Namespace

AZURE_HOST = re.compile(r"^(?P<account>[a-z0-9]{3,24})\.(?:blob|dfs)\.core\.windows\.net$")


class AzureNamespace(Namespace):
    store = "azure"
    protocol = "abfs"
    batch = 256
    package = "adlfs"

    @classmethod
    def where(cls, rest: str, local_root: str | None) -> Location | None:
        host, _, path = rest.partition("/")
        match = AZURE_HOST.match(host)
        if match and path.strip("/"):
            return Location(cls.store, cls.protocol, path.strip("/"), match.group("account"))
        return None  # another https:// host: not a store lakeFS supports

    @classmethod
    def fsspec_options(cls, location: Location, options: dict[str, Any]) -> dict[str, Any]:
        if location.account and not options.get("connection_string"):
            options.setdefault("account_name", location.account)
        return options

    @classmethod
    def filesystem_class(cls, location: Location):
        # adlfs with one attempt per request and the time-outs on every request: the throttle retries
        from spark_jobs.engine.stores.azure_client import AzureBlobFileSystem  # noqa: PLC0415 - imports adlfs

        return AzureBlobFileSystem

    def _unit_pages(self, unit: str) -> Iterator[list[dict[str, Any]]]:
        """The container's blob listing a page at a time (each request under the throttle), each blob as adlfs
        describes it (``_details``: folders of a hierarchical namespace are folders); the root unit through fsspec,
        as by default."""
        if not unit:
            yield from super()._unit_pages(unit)
            return
        from fsspec.asyn import sync  # noqa: PLC0415

        container, _, name = self.path(unit.rstrip("/")).partition("/")
        within, token = f"{container}/{name}/", None
        while True:
            infos, token = self._call(f"listing {unit}", lambda t=token: sync(self.fs.loop, self._page, container,
                                                                              f"{name}/", t))
            yield [i for i in infos if i.get("type") == "file" and i["name"].startswith(within)]
            if not token:
                return

    async def _page(self, container: str, prefix: str, token: str | None) -> tuple[list[dict[str, Any]], str | None]:
        """One page of the blobs whose names start with ``prefix`` (from ``token``), and the next page's token."""
        from azure.core.exceptions import ResourceNotFoundError  # noqa: PLC0415

        async with self.fs.service_client.get_container_client(container) as client:
            pages = client.list_blobs(include=["metadata"], name_starts_with=prefix,
                                      results_per_page=self.page_size).by_page(continuation_token=token)
            try:
                blobs = [blob async for blob in await pages.__anext__()]
            except StopAsyncIteration:
                return [], None
            except ResourceNotFoundError:
                raise FileNotFoundError(container) from None
            return await self.fs._details(blobs), pages.continuation_token  # noqa: SLF001

    def freeing(self) -> Verdict:
        from fsspec.asyn import sync  # noqa: PLC0415

        container, _, prefix = self.root.partition("/")
        try:
            properties = sync(self.fs.loop, self.fs.service_client.get_service_properties)
        except Exception as exc:  # noqa: BLE001 - denied: said, not raised
            return unreadable("azure", "account's blob service properties (soft delete)",
                              permission="Microsoft.Storage/storageAccounts/blobServices/read, or the account key",
                              error=error_text(exc))
        policy = properties.get("delete_retention_policy")
        days = int(policy.days or 0) if policy is not None and policy.enabled else 0
        return azure_verdict(days, None, container=container, prefix=prefix)

    def _batch_request(self, keys: list[str]) -> tuple[int, list[str], list[str]]:
        from fsspec.asyn import sync  # noqa: PLC0415

        container, _, _ = self.root.partition("/")
        names = self._names(keys)

        async def request() -> list[tuple[str, int]]:
            # one blob batch request (adlfs's own rm deletes blob by blob)
            async with self.fs.service_client.get_container_client(container) as client:
                responses = await client.delete_blobs(*names, raise_on_any_failure=False)
                statuses = [response.status_code async for response in responses]
            return list(zip(names, statuses, strict=True))

        answers = sync(self.fs.loop, request)
        again = [names[n] for n, status in answers if status in THROTTLING_STATUS]
        failed = [f"{names[n]}: HTTP {status}" for n, status in answers
                  if status not in (200, 202, 404) and status not in THROTTLING_STATUS]
        return len(keys) - len(again) - len(failed), again, failed
