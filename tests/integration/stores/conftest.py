"""Each object store (lakeFS's local store, versitygw, Azurite, fake-gcs-server) and a lakeFS on it, started at
most once per session, on first use: ``store_of("s3")``, ``lakefs_of("s3")``."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.services import ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY, STORES, LakeFSServer, Store
from workers.shared.lakefs.client import LakeFS, make_lakefs_for


@pytest.fixture(scope="session")
def store_of() -> Iterator[Callable[[str], Store]]:
    started: dict[str, Store] = {}

    def get(kind: str) -> Store:
        if kind not in started:
            started[kind] = STORES[kind]().start()
        return started[kind]

    yield get
    for store in started.values():
        store.cleanup()


@pytest.fixture(scope="session")
def lakefs_of(store_of: Callable[[str], Store]) -> Iterator[Callable[[str], LakeFS]]:
    started: dict[str, tuple[LakeFSServer, LakeFS]] = {}

    def get(kind: str) -> LakeFS:
        if kind not in started:
            server = LakeFSServer(store=store_of(kind)).start()
            started[kind] = server, make_lakefs_for(server.endpoint, ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY)
        return started[kind][1]

    yield get
    for server, client in started.values():
        client.close()
        server.cleanup()
