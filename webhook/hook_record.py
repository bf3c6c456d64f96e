"""What one lakeFS hook event changes in Redis, in one atomic call and one round trip.

The receiver's only Redis call. Each store keeps its keys and Lua (the idle clock: the branch's record, the
repository's summary; GC: the repository's commit count for the event-driven trigger) and hands out a step; the
clock's ``record`` runs them together. Duplicated and reordered deliveries stay harmless: clock times only move
forward and ignore what a deletion already ended, and the commit count is a set of commit ids.
"""

from __future__ import annotations

from typing import Literal

from spark_jobs.engine.runtime.redis_ack import Acknowledged
from workers.gc.history import GCRuns
from workers.idle_clock.events import LakeFSEvent, clock_update
from workers.idle_clock.store import ClockStore

Outcome = Literal["recorded", "stale", "ignored"]

# Event-driven cleaning counts the commits and merges since a repository's last GC run (docs/gc.md, "Event-driven
# cleaning"); imports arrive as post-commit.
GC_COUNTED_EVENTS = frozenset({"post-commit", "post-merge"})


def record(event: LakeFSEvent, *, clock: ClockStore, runs: GCRuns, durability: Acknowledged | None = None) -> Outcome:
    """Apply an event: "recorded" when the clock moved, "stale" when the event was older than what the clock knows
    (a commit is still counted for GC), "ignored" for events that change nothing (pre-hooks, tags). ``clock`` and
    ``runs`` must use the same Redis: the call goes through the clock's client. With ``durability`` (the
    receiver's), it returns only once that many replicas acknowledged the write, and raises a ``redis.RedisError``
    (a 503) when that could not be confirmed within its budget. An attempt that timed out may still have run, so a
    hook retried this way can come back "stale": its own first attempt got there."""
    update = clock_update(event)
    if update is None:
        return "ignored"
    change = clock.change(update.kind, update.repository_id, update.branch_id, at=update.at, source="webhook",
                          head=update.head)
    also = (runs.commit_step(event.repository_id, event.commit_id),) \
        if event.event_type in GC_COUNTED_EVENTS and event.commit_id else ()
    changed = clock.record(change, *also, durability=durability)
    return "recorded" if changed else "stale"
