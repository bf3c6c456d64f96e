"""Requests to a store under its throttling: a cap on requests in flight and an adaptive rate (additive increase,
multiplicative decrease) that halves on every throttling answer (S3 SlowDown/503, Azure ServerBusy/503, GCS
429/503) and creeps back up while requests succeed. One ``Throttle`` is shared by the threads of a process (an
executor has its own), so a throttled store sees the whole process slow down, not one thread retrying alone.
lakeFS's own GC retries with a fixed back-off per request (lakeFS issue #5729); a store that keeps throttling then
fails the run. Here the rate follows what the store accepts, and the run completes.

Requests are not paced until the store first throttles: then the rate starts at half of what the process was
achieving (over its last requests), and pacing stops again once it is back at the ceiling. (A fixed start rate of 50
requests/s, +5 per success, was most of a cold mark's time on local disk and versitygw: 2,000 range files took 2.4 s
of waiting for turns alone; bench/README.md, "GC: scale curve, cold and warm runs".)
"""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

# How a request that was throttled at every attempt is told (a run's StorageError says it, read back by its text)
THROTTLED_TEXT = "the store was still throttling"


class Throttled(Exception):
    """A store answered that it is throttling (the request may be retried after backing off)."""


class Unreachable(Throttled):
    """A request timed out or its connection failed: retried like a throttling answer, but only a few times, so
    that a store that is gone fails the run within seconds, not minutes."""


def next_rate(rate: float, *, throttled: bool, floor: float, ceiling: float, step: float) -> float:
    """AIMD: halve on throttling, add ``step`` requests/s on success, within [floor, ceiling]."""
    return max(floor, rate / 2) if throttled else min(ceiling, rate + step)


@dataclass
class ThrottleStats:
    requests: int = 0
    backoffs: int = 0  # throttling answers that made the rate back off


class Throttle:
    """``call(fn)`` runs ``fn`` with at most ``max_in_flight`` concurrent calls and at the current rate; on
    ``Throttled`` it backs off (halves the rate, sleeps with jitter) and retries, up to ``max_attempts``."""

    def __init__(self, *, max_in_flight: int = 8, start_rate: float | None = None, floor: float = 0.5,
                 ceiling: float = 1000.0, step: float = 5.0, max_attempts: int = 12, max_unreachable: int = 5,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> None:
        self.slots = threading.BoundedSemaphore(max_in_flight)
        # requests/s; None: not paced (until the store throttles, and again once recovered to the ceiling)
        self.rate: float | None = start_rate
        self.floor, self.ceiling, self.step = floor, ceiling, step
        self.starts: deque[float] = deque(maxlen=64)  # when the last requests started: the rate achieved
        self.max_attempts, self.max_unreachable = max_attempts, max_unreachable
        self.sleep, self.clock = sleep, clock
        self.lock = threading.Lock()
        self.next_start = 0.0
        self.stats = ThrottleStats()

    def _wait_turn(self) -> None:
        with self.lock:
            now = self.clock()
            if self.rate is None:
                self.starts.append(now)
                return
            start = max(now, self.next_start)
            self.next_start = start + 1.0 / self.rate
            self.starts.append(start)
        if start > now:
            self.sleep(start - now)

    def achieved(self) -> float:
        """Requests/s over the last requests started (the ceiling when too few to tell)."""
        span = self.starts[-1] - self.starts[0] if len(self.starts) > 1 else 0.0
        return min(self.ceiling, (len(self.starts) - 1) / span) if span > 0 else self.ceiling

    def _feedback(self, throttled: bool, tally: ThrottleStats | None) -> None:
        with self.lock:
            if self.rate is None and not throttled:
                return
            if self.rate is None:  # the first throttling answer: pace from what the store was given
                self.rate = self.achieved()
                self.next_start = self.clock()
            self.rate = next_rate(self.rate, throttled=throttled, floor=self.floor, ceiling=self.ceiling,
                                  step=self.step)
            if not throttled and self.rate >= self.ceiling:
                self.rate = None  # recovered: no more pacing
            if throttled:
                self.stats.backoffs += 1
                if tally is not None:
                    tally.backoffs += 1

    def back_off(self, attempt: int, tally: ThrottleStats | None = None) -> None:
        """A throttling answer: lower the rate, then sleep (with jitter) before attempt ``attempt + 1``."""
        self._feedback(True, tally)
        self.sleep(min(30.0, 0.1 * 2 ** attempt) * (0.5 + random.random() / 2))

    def call(self, fn: Callable[[], object], what: str = "request", tally: ThrottleStats | None = None):
        """``tally``: the caller's own count of requests and back-offs (``stats`` counts the whole process's)."""
        unreachable = 0
        for attempt in range(self.max_attempts):
            self._wait_turn()
            with self.slots:
                with self.lock:
                    self.stats.requests += 1
                    if tally is not None:
                        tally.requests += 1
                try:
                    result = fn()
                except Unreachable as exc:
                    unreachable += 1
                    if unreachable >= self.max_unreachable:
                        raise Unreachable(f"{what}: the store did not answer {unreachable} times: {exc}") from None
                except Throttled:
                    pass
                else:
                    self._feedback(False, tally)
                    return result
            # back off outside the slot, so others' requests (at the lowered rate) go on
            self.back_off(attempt, tally)
        raise Throttled(f"{what}: {THROTTLED_TEXT} after {self.max_attempts} attempts")


_shared: dict[tuple[str, int], Throttle] = {}
_shared_lock = threading.Lock()


def shared_throttle(store: str, max_in_flight: int) -> Throttle:
    """The process's one Throttle for a store (every context, partition and thread of this process share it)."""
    with _shared_lock:
        return _shared.setdefault((store, max_in_flight), Throttle(max_in_flight=max_in_flight))
