"""What a cleaning-policy document would change before it is stored (``gc policy set --dry-run`` and the policy
API's ``?dry_run=true``), and a past run by prefix (``gc show RUN_ID --by-prefix``); both change nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from spark_jobs.core.cleaning import CleaningPolicy
from spark_jobs.engine.plan.preview import Effect, policy_effect, run_breakdown
from spark_jobs.engine.runtime.lakefs_api import LakeFSApiConfig
from spark_jobs.engine.runtime.parallel import ThreadRunner
from workers.gc.run import api_config, min_age_of, storage_config
from workers.shared.settings import GCSettings, LakeFSConnection

__all__ = ["policy_preview", "run_breakdown"]


def policy_preview(gc: GCSettings, connection: LakeFSConnection | LakeFSApiConfig, repository_id: str, *,
                   policies: list[CleaningPolicy], depth: int = 2, min_age: timedelta | None = None,
                   now: datetime | None = None) -> Effect:
    """In process, as of now: the stored policies' next run against ``policies``'s. ``connection`` may be a
    caller's own credentials (the HTTP API)."""
    api = connection if isinstance(connection, LakeFSApiConfig) else api_config(connection)
    return policy_effect(api, storage_config(gc), repository_id=repository_id, proposed=policies,
                         now=now or datetime.now(UTC), min_age=min_age_of(gc, min_age),
                         runner=ThreadRunner(gc.threads), depth=depth)


