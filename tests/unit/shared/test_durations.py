from datetime import timedelta

import pytest

from spark_jobs.core.durations import DurationError, format_duration, parse_duration, parse_seconds


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("7d", timedelta(days=7)),
        ("2w", timedelta(weeks=2)),
        ("1w3d12h", timedelta(days=10, hours=12)),
        ("90m", timedelta(minutes=90)),
        ("45s", timedelta(seconds=45)),
        ("24h", timedelta(days=1)),
        ("1w1d1h1m1s", timedelta(days=8, hours=1, minutes=1, seconds=1)),
        ("0d5h", timedelta(hours=5)),
        ("007d", timedelta(days=7)),
    ],
)
def test_parse_duration_accepts_every_unit_combination(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", '"" is not a duration: it is empty'),
        ("7x", "\"7x\" is not a duration: unknown unit 'x'"),
        ("7D", "\"7D\" is not a duration: unknown unit 'D'"),
        ("3d1w", '"3d1w" is not a duration: units must go from largest to smallest (w d h m s)'),
        ("1d1d", "\"1d1d\" is not a duration: unit 'd' appears more than once"),
        ("0d", '"0d" is not a valid duration: it must be greater than zero'),
        ("0s0m", '"0s0m" is not a duration: units must go from largest to smallest'),
        ("0w0s", '"0w0s" is not a valid duration: it must be greater than zero'),
        ("d", '"d" is not a duration: use whole numbers'),
        ("7", '"7" is not a duration: use whole numbers'),
        ("1.5h", '"1.5h" is not a duration: use whole numbers'),
        ("7 d", '"7 d" is not a duration: use whole numbers'),
        (" 7d", '" 7d" is not a duration: use whole numbers'),
        ("-7d", '"-7d" is not a duration: use whole numbers'),
        ("9999999999w", '"9999999999w" is too large to be a duration'),
    ],
)
def test_parse_duration_errors_quote_the_input(text: str, fragment: str) -> None:
    with pytest.raises(DurationError) as caught:
        parse_duration(text)
    assert str(caught.value).startswith(fragment)


def test_parse_duration_error_says_what_is_accepted() -> None:
    with pytest.raises(DurationError) as caught:
        parse_duration("7x")
    assert '"1w3d12h"' in str(caught.value)
    assert "w, d, h, m, s" in str(caught.value)


def test_parse_duration_rejects_non_strings() -> None:
    with pytest.raises(DurationError, match=r"^7 is not a duration: expected a string"):
        parse_duration(7)  # type: ignore[arg-type]


def test_duration_error_is_a_value_error() -> None:
    assert issubclass(DurationError, ValueError)


@pytest.mark.parametrize(
    ("td", "expected"),
    [
        (timedelta(hours=24), "1d"),
        (timedelta(days=10, hours=12), "1w3d12h"),
        (timedelta(minutes=90), "1h30m"),
        (timedelta(days=14), "2w"),
        (timedelta(days=1, seconds=1), "1d1s"),
        (timedelta(seconds=59), "59s"),
        (timedelta(0), "0s"),
        (timedelta(seconds=5, microseconds=999_999), "5s"),
        (timedelta(microseconds=1), "0s"),
    ],
)
def test_format_duration_is_canonical_and_shortest(td: timedelta, expected: str) -> None:
    assert format_duration(td) == expected


def test_format_duration_rejects_negative() -> None:
    with pytest.raises(ValueError, match="negative"):
        format_duration(timedelta(seconds=-1))


@pytest.mark.parametrize("text", ["7d", "1w3d12h", "90m", "3h59m59s", "52w"])
def test_format_then_parse_round_trips(text: str) -> None:
    td = parse_duration(text)
    assert parse_duration(format_duration(td)) == td


def test_parse_seconds_accepts_positive_integers() -> None:
    assert parse_seconds(1) == timedelta(seconds=1)
    assert parse_seconds(604800) == timedelta(weeks=1)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (True, "true is not a number of seconds: expected a whole number, at least 1"),
        (False, "false is not a number of seconds: expected a whole number, at least 1"),
        (0, "0 is not a valid number of seconds: it must be at least 1"),
        (-5, "-5 is not a valid number of seconds: it must be at least 1"),
        (1.5, "1.5 is not a number of seconds: expected a whole number, at least 1"),
        (60.0, "60.0 is not a number of seconds: expected a whole number, at least 1"),
        ("60", '"60" is not a number of seconds: expected a whole number, at least 1'),
        (None, "null is not a number of seconds: expected a whole number, at least 1"),
        (10**20, "100000000000000000000 is too large to be a duration"),
    ],
)
def test_parse_seconds_errors(value: object, message: str) -> None:
    with pytest.raises(DurationError) as caught:
        parse_seconds(value)
    assert str(caught.value) == message
