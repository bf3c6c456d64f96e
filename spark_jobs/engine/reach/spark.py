"""Reach on Spark: the keys the retained ranges' entries point at (and the staged entries'), read on executors
straight into Arrow batches, kept as a persisted DataFrame (``reach/arrow.py``: the same in process)."""

from __future__ import annotations

from collections.abc import Sequence

from spark_jobs.core import columns
from spark_jobs.engine.backends.spark_base import SparkSteps
from spark_jobs.engine.plan import units


class SparkReach(SparkSteps):
    def reach(self, range_ids: Sequence[str]):
        return self._keep(self._map(range_ids, units.range_keys, columns.KEYS_SCHEMA))

    def staged(self, files: Sequence[str]):
        # read once: the judge, the staged-only keys and their count read the persisted rows
        return self._keep(self._map(files, units.staged_keys, columns.KEYS_SCHEMA))
