"""Prometheus metrics, created against a registry that the caller passes in.

In multi-process mode (``PROMETHEUS_MULTIPROC_DIR`` set, as under gunicorn or Celery prefork) values live in
files and are collected per scrape, so the metrics are built with ``registry=None`` there.
"""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, multiprocess

NS = "lakefs_janitor"
RUN_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None):
        r = registry
        self.webhook_events = Counter(
            "webhook_events", "lakeFS hook payloads received", ["event_type", "outcome"], namespace=NS, registry=r
        )
        self.reconcile_writes = Counter(
            "reconcile_writes", "Writes the reconciler detected (no hook had reported them)",
            ["repository", "kind"], namespace=NS, registry=r,
        )
        self.reconcile_seconds = Histogram("reconcile_run_seconds", "Reconciler run time for one repository",
                                           namespace=NS, registry=r, buckets=RUN_BUCKETS)
        self.branches_deleted = Counter(
            "branches_deleted", "Branches deleted by lifecycle policies", ["repository", "policy"],
            namespace=NS, registry=r,
        )
        self.deletions_vetoed = Counter(
            "branch_deletions_vetoed", "Deletions refused by a pre-delete-branch hook", ["repository", "policy"],
            namespace=NS, registry=r,
        )
        self.lifecycle_outcomes = Counter(
            "lifecycle_outcomes", "What a lifecycle run did with each branch a policy selected",
            ["repository", "result"], namespace=NS, registry=r,
        )
        self.branches_skipped = Counter(
            "branches_skipped", "Branches a lifecycle run left alone, by reason", ["repository", "reason"],
            namespace=NS, registry=r,
        )
        self.lifecycle_seconds = Histogram(
            "lifecycle_run_seconds", "Lifecycle run time for one repository", namespace=NS, registry=r,
            buckets=RUN_BUCKETS,
        )
        self.pending_deletion = Gauge(
            "branches_pending_deletion", "Branches due for deletion now or within the warning window that still exist after the last run",
            ["repository"], namespace=NS, registry=r, multiprocess_mode="mostrecent",
        )
        self.lifecycle_last_success = Gauge(
            "lifecycle_last_success_timestamp_seconds", "End of the last successful lifecycle run",
            ["repository"], namespace=NS, registry=r, multiprocess_mode="max",
        )
        # Object lifecycle
        self.object_lifecycle_objects_expired = Counter(
            "object_lifecycle_objects_expired", "Objects object lifecycle rules removed from branches (committed)",
            ["repository", "rule"], namespace=NS, registry=r)
        self.object_lifecycle_bytes_expired = Counter(
            "object_lifecycle_bytes_expired", "Bytes of the objects object lifecycle rules removed from branches; "
            "the GC frees them once no retained commit reaches them", ["repository", "rule"], namespace=NS, registry=r)
        self.object_lifecycle_branch_runs = Counter(
            "object_lifecycle_branch_runs", "What object lifecycle runs did with each branch a rule selects, by result "
            "(expired, nothing-due, skipped, vetoed, failed, not-attempted)", ["repository", "result"],
            namespace=NS, registry=r)
        self.object_lifecycle_consecutive_failures = Gauge(
            "object_lifecycle_consecutive_failures", "Object lifecycle runs in a row that failed on a branch (0 after "
            "one that did not)", ["repository", "branch"], namespace=NS, registry=r, multiprocess_mode="mostrecent")
        self.object_lifecycle_seconds = Histogram(
            "object_lifecycle_run_seconds", "Object lifecycle run time for one repository", namespace=NS, registry=r,
            buckets=RUN_BUCKETS)
        self.object_lifecycle_last_success = Gauge(
            "object_lifecycle_last_success_timestamp_seconds", "End of the last successful object lifecycle run",
            ["repository"], namespace=NS, registry=r, multiprocess_mode="max")
        # Committed garbage collection
        self.gc_objects_deleted = Counter("gc_objects_deleted", "Objects the GC deleted from storage",
                                          ["repository"], namespace=NS, registry=r)
        self.gc_bytes_deleted = Counter("gc_bytes_deleted", "Bytes the GC deleted from storage", ["repository"],
                                        namespace=NS, registry=r)
        self.gc_bytes_freed = Counter("gc_bytes_freed", "Bytes the GC deleted that the store freed at once (or "
                                      "that the purge of noncurrent versions freed)", ["repository"], namespace=NS,
                                      registry=r)
        self.gc_bytes_pending = Counter("gc_bytes_pending", "Bytes the GC deleted that the store still bills: "
                                        "noncurrent versions or soft-deleted blobs, until a rule or retention "
                                        "removes them (never, without one: see `gc doctor`)", ["repository"],
                                        namespace=NS, registry=r)
        self.gc_objects_kept = Gauge("gc_objects_kept", "Namespace objects the last GC mark kept (reachable)",
                                     ["repository"], namespace=NS, registry=r, multiprocess_mode="mostrecent")
        self.gc_objects_too_new = Counter("gc_objects_too_new", "Unreachable objects spared by the safety cutoff",
                                          ["repository"], namespace=NS, registry=r)
        self.gc_phase_seconds = Histogram("gc_phase_seconds", "GC time by phase (commits, mark, plan, sweep)",
                                          ["phase"], namespace=NS, registry=r, buckets=RUN_BUCKETS)
        self.gc_last_success = Gauge("gc_last_success_timestamp_seconds", "End of the last successful GC run",
                                     ["repository"], namespace=NS, registry=r, multiprocess_mode="max")
        self.gc_triggers = Counter("gc_triggers", "GC runs started by commit count (event-driven cleaning)",
                                   ["repository"], namespace=NS, registry=r)
        self.gc_trigger_skips = Counter("gc_trigger_skips", "Due repositories not started, by reason",
                                        ["repository", "reason"], namespace=NS, registry=r)
        self.gc_storage_backoffs = Counter("gc_storage_backoffs", "Times a store throttled the GC's sweep (SlowDown, "
                                           "503, ServerBusy) and its request rate backed off", ["repository"],
                                           namespace=NS, registry=r)
        self.gc_runs_by_listing = Counter("gc_runs_by_listing", "GC marks by how they found the namespace's objects: "
                                          "full (listed), incremental (what changed), inventory",
                                          ["repository", "kind"], namespace=NS, registry=r)
        self.gc_missed_by_incremental = Gauge(
            "gc_missed_by_incremental_objects", "Of what the last full run deleted, objects an incremental run would "
            "not have found (a skewed clock, a late write): the proof the incremental rule holds, 0",
            ["repository"], namespace=NS, registry=r, multiprocess_mode="mostrecent")
        self.gc_failures = Counter("gc_failures", "GC runs that failed, by reason", ["repository", "reason"],
                                   namespace=NS, registry=r)


def multiprocess_enabled() -> bool:
    return bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))


def exposition(registry: CollectorRegistry | None) -> bytes:
    """The text to serve on /metrics: the given registry, or all processes' files in multi-process mode."""
    if registry is None:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    return generate_latest(registry)
