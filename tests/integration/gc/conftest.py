"""GC fixtures: the one engine on the session lakeFS (local blockstore), on threads; the namespace as it sees it."""

from __future__ import annotations

import pytest

from spark_jobs.engine.storage import Namespace, StorageConfig
from tests.gc_engine import Collector


@pytest.fixture
def local_root(lakefs_server) -> str:
    return str(lakefs_server.dir / "block")


@pytest.fixture
def gc(lakefs_server) -> Collector:
    return Collector(lakefs_server.endpoint)


@pytest.fixture
def namespace(repo, local_root) -> Namespace:
    return Namespace(StorageConfig(f"local://{repo}", local_root))
