"""The incremental run's pure parts: the state's encoding (a torn or altered state is refused, never half read),
when a full listing is due, which units died, which slices an incremental run lists, what a sweep did not
delete, and how many of a full run's deletions an incremental run would have missed."""

from __future__ import annotations

import gzip
import json
import random
from datetime import UTC, datetime, timedelta

import pytest

from spark_jobs.core.incremental import (
    CARRIED_STAGED_MOST,
    FORMAT,
    State,
    StateError,
    carried_staged,
    dead_ranges,
    decode,
    encode,
    units_of,
    why_full,
)
from spark_jobs.core.plan import StoredObject
from spark_jobs.core.report import describe_listing
from spark_jobs.core.slices import slice_name
from spark_jobs.engine.listing.incremental import missed, recent_units, unit_of
from spark_jobs.engine.sweep.sweep import not_deleted

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def state(**changes) -> State:
    fields = {"repository_id": "repo", "namespace": "s3://bucket/repo", "run_id": "r1",
              "horizon": NOW - timedelta(days=1, hours=6), "listed_at": NOW - timedelta(days=1),
              "full_listing_at": NOW - timedelta(days=3),
              "units": units_of([("r-a", ()), ("r-b", ("p1",)), ("r-b", ("p1", "p2"))]),
              "versions": frozenset({"data/s/v"}), "staged": frozenset({"data/s/st"}),
              "leftover": frozenset({"data/s/left"})}
    return State(**{**fields, **changes})


def test_a_state_reads_back_as_written():
    original = state()
    assert decode(encode(original)) == original
    assert original.carried() == {"data/s/v", "data/s/st", "data/s/left"}
    assert decode(encode(original.with_leftover(["x"]))).leftover == {"x"}
    over = state(staged=frozenset(), staged_over=True)
    assert decode(encode(over)) == over and decode(encode(original)).staged_over is False
    over = state(versions=frozenset(), versions_over=True)
    assert decode(encode(over)) == over and decode(encode(original)).versions_over is False


def test_an_older_state_without_the_staged_flag_reads_as_carrying_its_staged_keys():
    import hashlib  # noqa: PLC0415

    body = json.loads(json.loads(gzip.decompress(encode(state())))["state"])
    del body["staged_over"], body["versions_over"]
    text = json.dumps(body)
    older = gzip.compress(json.dumps({"sha256": hashlib.sha256(text.encode()).hexdigest(), "state": text}).encode())
    assert decode(older) == state()
    body["staged_over"] = "yes"  # a flag that is not one: the state is refused, not read as true or false
    text = json.dumps(body)
    with pytest.raises(StateError, match="flag"):
        decode(gzip.compress(json.dumps({"sha256": hashlib.sha256(text.encode()).hexdigest(),
                                         "state": text}).encode()))


def test_a_state_carries_staged_keys_up_to_its_bound_and_then_none():
    keys = {f"data/s/{i}" for i in range(CARRIED_STAGED_MOST)}
    assert carried_staged(keys) == (frozenset(keys), False)
    assert carried_staged(keys | {"data/s/one-more"}) == (frozenset(), True)
    assert carried_staged(None) == (frozenset(), True)  # more than asked for, not counted further
    assert carried_staged(set()) == (frozenset(), False)


@pytest.mark.parametrize("damage", ["truncated", "bit", "not-gzip", "other-format", "missing-field", "naive-time"])
def test_a_damaged_state_is_refused_with_a_reason(damage):
    data = encode(state())
    if damage == "truncated":
        data = data[: len(data) // 2]
    elif damage == "bit":  # the body changed, the checksum did not
        outer = json.loads(gzip.decompress(data))
        outer["state"] = outer["state"].replace("data/s/v", "data/s/w")
        data = gzip.compress(json.dumps(outer).encode())
    elif damage == "not-gzip":
        data = b"{}"
    else:
        outer = json.loads(gzip.decompress(data))
        body = json.loads(outer["state"])
        if damage == "other-format":
            body["format"] = FORMAT + 1
        elif damage == "missing-field":
            del body["units"]
        else:
            body["horizon"] = "2026-11-25T00:00:00"
        text = json.dumps(body)
        import hashlib  # noqa: PLC0415

        data = gzip.compress(json.dumps({"sha256": hashlib.sha256(text.encode()).hexdigest(),
                                         "state": text}).encode())
    with pytest.raises(StateError) as caught:
        decode(data)
    assert str(caught.value)


def test_random_bytes_are_never_a_state():
    rng = random.Random(4)
    for _ in range(200):
        with pytest.raises(StateError):
            decode(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 80))))


def due(s: State | None, problem: str | None = None, **kw) -> str | None:
    args = {"repository_id": "repo", "namespace": "s3://bucket/repo", "now": NOW, "every": timedelta(days=7),
            "asked": False, **kw}
    return why_full(s, problem, **args)


def test_when_a_full_listing_is_due():
    assert due(state()) is None
    assert "--full" in due(state(), asked=True)
    assert "not trusted: torn" in due(None, "torn")
    assert "no previous run" in due(None)
    assert "not of this repository's namespace" in due(state(namespace="s3://other/repo"))
    assert "not of this repository's namespace" in due(state(repository_id="other"))
    assert "dated after this one" in due(state(listed_at=NOW + timedelta(minutes=1)))
    assert "dated after this one" in due(state(horizon=NOW + timedelta(minutes=1)))
    assert "7d ago" in due(state(full_listing_at=NOW - timedelta(days=7)))
    assert due(state(full_listing_at=NOW - timedelta(days=6, hours=23))) is None
    assert due(state(), every=timedelta(0)) is not None  # 0: every run lists everything
    # a state that could not carry every key only staged entries keep: the next run judges them by a full listing
    assert "more than 100,000 keys that only staged entries keep" in due(state(staged=frozenset(), staged_over=True))
    assert "more than 100,000 keys that only keep_versions keeps" in due(state(versions=frozenset(),
                                                                               versions_over=True))


def test_a_unit_dead_in_one_scope_names_its_range():
    before = units_of([("a", ()), ("b", ("p1",)), ("b", ("p2",)), ("c", ())])
    now = units_of([("a", ()), ("b", ("p2",)), ("d", ())])
    assert dead_ranges(before, now) == ["b", "c"]
    assert dead_ranges(now, now) == []


def test_recent_units_by_slice_time_and_always_the_root():
    old = slice_name(NOW - timedelta(days=3))
    edge = slice_name(NOW - timedelta(hours=25))  # within the 1 h + 24 h + 15 min reach of the horizon
    new = slice_name(NOW - timedelta(minutes=5))
    units = [f"data/{old}/", f"data/{edge}/", f"data/{new}/", "data/not-a-partition/", ""]
    assert recent_units(units, NOW) == [f"data/{edge}/", f"data/{new}/", "data/not-a-partition/", ""]
    assert unit_of(f"data/{old}/x") == f"data/{old}/" and unit_of("legacy-object") == "" and unit_of("data/x") == ""


def test_missed_counts_what_neither_a_recent_slice_nor_the_checked_keys_hold():
    old = f"data/{slice_name(NOW - timedelta(days=5))}/"
    new = f"data/{slice_name(NOW - timedelta(hours=1))}/"
    s = state(horizon=NOW - timedelta(hours=2))
    deleted = [StoredObject(old + "found", 1, 0), StoredObject(old + "skewed", 1, 0), StoredObject(new + "x", 1, 0),
               StoredObject("root-object", 1, 0)]
    assert missed(deleted, s, checked={old + "found"}) == 1


def test_what_a_sweep_did_not_delete():
    planned = ["a", "b", "c", "d"]
    assert not_deleted(planned, ["a", "b"], []) == {"c", "d"}  # spared or capped
    assert not_deleted(planned, ["a", "b"], ["b: AccessDenied"]) == {"b", "c", "d"}
    # a failure that names no key sent: every key sent counts as not deleted
    assert not_deleted(planned, ["a", "b"], ["something odd"]) == {"a", "b", "c", "d"}


def test_the_summary_line_says_how_the_objects_were_found():
    line = describe_listing({"kind": "incremental", "since": "2026-11-25T12:00:00+00:00", "previous_run": "r1",
                             "objects": 120, "slices": 2, "slices_total": 900, "found_without_listing": 7,
                             "checked": 30})
    assert "incremental" in line and "2 of 900 slices" in line and "7 found without listing" in line
    line = describe_listing({"kind": "full", "objects": 5, "slices": 1, "reason": "a full listing was asked for",
                             "missed_by_incremental": 0})
    assert "full because a full listing was asked for" in line and "0 deleted objects" in line
