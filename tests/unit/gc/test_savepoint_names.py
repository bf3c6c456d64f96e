"""A savepoint made without --name takes the first savepoint pattern as the policies list them (issue 26)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from spark_jobs.core.cleaning import parse_cleaning_policies
from workers.gc.savepoints import default_name, patterns

NOW = datetime(2026, 11, 26, 16, 27, 34, tzinfo=UTC)


def policies(*savepoint_lists: list[str]):
    return parse_cleaning_policies({"policies": [{"id": f"p{i}", "patterns": ["main"], "savepoints": s}
                                                 for i, s in enumerate(savepoint_lists)]})


@pytest.mark.parametrize(("lists", "expected"), [
    ([["release-*", "rc-*"]], "release-20261126-162734"),
    ([["zz-*", "aa-*"]], "zz-20261126-162734"),
    ([["zz-*"], ["aa-*"]], "zz-20261126-162734"),  # the first policy's first pattern
    ([["fixed", "b-*-*", "b-?", "y-*"], ["a-*"]], "y-20261126-162734"),  # the first one a time fits in
])
def test_the_default_name_uses_the_first_pattern_as_written(lists, expected):
    assert default_name(patterns(policies(*lists)), NOW) == expected


def test_patterns_keep_document_order_and_each_once():
    assert patterns(policies(["r-*", "a-*"], ["a-*", "b-*"])) == ["r-*", "a-*", "b-*"]


def test_no_pattern_a_time_fits_in_gives_no_name():
    assert default_name(patterns(policies(["fixed", "x-?"])), NOW) is None
