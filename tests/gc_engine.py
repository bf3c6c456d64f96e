"""The one GC engine as tests drive it: against one real lakeFS (and the store it runs on), on a runner — threads
in this process, or Spark's executors (``runner_of("spark", request)``: the session's real local-mode SparkContext).
A test of both runners is parametrized over RUNNERS, whose Spark one is marked ``spark``."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from spark_jobs.core.report import Summary
from spark_jobs.engine.mark import Marked
from spark_jobs.engine.request import RunRequest
from spark_jobs.engine.run import run_marked
from spark_jobs.engine.runtime.lakefs_api import LakeFSApiConfig
from spark_jobs.engine.runtime.parallel import Runner, ThreadRunner
from spark_jobs.engine.runtime.range_cache import RangeCacheSettings
from spark_jobs.engine.stores import StorageConfig
from spark_jobs.engine.stores.base import MAX_IN_FLIGHT
from tests.services import ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY

RUNNERS = ("threads", pytest.param("spark", marks=pytest.mark.spark))


def runner_of(name: str, request: pytest.FixtureRequest) -> tuple[Runner, str]:
    """The runner named in RUNNERS and the name its runs record."""
    if name == "spark":
        from spark_jobs.jobs.gc import SparkRunner  # noqa: PLC0415

        return SparkRunner(request.getfixturevalue("spark_context")), "spark"
    return ThreadRunner(4), "threads"


@dataclass
class Collector:
    endpoint: str  # lakeFS
    options: dict[str, Any] = field(default_factory=dict)  # fsspec options per store
    runner: Runner = field(default_factory=lambda: ThreadRunner(4))
    runner_name: str = "threads"  # what its runs record: threads | spark
    local_root: str | None = None  # None: learnt from lakeFS, as in production
    max_in_flight: int = MAX_IN_FLIGHT
    cache: bool = True  # the mark cache; False: every range and metarange read (``gc run --no-cache``)
    range_cache: RangeCacheSettings | None = None  # copies of the ranges a daily run compares (None: none)

    @property
    def api(self) -> LakeFSApiConfig:
        return LakeFSApiConfig(f"{self.endpoint}/api/v1", ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY, read_timeout=60)

    @property
    def storage(self) -> StorageConfig:
        import json  # noqa: PLC0415

        return StorageConfig("", self.local_root, json.dumps(self.options), self.max_in_flight)

    def _go(self, repo: str, mode: str, **kw: Any) -> tuple[Summary, Marked | None]:
        request = RunRequest(repository_id=repo, mode=mode, runner=self.runner_name, range_partitions=4,
                             address_partitions=4, **{"cache": self.cache, "range_cache": self.range_cache, **kw})
        return run_marked(self.api, self.storage, request, runner=self.runner)

    def run(self, repo: str, *, min_age: timedelta | None = timedelta(0), dry_run: bool = False,
            now: datetime | None = None, max_deletions: int | None = None, listing: str = "auto",
            **kw: Any) -> tuple[Summary, Marked]:
        """``listing``: "auto" (incremental when the previous run's state allows) or "full"."""
        return self._go(repo, "dry-run" if dry_run else "full", min_age=min_age, now=now,
                        max_deletions=max_deletions, listing=listing, **kw)

    def mark(self, repo: str, *, now: datetime | None = None, min_age: timedelta | None = timedelta(0),
             dry_run: bool = False, by_path: bool = False, prefix_depth: int = 2, listing: str = "auto") -> Marked:
        _, marked = self._go(repo, "dry-run" if dry_run else "mark", now=now or datetime.now(UTC), min_age=min_age,
                             by_path=by_path, prefix_depth=prefix_depth, listing=listing)
        return marked

    def sweep(self, repo: str, run_id: str, *, max_deletions: int | None = None) -> Summary:
        return self._go(repo, "sweep", mark_id=run_id, max_deletions=max_deletions)[0]
