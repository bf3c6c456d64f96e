"""What an object lifecycle run reports: per branch the outcome, per run the report (also the record kept in Redis
for `history` and `restore`), and the tally of what a branch's expiry removed, by rule and prefix."""

from __future__ import annotations

import secrets
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime

from workers.object_lifecycle.evaluation import Expiry, prefix_of


@dataclass
class BranchOutcome:
    branch_id: str
    # expired | would-expire | nothing-due | skipped | vetoed | failed | not-attempted
    result: str
    reason: str = ""  # for skipped/failed: protected | uncommitted-changes | permission | read-only | lakefs | ...
    detail: str = ""
    evaluated_commit: str | None = None
    commit_id: str | None = None  # the commit on the branch that removed the objects
    due: int = 0  # objects the rules expired at evaluation
    capped: int = 0  # of those, left for the next run by the cap
    objects: int = 0  # removed by the commit (or, in a dry run, that would be)
    bytes: int = 0
    kept_rewritten: int = 0  # due, but written again on the branch since evaluation: they stay
    failed_paths: int = 0  # lakeFS refused to delete these paths on the short-lived branch
    by_rule: dict[str, dict[str, int]] = field(default_factory=dict)
    by_prefix: list[dict] = field(default_factory=list)


@dataclass
class RunReport:
    run_id: str
    repository_id: str
    dry_run: bool
    now: datetime
    rules: list[str] = field(default_factory=list)
    branches: list[BranchOutcome] = field(default_factory=list)
    locked_out: bool = False
    aborted: str | None = None

    @property
    def succeeded(self) -> bool:
        return not self.locked_out and self.aborted is None and not any(b.result == "failed" for b in self.branches)

    def document(self) -> dict:
        return {"run_id": self.run_id, "repository_id": self.repository_id, "dry_run": self.dry_run,
                "now": self.now.isoformat(), "rules": self.rules, "locked_out": self.locked_out,
                "aborted": self.aborted, "succeeded": self.succeeded,
                "objects": sum(b.objects for b in self.branches), "bytes": sum(b.bytes for b in self.branches),
                "branches": [asdict(b) for b in self.branches]}


def new_run_id(now: datetime) -> str:
    return f"{now.astimezone(UTC):%Y%m%dt%H%M%S}-{secrets.token_hex(3)}"


def tally(outcome: BranchOutcome, expiries: list[Expiry], depth: int) -> None:
    by_prefix: dict[tuple[str, str], dict[str, int]] = {}
    for e in expiries:
        outcome.objects += 1
        outcome.bytes += e.size
        for rule_id in e.rule_ids:
            t = outcome.by_rule.setdefault(rule_id, {"objects": 0, "bytes": 0})
            t["objects"] += 1
            t["bytes"] += e.size
            p = by_prefix.setdefault((rule_id, prefix_of(e.path, depth)), {"objects": 0, "bytes": 0})
            p["objects"] += 1
            p["bytes"] += e.size
    outcome.by_prefix = [{"rule_id": r, "prefix": p, **t} for (r, p), t in sorted(by_prefix.items())]
