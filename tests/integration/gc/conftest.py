"""GC fixtures: the session lakeFS's local blockstore as a namespace the janitor can read and sweep."""

from __future__ import annotations

import pytest

from workers.gc.storage import open_namespace


@pytest.fixture
def local_root(lakefs_server) -> str:
    return str(lakefs_server.dir / "block")


@pytest.fixture
def namespace(repo, local_root):
    return open_namespace(f"local://{repo}", local_root=local_root)
