"""lakeFS action payloads and what each one means for the idle clock (pure: no I/O)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

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

# lakeFS's own id rules (pkg/validator: ReValidRepositoryID, ReValidBranchID; Go's \w is ASCII). They also keep
# ':' out of ids, so the idle clock's Redis keys, joined with ':', cannot be forged across repositories.
REPOSITORY_ID = r"^[a-z0-9][a-z0-9-]{2,62}$"
BRANCH_ID = r"^[A-Za-z0-9_][-A-Za-z0-9_]*$"
ID_RULES = {"repository_id": "3-63 characters: lower-case letters, digits and '-', not starting with '-'",
            "branch_id": "letters, digits, '_' and '-', not starting with '-'"}
# The accepted window for event_time: from the Unix epoch (the clock keeps Unix times) to a day ahead of the
# receiver's own clock (hosts disagree a little; a day is a typo or a broken clock).
EARLIEST_EVENT_TIME = datetime(1970, 1, 1, tzinfo=UTC)
MAX_AHEAD = timedelta(days=1)

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
    repository_id: str = Field(pattern=REPOSITORY_ID)
    action_name: str | None = None
    hook_id: str | None = None
    branch_id: str | None = Field(default=None, max_length=256, pattern=BRANCH_ID)
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
        try:
            utc = value.astimezone(UTC)
        except (OverflowError, ValueError):
            raise ValueError("is outside the range of dates that can be converted to UTC") from None
        if utc < EARLIEST_EVENT_TIME:
            raise ValueError("is before 1970-01-01T00:00:00Z; the idle clock keeps Unix times")
        return utc

    @model_validator(mode="after")
    def _within_window(self, info: ValidationInfo) -> LakeFSEvent:
        now = (info.context or {}).get("now")
        if now is not None and self.event_time > now + MAX_AHEAD:
            # Times only move forward: one event from the future would freeze the branch's clock until then.
            raise PydanticCustomError("event_time", "is more than a day ahead of the receiver's clock ({now}); "
                                      "check the lakeFS server's clock",
                                      {"now": now.isoformat()})
        return self


class EventError(ValueError):
    """A payload that is not a lakeFS event; ``errors`` is a list of {field, message}."""

    def __init__(self, errors: list[dict[str, str]]):
        super().__init__("; ".join(f"{e['field']}: {e['message']}" for e in errors))
        self.errors = errors


def _unencodable(payload: Any) -> str | None:
    """The path of the first string (key or value) that UTF-8 cannot encode (a lone surrogate), if any.
    Iterative: a body may nest as deep as the JSON parser allowed."""
    stack: list[tuple[Any, str]] = [(payload, "")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return path or "(body)"
        elif isinstance(value, dict):
            for key, item in value.items():
                stack.append((key, f"{path}.(key)" if path else "(key)"))
                stack.append((item, f"{path}.{key}" if path else str(key)))
        elif isinstance(value, list):
            stack.extend((item, f"{path}.{index}") for index, item in enumerate(value))
    return None


def parse_event(payload: Any, *, now: datetime | None = None, may_hold_surrogates: bool = True) -> LakeFSEvent:
    """Validate a payload; with ``now``, also refuse an event_time more than MAX_AHEAD after it.
    ``may_hold_surrogates=False`` skips looking for lone surrogates: right for a payload decoded from JSON text
    (strict UTF-8) without any ``\\u`` escape, where none can hide."""
    if not isinstance(payload, dict):
        raise EventError([{"field": "(body)", "message": "expected a JSON object"}])
    if may_hold_surrogates and (bad := _unencodable(payload)) is not None:
        raise EventError([{"field": bad, "message": "contains a string that is not valid Unicode (a lone surrogate)"}])
    try:
        return LakeFSEvent.model_validate(payload, context={"now": now})
    except ValidationError as exc:
        errors = []
        for err in exc.errors():
            field = ".".join(str(p) for p in err["loc"]) or "(body)"
            message = err["msg"].removeprefix("Value error, ")
            if err["type"] == "event_time":
                field = "event_time"
            if field == "event_type" and err["type"] == "literal_error":
                message = f"unknown event type {str(err['input'])[:100]!r}"
            elif err["type"] == "string_pattern_mismatch" and field in ("repository_id", "branch_id"):
                what = "repository" if field == "repository_id" else "branch"
                message = f"is not a valid lakeFS {what} id ({ID_RULES[field]})"
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
