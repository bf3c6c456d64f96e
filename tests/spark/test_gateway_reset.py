"""A test interrupted in the middle of a Spark call (pytest-timeout's signal, ^C) must not fail the Spark tests after
it: tests/spark_gateway.py resets this thread's gateway connection (conftest's teardown after a failed test)."""

from __future__ import annotations

import signal
import time

import pytest

from tests.spark_gateway import reset_after_interrupt

pytestmark = pytest.mark.spark


class Interrupted(BaseException):  # what pytest-timeout raises is a BaseException too, not an Exception
    pass


def _interrupt(_signum, _frame):
    raise Interrupted


def _interrupted_job(sc) -> None:
    previous = signal.signal(signal.SIGALRM, _interrupt)
    signal.setitimer(signal.ITIMER_REAL, 1.0)
    try:
        with pytest.raises(Interrupted):
            sc.parallelize([1, 2], 2).map(lambda x: (time.sleep(4), x)[1]).collect()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _answers(sc) -> bool:
    try:
        return sc.parallelize(range(10), 2).sum() == 45 and sc._jvm.java.lang.Math.abs(-7) == 7  # noqa: SLF001
    except Exception:  # noqa: BLE001 - a stale answer surfaces as any of py4j's errors
        return False


def test_a_spark_call_interrupted_mid_answer_leaves_the_gateway_usable_once_reset(spark_context):
    sc = spark_context
    _interrupted_job(sc)
    time.sleep(4)  # the interrupted job's answer is on its way: without the reset the next call reads it
    assert reset_after_interrupt()
    assert _answers(sc)
    assert _answers(sc)


def test_without_the_reset_the_next_call_reads_another_call_s_answer(spark_context):
    """The failure the reset exists for (so that the test above can fail): the gateway is left desynchronised."""
    sc = spark_context
    _interrupted_job(sc)
    time.sleep(4)
    broken = not _answers(sc)
    reset_after_interrupt()  # leave the session's context usable for the tests after this one
    assert _answers(sc)
    assert broken
