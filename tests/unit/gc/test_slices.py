"""Which data/<slice>/ prefixes can hold objects written since a time: lakeFS's descending-xid partition names."""

from __future__ import annotations

import base64
import os
from datetime import UTC, datetime, timedelta

import pytest

from spark_jobs.core.slices import SliceWindow, slice_time, slices_to_list


def partition(opened: datetime) -> str:
    """A partition name as lakeFS makes one: an xid whose 32-bit time is the year-4000 epoch minus ``opened``
    (overflowing as Go's uint32 conversion does), then machine, process and counter bytes."""
    seconds = (64060588800 - int(opened.timestamp())) % 2**32
    raw = seconds.to_bytes(4, "big") + os.urandom(8)
    return base64.b32hexencode(raw).decode().lower().rstrip("=")[:20]


@pytest.mark.parametrize("opened", [datetime(1970, 1, 1, tzinfo=UTC), datetime(2023, 5, 17, 3, 4, 5, tzinfo=UTC),
                                    datetime(2026, 11, 26, 18, 0, tzinfo=UTC), datetime(2090, 1, 1, tzinfo=UTC)])
def test_a_partition_name_gives_the_time_lakefs_opened_it(opened):
    name = partition(opened)
    assert len(name) == 20 and slice_time(name) == opened and slice_time(name + "/") == opened


@pytest.mark.parametrize("name", ["", "legacy", "0123456789abcdefghijk", "0123456789abcdefghiw", "ABCDEFGHIJ0123456789",
                                  "data", "cv0q8cq7e7fc73b7mf5g-x"])
def test_other_names_are_not_partitions(name):
    assert slice_time(name) is None


def test_only_slices_that_can_hold_newer_objects_are_listed():
    since = datetime(2026, 11, 26, 12, tzinfo=UTC)
    window = SliceWindow(open_for=timedelta(hours=1), write_late=timedelta(hours=24), skew=timedelta(minutes=15))
    old = partition(since - timedelta(hours=25, minutes=16))  # closed, and past the grace period, before `since`
    edge = partition(since - timedelta(hours=25, minutes=15))
    recent = partition(since - timedelta(hours=2))
    future = partition(since + timedelta(days=3))
    chosen = slices_to_list([old, edge, recent, future, "not-a-partition"], since=since, window=window)
    assert chosen == [edge, recent, future, "not-a-partition"]
    assert slices_to_list([old], since=since, window=SliceWindow(write_late=timedelta(days=2))) == [old]
