"""lakeFS's own partition names decode to the time it opened them (what an incremental listing relies on)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from spark_jobs.core.slices import slice_time
from tests.integration.conftest import upload


def test_a_new_object_s_slice_was_opened_within_the_last_hour(lakefs, repo):
    before = datetime.fromtimestamp(int(time.time()), UTC)
    upload(lakefs, repo, "main", "a.bin", b"a")
    address = lakefs.call("stat", lakefs.objects.stat_object, repo, "main", "a.bin").physical_address
    part = address.split("/data/", 1)[1].split("/", 1)[0]
    opened = slice_time(part)
    assert opened is not None, address
    # the server opened the partition when it started or at its first path handed out, less than an hour ago
    assert before - timedelta(hours=1, seconds=5) <= opened <= before + timedelta(seconds=5), (address, opened)
