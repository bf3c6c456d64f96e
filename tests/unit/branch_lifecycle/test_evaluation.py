from datetime import UTC, datetime, timedelta, timezone

import pytest

from workers.branch_lifecycle.evaluation import BranchState, Decision, evaluate, last_activity, written_since
from workers.branch_lifecycle.policies import Policy

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
DAY = timedelta(days=1)


def branch(name: str, created_days_ago: float | None, written_days_ago: float | None = None,
           head: str | None = "c1") -> BranchState:
    created = NOW - created_days_ago * DAY if created_days_ago is not None else None
    written = NOW - written_days_ago * DAY if written_days_ago is not None else None
    return BranchState(name, head, created, written)


def one(state: BranchState, policies: list[Policy], **kwargs: object) -> Decision:
    [decision] = evaluate([state], "main", policies, now=NOW, **kwargs)  # type: ignore[arg-type]
    return decision


FEATURE_BOTH = Policy("features", ("feature-*",), max_age=7 * DAY, max_idle_age=3 * DAY)
TEMP_IDLE = Policy("temp", ("temp-*",), max_idle_age=DAY)
OLD_AGE = Policy("old", ("feature-*", "temp-*"), max_age=30 * DAY)


# --- both thresholds ------------------------------------------------------------------------------------------


def test_both_thresholds_crossed_deletes() -> None:
    decision = one(branch("feature-a", 10, 4), [FEATURE_BOTH])
    assert (decision.action, decision.reason, decision.policy_id) == ("delete", "expired", "features")
    assert decision.age == 10 * DAY
    assert decision.idle == 4 * DAY
    assert decision.detail == "policy 'features' applies: past max_age 1w (age 1w3d) and max_idle_age 3d (idle 4d)"


def test_only_age_crossed_keeps() -> None:
    decision = one(branch("feature-a", 10, 1), [FEATURE_BOTH])
    assert (decision.action, decision.reason, decision.policy_id) == ("keep", "thresholds-not-crossed", "features")
    # created 10d ago (+7d already past), last write 1d ago (+3d -> 2 days from now): the later one.
    assert decision.delete_at == NOW + 2 * DAY


def test_only_idle_crossed_keeps() -> None:
    decision = one(branch("feature-a", 5), [FEATURE_BOTH])  # never written: idle 5d > 3d, age 5d < 7d
    assert (decision.action, decision.reason) == ("keep", "thresholds-not-crossed")
    assert decision.delete_at == NOW + 2 * DAY
    assert decision.detail == (
        f"matches policy 'features' but has not crossed the thresholds yet; "
        f"it becomes eligible after {(NOW + 2 * DAY).isoformat()}"
    )


def test_single_threshold_policies() -> None:
    assert one(branch("temp-x", 0.5, None), [TEMP_IDLE]).action == "keep"
    assert one(branch("temp-x", 3, 2), [TEMP_IDLE]).action == "delete"
    assert one(branch("feature-x", 31, 0), [OLD_AGE]).action == "delete"  # fresh writes do not save an old branch


# --- first match recording ------------------------------------------------------------------------------------


def test_first_applicable_policy_is_recorded() -> None:
    first = Policy("first", ("feature-*",), max_age=DAY)
    second = Policy("second", ("feature-*",), max_idle_age=DAY)
    state = branch("feature-a", 10, 5)
    assert one(state, [first, second]).policy_id == "first"
    assert one(state, [second, first]).policy_id == "second"


def test_non_applicable_earlier_policy_is_skipped() -> None:
    not_yet = Policy("not-yet", ("feature-*",), max_age=100 * DAY)
    applies = Policy("applies", ("feature-*",), max_age=DAY)
    decision = one(branch("feature-a", 10), [not_yet, applies])
    assert (decision.action, decision.policy_id) == ("delete", "applies")


def test_keep_records_first_name_matching_policy() -> None:
    other = Policy("other", ("x-*",), max_age=DAY)
    a = Policy("a", ("feature-*",), max_age=100 * DAY)
    b = Policy("b", ("feature-*",), max_age=50 * DAY)
    decision = one(branch("feature-z", 10), [other, a, b])
    assert (decision.action, decision.policy_id) == ("keep", "a")
    assert decision.delete_at == NOW + 40 * DAY  # the earliest over a and b, not the recorded one


def test_no_matching_policy() -> None:
    decision = one(branch("release-1", 400), [FEATURE_BOTH, TEMP_IDLE])
    assert (decision.action, decision.reason, decision.policy_id) == ("keep", "no-matching-policy", None)
    assert decision.delete_at is None
    assert decision.age == 400 * DAY


# --- skips ----------------------------------------------------------------------------------------------------


def test_default_branch_exempt_even_with_star_pattern() -> None:
    everything = Policy("all", ("*",), max_age=DAY)  # built directly: no default-branch validation happened
    decisions = evaluate([branch("main", 100), branch("dev", 100)], "main", [everything], now=NOW)
    assert [(d.branch_id, d.action, d.reason) for d in decisions] == [
        ("main", "skip", "default-branch"),
        ("dev", "delete", "expired"),
    ]
    assert decisions[0].policy_id is None
    assert decisions[0].delete_at is None


def test_no_creation_time_is_skipped() -> None:
    decision = one(branch("feature-a", None, 100), [FEATURE_BOTH])
    assert (decision.action, decision.reason, decision.policy_id) == ("skip", "no-creation-time", None)
    assert decision.age is None
    assert decision.idle == 100 * DAY
    assert decision.delete_at is None


def test_read_only_skips_every_branch() -> None:
    states = [branch("main", 100), branch("feature-a", 100, 50), branch("x", None)]
    decisions = evaluate(states, "main", [FEATURE_BOTH], now=NOW, read_only=True)
    assert [(d.action, d.reason) for d in decisions] == [("skip", "read-only")] * 3


# --- last activity --------------------------------------------------------------------------------------------


def test_never_written_falls_back_to_creation_time() -> None:
    decision = one(branch("temp-a", 2), [TEMP_IDLE])
    assert decision.idle == 2 * DAY
    assert decision.action == "delete"


def test_write_before_creation_is_ignored() -> None:
    # A write from an earlier branch of the same name must not make the recreated branch look idle.
    decision = one(branch("temp-a", 0.5, 10), [TEMP_IDLE])
    assert decision.idle == DAY / 2
    assert decision.action == "keep"
    assert decision.delete_at == NOW + DAY / 2


def test_last_activity() -> None:
    assert last_activity(branch("b", 5, 2)) == NOW - 2 * DAY
    assert last_activity(branch("b", 5, 9)) == NOW - 5 * DAY
    assert last_activity(branch("b", 5)) == NOW - 5 * DAY
    assert last_activity(branch("b", None, 3)) == NOW - 3 * DAY
    assert last_activity(branch("b", None)) is None


# --- delete_at and boundaries ---------------------------------------------------------------------------------


def test_delete_at_arithmetic() -> None:
    created = NOW - timedelta(days=2, hours=5)
    written = NOW - timedelta(hours=7)
    state = BranchState("feature-a", "c", created, written)
    decision = one(state, [FEATURE_BOTH])
    assert decision.delete_at == max(created + 7 * DAY, written + 3 * DAY)
    assert decision.delete_at == NOW + timedelta(days=4, hours=19)


def test_delete_at_for_a_deleted_branch_is_in_the_past() -> None:
    # created 10d ago + 7d = 3d ago; written 4d ago + 3d = 1d ago; AND -> the later of the two.
    decision = one(branch("feature-a", 10, 4), [FEATURE_BOTH])
    assert decision.delete_at == NOW - DAY


def test_exactly_at_threshold_is_not_yet_eligible() -> None:
    policy = Policy("p", ("feature-*",), max_age=7 * DAY)
    at = one(branch("feature-a", 7), [policy])
    assert (at.action, at.delete_at) == ("keep", NOW)
    just_after = one(BranchState("feature-a", "c", NOW - 7 * DAY - timedelta(microseconds=1), None), [policy])
    assert just_after.action == "delete"


def test_exact_idle_threshold_is_not_yet_eligible() -> None:
    assert one(branch("temp-a", 5, 1), [TEMP_IDLE]).action == "keep"


def test_output_keeps_input_order() -> None:
    names = ["temp-b", "main", "feature-a", "zzz", "temp-a"]
    decisions = evaluate((branch(n, 50) for n in names), "main", [FEATURE_BOTH, TEMP_IDLE], now=NOW)
    assert [d.branch_id for d in decisions] == names


def test_head_is_carried_into_the_decision() -> None:
    assert one(branch("feature-a", 10, 4, head="abc123"), [FEATURE_BOTH]).head == "abc123"


def test_policy_without_thresholds_never_applies() -> None:
    decision = one(branch("feature-a", 1000), [Policy("bare", ("feature-*",))])
    assert (decision.action, decision.reason, decision.delete_at) == ("keep", "thresholds-not-crossed", None)


def test_huge_threshold_never_overflows() -> None:
    decision = one(branch("feature-a", 1), [Policy("p", ("feature-*",), max_age=timedelta(days=999_999_999))])
    assert (decision.action, decision.delete_at) == ("keep", None)


# --- time zones -----------------------------------------------------------------------------------------------


def test_naive_now_is_rejected() -> None:
    with pytest.raises(ValueError, match="now must be timezone-aware"):
        evaluate([], "main", [], now=datetime(2025, 6, 1, 12, 0))


def test_naive_branch_time_is_rejected() -> None:
    state = BranchState("feature-a", "c", datetime(2025, 5, 1), None)
    with pytest.raises(ValueError, match="timezone-aware"):
        evaluate([state], "main", [FEATURE_BOTH], now=NOW)


def test_other_time_zones_compare_by_instant() -> None:
    plus_two = timezone(timedelta(hours=2))
    created = (NOW - 7 * DAY).astimezone(plus_two)
    decision = one(BranchState("feature-a", "c", created, None), [Policy("p", ("feature-*",), max_age=7 * DAY)])
    assert (decision.action, decision.delete_at) == ("keep", NOW)


# --- written_since --------------------------------------------------------------------------------------------


def test_written_since_unchanged() -> None:
    state = branch("feature-a", 10, 4, head="c1")
    assert written_since(state, state) is False
    assert written_since(branch("x", None, head=None), branch("x", None, head=None)) is False


def test_written_since_head_changed() -> None:
    assert written_since(branch("feature-a", 10, 4, head="c1"), branch("feature-a", 10, 4, head="c2")) is True
    assert written_since(branch("feature-a", 10, 4, head=None), branch("feature-a", 10, 4, head="c2")) is True


def test_written_since_activity_moved_later() -> None:
    assert written_since(branch("feature-a", 10, 4), branch("feature-a", 10, 0)) is True
    assert written_since(branch("feature-a", 10), branch("feature-a", 10, 1)) is True


def test_written_since_recreated_branch() -> None:
    assert written_since(branch("feature-a", 10, 4), branch("feature-a", 0.1)) is True


def test_written_since_ignores_old_or_earlier_writes() -> None:
    assert written_since(branch("feature-a", 10), branch("feature-a", 10, 20)) is False
    assert written_since(branch("feature-a", 10, 2), branch("feature-a", 10, 4)) is False


def test_written_since_unknown_activity_counts_as_changed() -> None:
    assert written_since(branch("feature-a", 10), branch("feature-a", None)) is True
    assert written_since(branch("feature-a", None), branch("feature-a", None, 1)) is True
