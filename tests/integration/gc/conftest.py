"""GC fixtures: the one engine on the session lakeFS (local blockstore), on threads or on Spark; the namespace as
it sees it."""

from __future__ import annotations

import pytest

from spark_jobs.engine.stores import Namespace, StorageConfig, open_namespace
from tests.gc_engine import RUNNERS, Collector, runner_of


@pytest.fixture
def local_root(lakefs_server) -> str:
    return str(lakefs_server.dir / "block")


@pytest.fixture
def gc(lakefs_server) -> Collector:
    return Collector(lakefs_server.endpoint)


@pytest.fixture
def namespace(repo, local_root) -> Namespace:
    return open_namespace(StorageConfig(f"local://{repo}", local_root))


@pytest.fixture(params=RUNNERS)
def any_runner_gc(request, lakefs_server) -> Collector:
    """The engine on each runner in turn."""
    runner, name = runner_of(request.param, request)
    return Collector(lakefs_server.endpoint, runner=runner, runner_name=name)
