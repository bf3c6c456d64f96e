"""Integration tests on the session's real services (tests/conftest.py): clients, a repository per test, the CLI,
and the helpers tests import."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator

import lakefs_sdk
import pytest
import redis
from click.testing import CliRunner, Result

from tests.services import RedisServer
from workers.idle_clock.store import ClockStore
from workers.shared.lakefs.client import LakeFS


@pytest.fixture
def redis_client(redis_server: RedisServer) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_server.url)
    yield client
    client.close()


@pytest.fixture
def clock(redis_client: redis.Redis) -> ClockStore:
    return ClockStore(redis_client, "lakefs-janitor")


@pytest.fixture
def repo(lakefs: LakeFS) -> Iterator[str]:
    """A fresh repository (local blockstore) for one test, deleted afterwards."""
    name = f"t-{uuid.uuid4().hex[:12]}"
    lakefs.call("create repository", lakefs.repositories.create_repository,
                lakefs_sdk.RepositoryCreation(name=name, storage_namespace=f"local://{name}", default_branch="main"))
    yield name
    lakefs.call("delete repository", lakefs.repositories.delete_repository, name, force=True)


@pytest.fixture
def cli(env: dict[str, str]) -> Callable[..., Result]:
    """Run `lakefs-janitor ARGS...` in-process with the test services' settings; fails the test on exit != 0
    unless expect_exit is given."""
    from workers.cli import main  # noqa: PLC0415

    def run(*args: str, expect_exit: int = 0) -> Result:
        result = CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)
        assert result.exit_code == expect_exit, f"exit {result.exit_code}: {result.output}"
        return result

    return run


def eventually(check: Callable[[], object], timeout: float = 20.0, interval: float = 0.2) -> object:
    """Poll until check() returns something truthy (post-hooks run asynchronously in lakeFS)."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s; last value: {last!r}")


def upload(lakefs: LakeFS, repo: str, branch: str, path: str, data: bytes = b"x") -> None:
    lakefs.upload(repo, branch, path, data=data)


def commit(lakefs: LakeFS, repo: str, branch: str, message: str = "c", date: int | None = None):
    return lakefs.call("commit", lakefs.commits.commit, repo, branch,
                       lakefs_sdk.CommitCreation(message=message, var_date=date))


def create_branch(lakefs: LakeFS, repo: str, name: str, source: str = "main") -> None:
    lakefs.call("create branch", lakefs.branches.create_branch, repo,
                lakefs_sdk.BranchCreation(name=name, source=source))

