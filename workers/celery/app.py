"""Celery app factory: broker and backend on Redis, UTC beat schedule from settings."""

from __future__ import annotations

import os
import shutil

from celery import Celery

from workers.branch_lifecycle import schedule as branch_lifecycle_schedule
from workers.celery.transport import use_ours
from workers.gc import schedule as gc_schedule
from workers.idle_clock import schedule as idle_clock_schedule
from workers.object_lifecycle import schedule as object_lifecycle_schedule
from workers.shared.redis_clients import celery_options
from workers.shared.services import Services
from workers.shared.settings import Settings

# Each domain declares its beat entries and tasks beside each other; the app merges them.
DOMAINS = (idle_clock_schedule, branch_lifecycle_schedule, gc_schedule, object_lifecycle_schedule)
TASK_MODULES = ("workers.idle_clock.tasks", "workers.branch_lifecycle.tasks", "workers.gc.tasks",
                "workers.object_lifecycle.tasks")


def beat_schedule(settings: Settings) -> dict[str, dict]:
    merged: dict[str, dict] = {}
    for domain in DOMAINS:
        entries = domain.beat_schedule(settings)
        if clash := merged.keys() & entries.keys():
            raise ValueError(f"beat entries declared twice: {sorted(clash)}")
        merged.update(entries)
    return merged


def create_celery(settings: Settings, services: Services | None = None) -> Celery:
    use_ours()  # the Redis and Sentinel broker transports with kombu's clean-up defect removed
    app = Celery("lakefs_janitor", set_as_current=False)
    app.conf.update(
        **celery_options(settings),
        timezone="UTC",
        enable_utc=True,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        # Soft shutdown (Celery 5.5+): a worker told to stop lets running tasks finish for a while, then requeues
        # what is left (ETA tasks included, even when idle) so the broker holds them, not the dying process.
        worker_soft_shutdown_timeout=60.0,
        worker_enable_soft_shutdown_on_idle=True,
        result_expires=24 * 3600,
        beat_schedule=beat_schedule(settings),
        imports=TASK_MODULES,
    )
    app.janitor = services or Services(settings)  # type: ignore[attr-defined]
    if settings.worker_metrics_port:
        _serve_metrics_from_worker(settings.worker_metrics_addr, settings.worker_metrics_port)
    return app


def _serve_metrics_from_worker(addr: str, port: int) -> None:
    """Expose /metrics from the worker's main process once it starts (prefork children write to
    PROMETHEUS_MULTIPROC_DIR files that the collector reads per scrape)."""
    from celery.signals import worker_init, worker_process_shutdown  # noqa: PLC0415
    from prometheus_client import REGISTRY, CollectorRegistry, multiprocess, start_http_server  # noqa: PLC0415

    from workers.shared.metrics import multiprocess_enabled  # noqa: PLC0415

    @worker_init.connect(weak=False)
    def _start(**_: object) -> None:
        registry = REGISTRY
        if multiprocess_enabled():
            # Before the pool forks: files left by a previous run would be summed into the new totals.
            path = os.environ["PROMETHEUS_MULTIPROC_DIR"]
            shutil.rmtree(path, ignore_errors=True)
            os.makedirs(path, exist_ok=True)
            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)
        start_http_server(port, addr=addr, registry=registry)

    @worker_process_shutdown.connect(weak=False)
    def _dead(pid: int | None = None, **_: object) -> None:
        if multiprocess_enabled() and pid:
            multiprocess.mark_process_dead(pid)
