"""engine.runtime.cyclic_gc.paused: the collector is off inside every pause and comes back as it was after the last."""

from __future__ import annotations

import gc
import random
import threading
import weakref

import pytest

from spark_jobs.engine.runtime import cyclic_gc


@pytest.fixture(autouse=True)
def _restore_collector():
    was = gc.isenabled()
    yield
    (gc.enable if was else gc.disable)()


def test_a_pause_turns_the_collector_off_and_back_on_even_on_errors():
    gc.enable()
    with cyclic_gc.paused():
        assert not gc.isenabled()
        with cyclic_gc.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause still holds
    assert gc.isenabled()
    with pytest.raises(RuntimeError), cyclic_gc.paused():
        raise RuntimeError("a failed run")
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off():
    gc.disable()
    with cyclic_gc.paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_overlapping_pauses_in_threads_resume_only_after_the_last():
    gc.enable()
    rng = random.Random(7)
    inside = threading.Barrier(8)
    seen_on: list[bool] = []

    def run(delay_ms: int) -> None:
        with cyclic_gc.paused():
            inside.wait(timeout=10)  # all are paused; they then leave one by one, the others still inside
            threading.Event().wait(delay_ms / 1000)
            seen_on.append(gc.isenabled())

    threads = [threading.Thread(target=run, args=(rng.randrange(1, 30),)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen_on == [False] * 8
    assert gc.isenabled()


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_what_a_run_holds_at_its_end_is_not_scanned_and_its_cycles_are_freed_by_the_next_run():
    gc.enable()
    with cyclic_gc.paused():
        left = weakref.ref(_Cycle())  # cyclic garbage a run leaves behind
        held = [[i] for i in range(1000)]  # what it still holds when it ends
    assert gc.isenabled()
    assert gc.get_freeze_count() >= len(held)  # frozen: the first collection after the run does not scan them
    assert gc.get_count()[0] < 700  # and nothing is due for a collection
    gc.collect()
    assert left() is not None  # frozen, not collected yet
    with cyclic_gc.paused():
        assert left() is None  # the next run's start collected it
        assert gc.get_freeze_count() == 0
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_that_was_off_freezes_nothing():
    gc.unfreeze()
    gc.disable()
    with cyclic_gc.paused():
        pass
    assert gc.get_freeze_count() == 0
    assert not gc.isenabled()
