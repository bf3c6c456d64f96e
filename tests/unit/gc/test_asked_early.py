"""AskedEarly (engine/listing/incremental.py): keys asked for while a day's comparison goes on, on a real local
namespace (a folder). What the run then needs is answered from what was asked early, or left for ask_for; a key
asked early that the run does not need costs a request and nothing else, even when its request failed."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from spark_jobs.engine.listing.incremental import AskedEarly
from spark_jobs.engine.stores import StorageConfig, StorageError, open_namespace


@pytest.fixture
def ctx(tmp_path: Path):
    for key in ("data/aa/one", "data/aa/two", "data/bb/three", "legacy"):
        path = tmp_path / "ns" / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(key.encode())
    os.utime(tmp_path / "ns" / "data/aa/one", (1_000_000, 1_000_000))
    return SimpleNamespace(ns=open_namespace(StorageConfig("local://ns", str(tmp_path), None, 4)))


def test_what_was_asked_early_answers_the_keys_the_run_needs(ctx):
    with AskedEarly(ctx, skip={"data/aa/two"}, most=100) as early:
        early.ask(["data/aa/one", "data/aa/two", "data/zz/gone"])
        early.ask(["data/aa/one", "legacy"])  # asked once
        assert sorted(early.asked) == ["data/aa/one", "data/zz/gone", "legacy"]  # never a key it was told to skip
        found, rest = early.answers(["data/aa/one", "data/bb/three", "data/zz/gone"])
        assert [(o.key, o.size, o.mtime) for o in found] == [("data/aa/one", 11, 1_000_000.0)]
        assert rest == ["data/bb/three"]  # not asked early: ask_for's
        assert early.record(["data/aa/one", "data/bb/three", "data/zz/gone"]) == {"asked_early": 3,
                                                                                   "asked_early_unused": 1}


def test_at_most_most_keys_and_none_at_zero(ctx):
    with AskedEarly(ctx, skip=set(), most=2) as early:
        early.ask(["data/aa/one", "data/aa/two", "data/bb/three"])
        assert sorted(early.asked) == ["data/aa/one", "data/aa/two"]
        assert early.answers(["data/bb/three"]) == ([], ["data/bb/three"])
    with AskedEarly(ctx, skip=set(), most=0) as early:
        early.ask(["data/aa/one"])
        assert early.asked == {} and early._pool is None  # noqa: SLF001 - no thread started for nothing
        assert early.answers(["data/aa/one"]) == ([], ["data/aa/one"])


def test_a_failed_early_request_fails_only_a_run_that_needs_its_key(ctx):
    with AskedEarly(ctx, skip=set(), most=10) as early:
        early.ask(["../outside", "data/aa/one"])  # refused by the namespace: the request fails
        found, rest = early.answers(["data/aa/one"])
        assert [o.key for o in found] == ["data/aa/one"] and rest == []
        with pytest.raises(StorageError, match="leaves the namespace"):
            early.answers(["../outside"])


def test_its_threads_are_gone_when_it_closes(ctx):
    before = {t.name for t in threading.enumerate()}
    with AskedEarly(ctx, skip=set(), most=10) as early:
        early.ask(["data/aa/one", "data/aa/two"])
    assert not {t.name for t in threading.enumerate() if t.name.startswith("gc-asked-early")} - before
