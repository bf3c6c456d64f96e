"""The full listing: every slice of the namespace (``Namespace.list_units``: one unit of work per ``data/<slice>/``
and the legacy root) listed by the runner, as Python objects. (The dataset plan lists the same slices into its
backend's datasets instead: ``listing/arrow.py``, ``listing/spark.py``.)"""

from __future__ import annotations

from spark_jobs.core.plan import StoredObject
from spark_jobs.engine.runtime.context import JobConfig, OpenContext
from spark_jobs.engine.runtime.parallel import Runner


def unit_list(ctx: OpenContext, unit: str) -> list[StoredObject]:
    """One slice of the namespace's listing (on executors or threads)."""
    return ctx.ns.list_unit(unit)


def list_namespace(runner: Runner, config: JobConfig, ctx: OpenContext, *,
                   partitions: int) -> tuple[list[StoredObject], dict]:
    """Every object of the namespace, and the listing's record (``Summary.listing``)."""
    units = ctx.ns.list_units()
    listed = runner.map_units(units, unit_list, config.open, partitions=partitions)
    return listed, {"kind": "full", "slices": len(units) - 1, "objects": len(listed)}  # slices + the root
