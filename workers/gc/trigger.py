"""Event-driven cleaning, like Hudi's ``hoodie.clean.max.commits``: which repositories are due for a GC because
enough commits and merges happened since their last run (pure)."""

from __future__ import annotations

from collections.abc import Mapping


def due(commits_since_run: Mapping[str, int], threshold: int) -> list[str]:
    """Repositories with at least ``threshold`` commits since their last run; none when the trigger is off (0)."""
    if threshold <= 0:
        return []
    return sorted(repo for repo, count in commits_since_run.items() if count >= threshold)
