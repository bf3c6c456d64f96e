"""Policy thresholds: the seed's duration strings ("1w3d12h") and the Enterprise API's integer seconds.

Both spellings end up as a ``timedelta`` so the rest of the code never cares which one a user wrote.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta

# Descending order is part of the syntax: it keeps one canonical spelling per value and makes
# typos such as "3d1w" or "1d1d" errors instead of silently summing.
_UNITS: dict[str, int] = {"w": 604_800, "d": 86_400, "h": 3_600, "m": 60, "s": 1}
_TOKEN = re.compile(r"([0-9]+)([A-Za-z]+)")  # [0-9] rather than \d, which also accepts non-ASCII digits
_ACCEPTED = (
    'use whole numbers followed by units w, d, h, m, s, largest first, each at most once (e.g. "7d", "1w3d12h", "90m")'
)


class DurationError(ValueError):
    pass


def _quote(text: object) -> str:
    # JSON quoting keeps odd input (quotes, newlines, non-strings) readable in one line.
    return json.dumps(text, ensure_ascii=False, default=repr)


def parse_duration(text: str, *, allow_zero: bool = False) -> timedelta:
    """Parse "7d", "2w", "1w3d12h", "90m"... into a positive timedelta (``allow_zero``: "0s" too)."""
    if not isinstance(text, str):
        raise DurationError(f"{_quote(text)} is not a duration: expected a string; {_ACCEPTED}")
    tokens = _tokenize(text)
    seconds = 0
    previous = -1
    for number, unit in tokens:
        position = list(_UNITS).index(unit)
        if position == previous:
            raise DurationError(f"{_quote(text)} is not a duration: unit {unit!r} appears more than once; {_ACCEPTED}")
        if position < previous:
            raise DurationError(f"{_quote(text)} is not a duration: units must go from largest to smallest (w d h m s)")
        previous = position
        seconds += int(number) * _UNITS[unit]
    if seconds == 0 and not allow_zero:
        raise DurationError(f"{_quote(text)} is not a valid duration: it must be greater than zero")
    return _to_timedelta(seconds, text)


def _tokenize(text: str) -> list[tuple[str, str]]:
    if not text:
        raise DurationError(f'"" is not a duration: it is empty; {_ACCEPTED}')
    tokens = _TOKEN.findall(text)
    if "".join(n + u for n, u in tokens) != text:
        raise DurationError(f"{_quote(text)} is not a duration: {_ACCEPTED}")
    for _, unit in tokens:
        if unit not in _UNITS:
            raise DurationError(f"{_quote(text)} is not a duration: unknown unit {unit!r}; {_ACCEPTED}")
    return tokens


def _to_timedelta(seconds: int, original: object) -> timedelta:
    try:
        return timedelta(seconds=seconds)
    except OverflowError:
        raise DurationError(f"{_quote(original)} is too large to be a duration") from None


def format_duration(td: timedelta) -> str:
    """Shortest canonical spelling, the inverse of ``parse_duration``: 24h -> "1d", zero -> "0s".

    Sub-second remainders are dropped (policies only hold whole seconds; ages shown to people don't need them).
    """
    if td < timedelta(0):
        raise ValueError(f"cannot format a negative duration ({td})")
    total = td.days * 86_400 + td.seconds  # exact, unlike total_seconds() on huge values
    parts = []
    for unit, size in _UNITS.items():
        count, total = divmod(total, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


def parse_seconds(value: object) -> timedelta:
    """The lakeFS Enterprise form: a whole number of seconds, at least 1."""
    # bool is an int subclass: `max_age: true` in YAML must not mean one second.
    if isinstance(value, bool) or not isinstance(value, int):
        raise DurationError(f"{_quote(value)} is not a number of seconds: expected a whole number, at least 1")
    if value < 1:
        raise DurationError(f"{value} is not a valid number of seconds: it must be at least 1")
    return _to_timedelta(value, value)
