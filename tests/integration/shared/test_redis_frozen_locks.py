"""A GC run's lease and a lifecycle run's lock while the Redis primary hangs (SIGSTOP: a VM pause, a partition, a long
fork) and the Sentinels promote its replica, the old primary resuming at once, a few seconds later, or never.

Two would-be holders, each in a thread of its own with its own client as two workers have: the first takes the
lease (or lock) before the freeze, or just after it (its command then waits on the frozen primary); the second keeps
trying to take it. Each confirms what it holds as a run does before each batch of deletions (the GC's deleters:
``LeaseWatch.check``; a lifecycle run: ``still_held``) and stops at the first check that fails. What must hold:

- never two holders at once: no holder's check passes after the other took it (the other holding on);
- never a lease believed held that the new primary does not have: after every check that passed, the primary the
  Sentinels name holds the checker's token.

Without replica acknowledgement (``LAKEFS_JANITOR_REDIS_REPLICA_ACKS=0``) both fail: the resumed old primary answers
as if it were still the primary (it has not noticed the promotion) until the Sentinels demote it ~10 s later. And
with the replica cut off under a healthy primary, renewals that no replica acknowledges count as lost. Each test
prints a ``RELIABILITY`` line (docs/redis-ha.md).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from spark_jobs.engine.sweep.lease_watch import LeaseLost, LeaseRef, LeaseWatch
from tests.integration.shared.test_redis_failover import ha, ha_env, healed, settings_for  # noqa: F401 (fixtures)
from tests.services import RedisSentinelCluster, wait_until
from workers.branch_lifecycle.store import LifecycleRecords
from workers.gc.history import GCRuns
from workers.gc.lease import Busy
from workers.shared.locks import Unconfirmed, release_quietly, still_held
from workers.shared.services import Services

HOLD_SECONDS = 6  # the lease's and the lock's time-out: short, so that one the holder cannot renew expires in the test
CHECK_EVERY = 0.2  # a holder confirms before each batch; batches come often
TRY_EVERY = 0.3  # the other holder tries again this often
READ_WITHIN = 1.0  # a check's answer still describes the lease this long (it has at least 3 s left when it passes)
NEVER_SECONDS = 14  # "never resumed": longer than a worker client's 10 s socket time-out, so that its retry re-resolves
RESUMES = {"at-once": 0.0, "after-3s": 3.0, "never": None}


class Claim(Protocol):
    """A lease or a lock as a run holds it: all of it called from the holder's own thread (redis-py's lock keeps its
    token per thread)."""

    key: str

    def warm(self) -> None: ...  # a connection to the primary in the pool, as a worker that has been running has

    def take(self) -> str: ...  # "held", "busy" or "unconfirmed"

    def confirm(self) -> bool: ...

    def token(self) -> str: ...

    def close(self) -> None: ...


class LeaseClaim:
    """A GC run's lease: taken by its starter (``RunLease``, renewed by its thread), confirmed by a deleter's
    ``LeaseWatch`` built from the reference a Spark job gets."""

    def __init__(self, services: Services, repository_id: str) -> None:
        self.lease = GCRuns.of(services).lease(repository_id, HOLD_SECONDS)
        self.key = self.lease.key
        self.watch: LeaseWatch | None = None

    def warm(self) -> None:
        self.lease.client.ping()

    def take(self) -> str:
        try:
            self.lease.acquire()
        except Busy:
            return "busy"
        except Unconfirmed:
            return "unconfirmed"
        self.watch = LeaseWatch(LeaseRef.from_json(self.lease.ref().to_json()))
        return "held"

    def confirm(self) -> bool:
        try:
            self.watch.check()
        except LeaseLost:
            return False
        return True

    def token(self) -> str:
        return self.lease.token

    def close(self) -> None:
        self.lease.release()
        if self.watch is not None:
            self.watch.close()


class LockClaim:
    """A branch lifecycle run's lock (the object lifecycle's and the reconciler's are the same ``named_lock``)."""

    def __init__(self, services: Services, repository_id: str) -> None:
        self.lock = LifecycleRecords.of(services).run_lock(repository_id, HOLD_SECONDS)
        self.key = self.lock.name
        self.check = still_held(self.lock)

    def warm(self) -> None:
        self.lock.redis.ping()

    def take(self) -> str:
        try:
            return "held" if self.lock.acquire() else "busy"
        except Unconfirmed:
            return "unconfirmed"

    def confirm(self) -> bool:
        return self.check()

    def token(self) -> str:
        token = self.lock.local.token
        return token.decode() if isinstance(token, bytes) else token

    def close(self) -> None:
        if self.lock.local.token is not None:
            release_quietly(self.lock, "test")


@dataclass
class Moment:
    sent: float
    done: float


@dataclass
class Contender:
    """One would-be holder in a thread of its own: takes the claim (``persist``: again every TRY_EVERY s until it
    has it), then confirms it every CHECK_EVERY s until a check fails (a run stops there) or the test ends. After
    each check that passed it reads the key on the primary the Sentinels name."""

    name: str
    ha: RedisSentinelCluster
    make: Callable[[], Claim]
    persist: bool
    attempts: list[tuple[Moment, str]] = field(default_factory=list)
    held: list[Moment] = field(default_factory=list)  # its take, then every check that passed
    taken_at: float | None = None
    failed_at: float | None = None
    unseen: list[tuple[float, object]] = field(default_factory=list)  # passed, but the named primary had other
    seen: int = 0  # passed, and the named primary had it
    error: BaseException | None = None
    claim: Claim | None = None
    token: str | None = None  # a lease's from the start, a lock's once taken

    def __post_init__(self) -> None:
        self.ready, self.go = threading.Event(), threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)

    def start(self, *, go: bool = True) -> Contender:
        """Its claim made and its connection warm; it takes the claim now, or once ``go`` is set."""
        self._thread.start()
        wait_until(lambda: self.ready.is_set() or self.error, 30, f"{self.name} ready")
        if go:
            self.go.set()
        return self

    def stop(self) -> None:
        self.go.set()
        self._stop.set()
        self._thread.join(60)

    def _run(self) -> None:
        try:
            claim = self.claim = self.make()
            try:
                claim.warm()
                self.token = claim.token()
                self.ready.set()
                self.go.wait()
                self._hold(claim)
            finally:
                claim.close()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def _hold(self, claim: Claim) -> None:
        token = None
        while not self._stop.is_set():
            sent = time.monotonic()
            outcome = claim.take()
            moment = Moment(sent, time.monotonic())
            self.attempts.append((moment, outcome))
            if outcome == "held":
                self.taken_at, token = moment.done, claim.token()
                self.token = token
                self.held.append(moment)
                break
            if not self.persist:
                return
            self._stop.wait(TRY_EVERY)
        while token is not None and not self._stop.is_set():
            sent = time.monotonic()
            if not claim.confirm():
                self.failed_at = time.monotonic()
                return
            self.held.append(Moment(sent, time.monotonic()))
            self._on_the_primary(claim.key, token)
            self._stop.wait(CHECK_EVERY)

    def _on_the_primary(self, key: str, token: str) -> None:
        """Read at once, one attempt (a frozen node answers when it resumes, with what it holds then), on the node
        the Sentinels name before and after the read; anything else says nothing about the check just passed."""
        try:
            port = self.ha.primary_port()
            node = next(n for n in self.ha.nodes if n.port == port)
            client = redis.Redis(host="127.0.0.1", port=port, password=node.password, socket_timeout=1,
                                 socket_connect_timeout=1, retry=Retry(NoBackoff(), 0))
            found = client.get(key)
            still = self.ha.primary_port() == port
        except (redis.RedisError, StopIteration, RuntimeError):
            return  # the Sentinels name a node that does not answer (still the frozen one), or none yet
        read = time.monotonic()
        if not still or read - self.held[-1].done > READ_WITHIN:
            return  # another primary by now, or this thread was held up: the check's answer is history
        if found is not None and found.decode() == token:
            self.seen += 1
        else:
            self.unseen.append((self.held[-1], read, port, found))

    def held_after(self, other: Contender) -> list[Moment]:
        """Its moments of holding while ``other`` held: after the other took it, before the other's first failed
        check (a moment's own check happened somewhere between its sending and its answer)."""
        if other.taken_at is None:
            return []
        return [m for m in self.held if m.sent >= other.taken_at and (other.failed_at is None or
                                                                       m.done <= other.failed_at)]


@pytest.fixture
def contenders(ha: RedisSentinelCluster, ha_env, monkeypatch) -> Iterator[Callable[..., Contender]]:  # noqa: F811
    """Contenders on the janitor's settings (as the worker reads them), each with its own Services: clients and
    connection pools of their own, the worker's Redis client (10 s socket time-out, redis-py's retries)."""
    settings = settings_for(ha_env, monkeypatch)
    made: list[Contender] = []

    def make(name: str, kind: type, repository_id: str, *, persist: bool) -> Contender:
        contender = Contender(name, ha, lambda: kind(Services(settings), repository_id), persist)
        made.append(contender)
        return contender

    yield make
    for contender in made:
        contender.stop()


def timeline(contender: Contender, t0: float) -> str:
    """What a contender did, in seconds from ``t0`` (the freeze): for a failure's message."""
    def at(moment: Moment) -> str:
        return f"{moment.sent - t0:.2f}..{moment.done - t0:.2f}"

    unseen = [(at(m), f"{read - t0:.2f}", port, found) for m, read, port, found in contender.unseen]
    return (f"{contender.name} ({contender.token}): attempts {[(at(m), o) for m, o in contender.attempts][-6:]}, held "
            f"{[at(m) for m in contender.held][-8:]}, failed at "
            f"{'-' if contender.failed_at is None else f'{contender.failed_at - t0:.2f}'}, unseen {unseen[:5]}")


def check(first: Contender, other: Contender, times: dict[str, float]) -> None:
    story = f"{timeline(first, times['frozen'])}; {timeline(other, times['frozen'])}; times " + \
        str({k: round(v - times["frozen"], 2) for k, v in times.items()})
    for contender in (first, other):
        assert contender.error is None, f"{contender.name}: {contender.error!r}"
        assert not contender.unseen, f"{contender.name} went on holding what the primary the Sentinels name did " \
                                     f"not have: {story}"
    both = first.held_after(other) + other.held_after(first)
    assert not both, f"two holders at once: {both[:5]}; {story}"


def freeze_and_resume(cluster: RedisSentinelCluster, resume: float | None, *, then: Callable[[], None] = lambda: None
                      ) -> dict[str, float]:
    """SIGSTOP the primary, call ``then`` at once (before the Sentinels notice), wait for the promotion, resume the
    old primary after ``resume`` seconds and wait until it is a replica in sync (or leave it frozen for
    NEVER_SECONDS). The times, from the freeze."""
    frozen_at = time.monotonic()
    old = cluster.stop_primary()
    then()
    cluster.wait_promoted(old)
    times = {"frozen": frozen_at, "promoted": time.monotonic()}
    if resume is None:
        time.sleep(NEVER_SECONDS)
        times["ended"] = time.monotonic()
        return times
    time.sleep(resume)
    cluster.thaw(old)
    times["resumed"] = time.monotonic()
    wait_until(lambda: cluster.demoted(old), 60, "the old primary demoted and in sync")
    times["demoted"] = times["ended"] = time.monotonic()
    return times


def since(times: dict[str, float], moment: float | None) -> str:
    return "-" if moment is None else f"{moment - times['frozen']:.1f}s"


KINDS = {"gc-lease": LeaseClaim, "lifecycle-lock": LockClaim}


@pytest.mark.parametrize("resume", list(RESUMES))
@pytest.mark.parametrize("kind", list(KINDS))
def test_held_while_the_primary_hangs(ha, contenders, kind, resume):  # noqa: F811
    """Held (and confirmed) before the freeze. The holder's renewals and checks cannot be confirmed from then on
    (the frozen primary answers nothing, the promoted one has no replica until the old one rejoins it): it stops
    at its first check that fails, and its renewals count as lost. The other takes it once the old primary is back
    as a replica and what the first held has expired; left frozen, nobody takes it (nothing can be confirmed)."""
    repository_id = f"fz-{uuid.uuid4().hex[:8]}"
    holder = contenders("holder", KINDS[kind], repository_id, persist=False).start()
    wait_until(lambda: len(holder.held) >= 5 or holder.failed_at or holder.error, 30, "the holder's checks")
    assert holder.taken_at is not None and holder.failed_at is None, holder.attempts
    other = contenders("other", KINDS[kind], repository_id, persist=True).start()
    time.sleep(1)
    assert other.taken_at is None
    times = freeze_and_resume(ha, RESUMES[resume])
    if RESUMES[resume] is not None:  # the repository is not blocked for ever: the other run gets it
        wait_until(lambda: other.taken_at is not None, HOLD_SECONDS + 30, "the other to take it")
        time.sleep(2)  # and holds it: its checks pass on the new primary
    holder.stop()
    other.stop()
    ha.heal()  # the frozen one thawed
    check(holder, other, times)
    assert holder.failed_at is not None, "the holder's checks went on passing through the freeze"
    last_held = max(m.done for m in holder.held)
    if RESUMES[resume] is None:
        assert other.taken_at is None, "taken while no replica could acknowledge it"
    else:
        assert other.held and len(other.held) > 1 and other.failed_at is None
    print(f"RELIABILITY redis-frozen-primary-{kind}-held ({resume}): promotion after "
          f"{since(times, times['promoted'])}, the holder's last check passed at {since(times, last_held)}, its "
          f"first failed at {since(times, holder.failed_at)}, the other took it at {since(times, other.taken_at)} "
          f"(after {sum(o != 'held' for _, o in other.attempts)} refusals: "
          f"{'/'.join(sorted({o for _, o in other.attempts if o != 'held'}))}), the holder's checks that passed after the freeze "
          f"{sum(m.sent > times['frozen'] for m in holder.held)}, the other's {len(other.held)}, each found on the "
          f"primary the Sentinels name, two holders at once: 0")


@pytest.mark.parametrize("resume", ["at-once", "never"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_taken_while_the_primary_hangs(ha, contenders, kind, resume):  # noqa: F811
    """Taken just after the freeze: the command waits on the frozen primary. Resumed after the promotion, the old
    primary runs it and answers; no replica acknowledges it there, nor on the promoted one until the old one
    rejoins it, so it is not taken (``Unconfirmed``: the run does not start) and what the attempts left is
    released. The other takes it afterwards; never both."""
    repository_id = f"ft-{uuid.uuid4().hex[:8]}"
    first = contenders("first", KINDS[kind], repository_id, persist=False).start(go=False)
    other = contenders("other", KINDS[kind], repository_id, persist=True).start(go=False)
    times = freeze_and_resume(ha, RESUMES[resume], then=lambda: (first.go.set(), other.go.set()))
    wait_until(lambda: first.attempts, 60, "the first one's answer")
    if RESUMES[resume] is not None:
        wait_until(lambda: first.taken_at is not None or other.taken_at is not None, HOLD_SECONDS + 30,
                   "either to take it")
        time.sleep(2)
    first.stop()
    other.stop()
    ha.heal()
    check(first, other, times)
    answered = first.attempts[0][0].done
    if RESUMES[resume] is None:
        assert first.taken_at is None and other.taken_at is None, "taken while no replica could acknowledge it"
    print(f"RELIABILITY redis-frozen-primary-{kind}-taken ({resume}): promotion after "
          f"{since(times, times['promoted'])}, the first attempt answered {first.attempts[0][1]!r} at "
          f"{since(times, answered)}, the other took it at {since(times, other.taken_at)} (refused before: "
          f"{'/'.join(sorted({o for _, o in other.attempts if o != 'held'}))}), the first took it: "
          f"{'yes' if first.taken_at else 'no'}, two holders at once: 0")


def test_renewals_no_replica_acknowledges_count_as_lost(ha, ha_env, monkeypatch):  # noqa: F811
    """The primary healthy but its replica cut off (frozen, its link dropped): renewals still run on the primary,
    and no replica acknowledges them. A GC run's starter counts its lease lost once no renewal was confirmed for
    the deleters' stale time (their own rule), and its deleters stop; a lifecycle run's lock renewal (before each
    deletion) counts as lost at once (after REDIS_RETRY_SECONDS of attempts). Taking either is refused meanwhile."""
    settings = settings_for(ha_env, monkeypatch)
    repository_id = f"fc-{uuid.uuid4().hex[:8]}"
    lease = GCRuns.of(Services(settings)).lease(repository_id, HOLD_SECONDS)
    lease.acquire()
    watch = LeaseWatch(LeaseRef.from_json(lease.ref().to_json()))
    lock = LifecycleRecords.of(Services(settings)).run_lock(repository_id, HOLD_SECONDS)
    assert lock.acquire()
    renewed = still_held(lock)
    try:
        time.sleep(lease.renew_seconds * 3)
        watch.check()
        assert renewed() and not lease.lost.is_set()
        cut_at = time.monotonic()
        ha.cut_replica()
        wait_until(lease.lost.is_set, 30, "the starter to count its lease lost")
        lease_lost_after = time.monotonic() - cut_at
        started = time.monotonic()
        assert not renewed()
        lock_lost_in = time.monotonic() - started
        with pytest.raises(LeaseLost, match="could not be confirmed"):
            watch.check()
        started = time.monotonic()
        with pytest.raises(Unconfirmed):
            GCRuns.of(Services(settings)).lease(f"{repository_id}-2", HOLD_SECONDS).acquire()
        refused_in = time.monotonic() - started
    finally:
        lease.release()
        watch.close()
        release_quietly(lock, "test")
        ha.heal()
    # Not before the stale time: a renewal or two that no replica acknowledged does not end a run by itself.
    assert lease_lost_after > lease.stale_ms / 1000 - lease.renew_seconds, lease_lost_after
    print(f"RELIABILITY redis-unacknowledged-renewals: the replica cut off under a held lease and lock: the GC "
          f"starter counted its lease lost {lease_lost_after:.1f}s after the cut (stale time "
          f"{lease.stale_ms / 1000:.0f}s), the deleters' check failed, the lock's renewal counted lost in "
          f"{lock_lost_in:.1f}s, a new lease refused (Unconfirmed) in {refused_in:.1f}s")
