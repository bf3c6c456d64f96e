"""The in-process dataset backend: pyarrow tables and compute on the thread runner's pool. Every kept key lives in
an Arrow column (tens of bytes per object, no Python object per key); the per-unit steps are ``plan/units.py``'s,
as on Spark.

``ArrowBackend`` is each step's Arrow half put together: ``reach/arrow.py`` (the keys the ranges and staged
entries point at), ``listing/arrow.py`` (the namespace's slices, listed when judged: never one table of the whole
namespace), ``plan/arrow.py`` (judged slice by slice, the plan written in parts), ``state/arrow.py`` (the next run's
kept index); here, the few set operations the logical plan (``plan/datasets.py``) asks of any dataset.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from spark_jobs.core import columns
from spark_jobs.core.key_set import KeySet
from spark_jobs.engine.listing.arrow import ArrowListing
from spark_jobs.engine.plan.arrow import ArrowPlan
from spark_jobs.engine.reach.arrow import ArrowReach
from spark_jobs.engine.runtime.context import JobConfig
from spark_jobs.engine.runtime.parallel import ThreadRunner
from spark_jobs.engine.state.arrow import ArrowState


class ArrowBackend(ArrowReach, ArrowListing, ArrowPlan, ArrowState):
    """A run's datasets as Arrow tables in this process."""

    name = "arrow"

    def keys_not_in(self, keys: pa.Table, other: pa.Table, *, most: int) -> set[str] | None:
        """The distinct keys of ``keys`` not in ``other`` (what only staged entries keep): ``keys`` probed against
        one set of ``other`` (every reached key, ``KeySet``: read in place, no copy of a key), only what is left made
        distinct. None when there are more than ``most``: not made into Python strings."""
        if not keys.num_rows:
            return set()
        left = keys["key"]
        if other.num_rows:
            left = left.filter(pc.invert(KeySet(other["key"]).holds(left)))
        few = pc.unique(left.combine_chunks()) if len(left) else pa.array([], pa.string())
        return None if len(few) > most else set(few.to_pylist())

    def from_keys(self, keys: list[str]) -> pa.Table:
        return pa.table({"key": pa.array(keys, pa.string())}, schema=columns.KEYS_SCHEMA)

    def union(self, datasets: list[pa.Table]) -> pa.Table:
        return pa.concat_tables([d.select(["key"]) for d in datasets])

    def count_distinct(self, keys: pa.Table) -> int:
        """How many distinct keys: counted by one ``KeySet`` of the column read in place (Arrow's count_distinct
        hashed a copy of every key: +190 MiB at 1M objects, the daily run's peak with cleaning policies)."""
        return len(KeySet(keys["key"])) if keys.num_rows else 0

    def key_set(self, keys: pa.Table) -> set[str]:
        return set(keys["key"].to_pylist())

    def release(self, *datasets: object) -> None:
        """Nothing to free in process: the tables go with their last reference."""


def open_backend(runner: ThreadRunner, config: JobConfig) -> ArrowBackend:
    return ArrowBackend(runner, config)
