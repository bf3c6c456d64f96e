"""The Spark dataset backend: DataFrames whose rows never reach the driver. Ranges, slices and staged files are read
on executors straight into Arrow batches (``mapInArrow`` over a DataFrame of unit names), the difference is an
anti-join on executors, the plan is written by executors (one Parquet part per range partition, in key order) and
what comes back to the driver is counters: one row per plan part, per prefix, per aggregate.

``SparkBackend`` is each step's Spark half put together: ``reach/spark.py``, ``listing/spark.py``,
``plan/spark.py``, ``state/spark.py``, over ``spark_base.py`` (the mapInArrow plumbing, executor errors read back);
here, the few set operations the logical plan (``plan/datasets.py``) asks of any dataset. pyspark is imported only
when a Spark runner asks for this backend.
"""

from __future__ import annotations

from spark_jobs.engine.backends.spark_base import executor_error, translated
from spark_jobs.engine.listing.spark import SparkListing
from spark_jobs.engine.plan.spark import SparkPlan
from spark_jobs.engine.reach.spark import SparkReach
from spark_jobs.engine.state.spark import SparkState

__all__ = ["SparkBackend", "executor_error"]


class SparkBackend(SparkReach, SparkListing, SparkPlan, SparkState):
    """A run's datasets as Spark DataFrames on executors."""

    name = "spark"

    @translated
    def keys_not_in(self, keys, other, *, most: int) -> set[str] | None:
        """The distinct keys of ``keys`` not in ``other``, an anti-join on executors of which at most ``most`` + 1
        rows come back (None: more than ``most``)."""
        if self._is_empty(keys):
            return set()
        rows = keys.select("key").distinct().join(other.select("key"), "key", "left_anti").limit(most + 1).collect()
        return None if len(rows) > most else {r["key"] for r in rows}

    def from_keys(self, keys: list[str]):
        if not keys:
            return self._empty("key string")
        return self.spark.createDataFrame([(k,) for k in keys], "key string")

    @translated
    def count_distinct(self, keys) -> int:
        return 0 if self._is_empty(keys) else keys.select("key").distinct().count()

    @translated
    def key_set(self, keys) -> set[str]:
        return {r["key"] for r in keys.select("key").toLocalIterator()}

    def release(self, *datasets: object) -> None:
        for frame in self._persisted:
            frame.unpersist()
        self._persisted.clear()
        self._known.clear()
