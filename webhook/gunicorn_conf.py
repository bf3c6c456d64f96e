"""gunicorn hooks for Prometheus multi-process mode (PROMETHEUS_MULTIPROC_DIR is set by `lakefs-janitor serve`)."""

import os
import shutil


def on_starting(server):
    # Stale files from a previous run would be summed into the new totals.
    path = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if path:
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path, exist_ok=True)


def child_exit(server, worker):
    from prometheus_client import multiprocess  # noqa: PLC0415

    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.mark_process_dead(worker.pid)


# The `?secret=` form of the shared secret never reaches a log line.
logger_class = "webhook.redact.RedactingLogger"
