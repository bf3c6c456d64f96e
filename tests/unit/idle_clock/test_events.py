from datetime import UTC, datetime

import pytest

from workers.idle_clock.events import EVENT_TYPES, EventError, clock_update, parse_event


def payload(**over):
    base = {"event_type": "post-commit", "event_time": "2026-03-01T10:00:00Z", "repository_id": "repo",
            "branch_id": "feature", "commit_id": "abc", "action_name": "a", "hook_id": "h", "source_ref": "abc"}
    return {**base, **over}


def test_all_seventeen_lakefs_event_types_are_known():
    assert len(EVENT_TYPES) == 17 and "prepare-commit" in EVENT_TYPES and "post-cherry-pick" in EVENT_TYPES


@pytest.mark.parametrize(("event_type", "kind"), [
    ("post-create-branch", "create"), ("post-delete-branch", "delete"), ("post-commit", "write"),
    ("post-merge", "write"), ("post-revert", "write"), ("post-cherry-pick", "write"),
])
def test_writes_creates_and_deletes(event_type, kind):
    update = clock_update(parse_event(payload(event_type=event_type)))
    assert (update.kind, update.repository_id, update.branch_id) == (kind, "repo", "feature")
    assert update.at == datetime(2026, 3, 1, 10, tzinfo=UTC)
    assert update.head == (None if kind == "delete" else "abc")


@pytest.mark.parametrize("event_type", ["pre-commit", "prepare-commit", "pre-merge", "pre-create-branch",
                                        "pre-delete-branch", "post-create-tag", "post-delete-tag", "pre-revert"])
def test_pre_hooks_and_tags_do_not_touch_the_clock(event_type):
    assert clock_update(parse_event(payload(event_type=event_type))) is None


def test_event_time_is_normalised_to_utc():
    event = parse_event(payload(event_time="2026-03-01T12:00:00+02:00"))
    assert event.event_time == datetime(2026, 3, 1, 10, tzinfo=UTC)


def test_unknown_fields_are_tolerated():
    assert parse_event(payload(something_new=1)).repository_id == "repo"


@pytest.mark.parametrize(("body", "field", "needle"), [
    ([], "(body)", "JSON object"),
    (payload(event_type="post-boom"), "event_type", "unknown event type 'post-boom'"),
    (payload(event_time="2026-03-01T10:00:00"), "event_time", "timezone"),
    (payload(repository_id=""), "repository_id", "not a valid lakeFS repository id"),
    (payload(repository_id="other:branch:x"), "repository_id", "not a valid lakeFS repository id"),
    (payload(repository_id="Repo"), "repository_id", "not a valid lakeFS repository id"),
    (payload(branch_id="a:b"), "branch_id", "not a valid lakeFS branch id"),
    (payload(branch_id="-x"), "branch_id", "not a valid lakeFS branch id"),
    (payload(branch_id="caf\u00e9"), "branch_id", "not a valid lakeFS branch id"),  # Go's \w is ASCII
    (payload(branch_id="\ud800"), "branch_id", "lone surrogate"),
    (payload(commit_message="ok \udfff"), "commit_message", "lone surrogate"),
    (payload(commit_metadata={"\ud800": "v"}), "commit_metadata.(key)", "lone surrogate"),
    (payload(event_time="0001-01-01T00:00:00+01:00"), "event_time", "converted to UTC"),
    (payload(event_time="9999-12-31T23:59:59-01:00"), "event_time", "converted to UTC"),
    (payload(event_time="1969-12-31T23:59:59Z"), "event_time", "before 1970"),
    ({"event_type": "post-commit", "event_time": "2026-03-01T10:00:00Z"}, "repository_id", "Field required"),
    (payload(commit_metadata={"a": 1}), "commit_metadata.a", "string"),
])
def test_invalid_payloads_name_the_field(body, field, needle):
    with pytest.raises(EventError) as err:
        parse_event(body)
    assert any(e["field"] == field and needle in e["message"] for e in err.value.errors), err.value.errors


def test_event_without_branch_is_ignored():
    assert clock_update(parse_event(payload(branch_id=None))) is None


def test_event_time_more_than_a_day_ahead_is_refused():
    now = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
    assert parse_event(payload(event_time="2026-03-02T09:59:00Z"), now=now)
    with pytest.raises(EventError) as err:
        parse_event(payload(event_time="2026-03-02T10:01:00Z"), now=now)
    assert err.value.errors[0]["field"] == "event_time" and "a day ahead" in err.value.errors[0]["message"]


def test_deeply_nested_values_are_checked_without_recursion():
    deep: object = "\ud800"
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(EventError) as err:
        parse_event(payload(extra=deep))
    assert "lone surrogate" in err.value.errors[0]["message"]
