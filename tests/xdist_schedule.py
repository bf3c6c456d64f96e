"""How `make test` spreads the suite over pytest-xdist's workers (scripts/run-tests.sh: ``-n 2 --dist loadscope``).

Each worker is a pytest session of its own: it starts the session's servers (tests/conftest.py) on first use, and a
module's servers (``scope="module"`` fixtures: a store and a lakeFS on it, the Sentinel cluster, ...) once for the
module. So work is handed out a whole module at a time (xdist's ``loadscope``), except that the modules on the
session's standalone Spark cluster go together to one worker, which then starts the cluster once.

The order: xdist hands out the modules with the most tests first, which leaves the slowest ones (a few long
randomized or Spark tests each) for the end, where one of them keeps a worker busy minutes after the other ran out
of work. Here the costliest unit goes first (longest-processing-time-first): a module's cost is its figure in COSTS
(seconds on the 2-core CI machine, from ``--durations``; only the order depends on it, never what runs), else its
number of tests times its folder's typical test.
"""

from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling

# The modules that use the session's standalone cluster (the ``spark_cluster`` fixture): one unit of work.
SPARK_CLUSTER = "tests/spark[standalone cluster]"
CLUSTER_MODULES = frozenset({"tests/spark/test_cluster.py", "tests/spark/test_gc_driver_bound.py",
                             "tests/spark/test_gc_engines.py", "tests/spark/test_gc_orphans.py"})

# Seconds a unit took (rounded; a busy 2-core machine). Update when a module becomes much slower or faster.
COSTS = {
    "tests/integration/gc/test_gc_incremental.py": 450,  # (2026-11-30: its eight Spark cases ≈ 700 s alone)
    SPARK_CLUSTER: 640,  # + the daily run of test_gc_driver_bound (≈ 60 s and a lakeFS of small ranges)
    "tests/integration/shared/test_redis_failover.py": 400,
    "tests/integration/gc/test_gc_under_faults.py": 400,
    "tests/bench/test_bench_quick.py": 380,
    "tests/spark/test_gc_spark_interfaces.py": 210,
    "tests/integration/stores/test_store_contract.py": 170,
    "tests/integration/shared/test_redis_connection_reset.py": 110,
    "tests/integration/gc/test_gc_freeing.py": 90,
    "tests/integration/gc/test_gc_stores.py": 85,
    "tests/integration/gc/test_gc_outages.py": 75,
    "tests/integration/gc/test_mark_cache.py": 70,
    "tests/integration/gc/test_gc_throttling.py": 50,
}
# Otherwise: seconds a test of the folder typically takes
PER_TEST = {"tests/spark/": 15.0, "tests/bench/": 35.0, "tests/integration/": 1.5, "tests/unit/": 0.1}


class CostOrderedScopes(LoadScopeScheduling):
    """xdist's loadscope, the Spark cluster's modules one unit, the costliest unit handed out first."""

    def _split_scope(self, nodeid: str) -> str:
        module = nodeid.split("::", 1)[0]
        return SPARK_CLUSTER if module in CLUSTER_MODULES else module

    def _cost(self, scope: str) -> float:
        if scope in COSTS:
            return COSTS[scope]
        per_test = next((v for k, v in PER_TEST.items() if scope.startswith(k)), 1.0)
        return per_test * len(self.workqueue[scope])

    def _assign_work_unit(self, node) -> None:
        costliest = max(self.workqueue, key=self._cost)
        self.workqueue.move_to_end(costliest, last=False)  # the base class takes the first unit
        super()._assign_work_unit(node)
