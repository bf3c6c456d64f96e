"""engine.runtime.cyclic_gc.paused: the collector is off inside every pause and comes back as it was after the last."""

from __future__ import annotations

import gc
import random
import threading

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
