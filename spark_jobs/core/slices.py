"""Which ``data/<slice>/`` prefixes can hold objects written since a point in time (pure).

lakeFS writes new objects under ``data/<partition>/<xid>``; the partition is an xid whose time is *descending*: the
year-4000 epoch minus the moment the partition was opened, so that newer partitions list first. A lakeFS server keeps
a partition until it has handed out 50,000 paths or an hour has passed since it opened it (lakefs-facts §2), and
it checks only when it hands out the next path. So every path in a slice was handed out at or after the slice's
time, and all but the last one within an hour of it; but a client may write an object to a path it was handed
(``getPhysicalAddress``, presigned uploads) later, and lakeFS links such a path for up to its grace period (24 h).

A slice whose time is older than ``since − open_for − write_late − skew`` cannot hold an object written at or after
``since``, except one written after lakeFS's grace period (never linked, so garbage a full run finds) or under a
clock more than ``skew`` apart. Deciding about an object still goes by its modification time (``plan``), never by
its slice's name: the name only decides which prefixes are worth listing.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

# The epoch lakeFS counts partitions down from (Saturday, 1 January 4000), and the turns of a 32-bit xid time it
# overflows by: xid keeps the seconds as an unsigned 32-bit number, so 64060588800 − now is stored modulo 2**32.
# Fourteen turns put the decoded times between 1958 and 2094.
_YEAR_4000 = 64060588800
_TURNS = 14
_XID_ALPHABET = set("0123456789abcdefghijklmnopqrstuv")


@dataclass(frozen=True)
class SliceWindow:
    """How long after its time a slice may still receive new objects, and the clock difference tolerated between
    lakeFS and whatever wrote the objects' modification times."""

    open_for: timedelta = timedelta(hours=1)  # lakeFS's partition interval (DefaultDataInterval)
    write_late: timedelta = timedelta(hours=24)  # a path handed out is linked up to lakeFS's grace period
    skew: timedelta = timedelta(minutes=15)

    @property
    def reach(self) -> timedelta:
        return self.open_for + self.write_late + self.skew


def slice_time(name: str) -> datetime | None:
    """When lakeFS opened the partition ``name`` (a 20-character descending xid), or None for any other name:
    a slice that is not lakeFS's is always listed."""
    name = name.rstrip("/")
    if len(name) != 20 or not set(name) <= _XID_ALPHABET:
        return None
    try:
        raw = base64.b32hexdecode(name.upper() + "====")
    except ValueError:
        return None
    stored = int.from_bytes(raw[:4], "big")
    return datetime.fromtimestamp(_YEAR_4000 - _TURNS * 2**32 - stored, UTC)


def slice_name(opened: datetime, tag: bytes = b"") -> str:
    """A partition name as lakeFS writes it for a partition opened at ``opened`` (``slice_time``'s inverse; the
    other 8 bytes of the xid from ``tag``): for tests and benchmarks that lay out a namespace's history."""
    stored = (_YEAR_4000 - _TURNS * 2**32 - int(opened.timestamp())) % 2**32
    rest = (tag + bytes(8))[:8]
    return base64.b32hexencode(stored.to_bytes(4, "big") + rest).decode().rstrip("=").lower()


def slices_to_list(slices: Iterable[str], *, since: datetime, window: SliceWindow = SliceWindow()) -> list[str]:
    """The slices that can hold an object written at or after ``since``: every slice opened within
    ``window.reach`` before it or later, and every slice whose name is not a lakeFS partition."""
    horizon = since - window.reach
    out = []
    for name in slices:
        opened = slice_time(name)
        if opened is None or opened >= horizon:
            out.append(name)
    return out
