"""lakeFS action payloads and what each one means for the idle clock (pure: no I/O)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError, field_validator

# All 17 event types lakeFS defines (pkg/graveler/hooks_handler.go).
EventType = Literal[
    "prepare-commit", "pre-commit", "post-commit",
    "pre-merge", "post-merge",
    "pre-create-tag", "post-create-tag", "pre-delete-tag", "post-delete-tag",
    "pre-create-branch", "post-create-branch", "pre-delete-branch", "post-delete-branch",
    "pre-revert", "post-revert", "pre-cherry-pick", "post-cherry-pick",
]  # fmt: skip

EVENT_TYPES: tuple[str, ...] = EventType.__args__  # type: ignore[attr-defined]

ClockKind = Literal["create", "write", "delete"]

# The events that move the idle clock, and how: the one table both the receiver and `hooks install` (which
# subscribes lakeFS to exactly these) read. Imports arrive as post-commit; tags and pre-hooks never count.
CLOCK_EVENTS: dict[str, ClockKind] = {
    "post-create-branch": "create",
    "post-delete-branch": "delete",
    "post-commit": "write",
    "post-merge": "write",
    "post-revert": "write",
    "post-cherry-pick": "write",
}
WRITE_EVENTS = frozenset(event for event, kind in CLOCK_EVENTS.items() if kind == "write")


class LakeFSEvent(BaseModel):
    """The JSON body lakeFS POSTs to a webhook (actions.EventInfo); unknown fields are tolerated."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    event_type: EventType
    event_time: AwareDatetime
    repository_id: str = Field(min_length=1, max_length=256)
    action_name: str | None = None
    hook_id: str | None = None
    branch_id: str | None = Field(default=None, max_length=256)
    source_ref: str | None = None
    tag_id: str | None = None
    commit_id: str | None = None
    commit_message: str | None = None
    committer: str | None = None
    commit_metadata: dict[str, str] | None = None
    merge_source: str | None = None

    @field_validator("event_time")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        return value.astimezone(UTC)


class EventError(ValueError):
    """A payload that is not a lakeFS event; ``errors`` is a list of {field, message}."""

    def __init__(self, errors: list[dict[str, str]]):
        super().__init__("; ".join(f"{e['field']}: {e['message']}" for e in errors))
        self.errors = errors


def parse_event(payload: Any) -> LakeFSEvent:
    if not isinstance(payload, dict):
        raise EventError([{"field": "(body)", "message": "expected a JSON object"}])
    try:
        return LakeFSEvent.model_validate(payload)
    except ValidationError as exc:
        errors = []
        for err in exc.errors():
            field = ".".join(str(p) for p in err["loc"]) or "(body)"
            message = err["msg"]
            if field == "event_type" and err["type"] == "literal_error":
                message = f"unknown event type {err['input']!r}"
            errors.append({"field": field, "message": message})
        raise EventError(errors) from None


@dataclass(frozen=True)
class ClockUpdate:
    kind: ClockKind
    repository_id: str
    branch_id: str
    at: datetime
    head: str | None = None


def clock_update(event: LakeFSEvent) -> ClockUpdate | None:
    """What an event does to the idle clock; None for events that do not touch it (pre-*, tags)."""
    kind = CLOCK_EVENTS.get(event.event_type)
    if kind is None or not event.branch_id:
        return None
    head = event.commit_id if kind != "delete" else None
    return ClockUpdate(kind, event.repository_id, event.branch_id, event.event_time, head)
