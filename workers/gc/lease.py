"""One GC per repository at a time, held as a short lease that the run's starter renews while it lives.

A run takes its repository's lease key (``GCRuns.lease``) for ``lease_seconds`` and renews it every ``renew`` seconds from a
thread of the process that started it (the CLI, the Celery worker). Whoever deletes checks before each batch
that the run still holds it and that the starter renewed it lately (``spark_jobs.engine.sweep.lease_watch``), so:

- a starter that dies frees the repository within ``lease_seconds``, or at once for the next run on the same
  host, which can see that the holder's process is gone;
- a Spark driver left behind by a dead starter stops deleting within ``stale`` seconds;
- a run that died is reported by the next one (history and ``gc_failures_total{reason="died"}``), from the
  holder record each run leaves beside the lease until it ends.

With replicas to wait for (``durability``: ``Settings.redis_durability``, 1 with Sentinel), the lease is taken and
renewed only once that many replicas acknowledged it, and the deleters confirm it the same way: a primary that hung
and resumed after the Sentinels promoted its replica can neither give a run a lease nor keep one alive beside a
run holding it on the new primary. A lease that cannot be confirmed is not taken (``Unconfirmed``: the run does not
start); renewals that cannot be confirmed for ``stale`` seconds count as lost, the deleters' own rule.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import threading
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import redis

from spark_jobs.engine.runtime.redis_ack import Acknowledged, eval_acknowledged, unconfirmed
from spark_jobs.engine.sweep.lease_watch import LeaseRef
from workers.shared.locks import TAKE_LUA, Unconfirmed

log = logging.getLogger(__name__)
HOLDER_DAYS = 30  # a holder record outlives any run; the next run of the repository reads and replaces it

# KEYS: lease. ARGV: token, ms. Renew only our own lease: 1 renewed, 0 lost.
RENEW_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end
return 0"""
# KEYS: lease, holder. ARGV: token. Release only our own lease and holder record.
RELEASE_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
local h = redis.call('GET', KEYS[2])
if h and cjson.decode(h)['token'] == ARGV[1] then redis.call('DEL', KEYS[2]) end
return 1"""
# KEYS: lease. ARGV: the dead holder's token, our token, ms. Take over a lease whose holder is known to be dead (or
# that is ours already: an attempt that timed out may have taken it over). Taking a free lease is TAKE_LUA.
TAKEOVER_LUA = """
local held = redis.call('GET', KEYS[1])
if held == ARGV[1] or held == ARGV[2] then redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) return 1 end
return 0"""


class Busy(RuntimeError):
    """Another GC of the repository holds its lease."""


@dataclass(frozen=True)
class Holder:
    """Who runs (or ran) a repository's GC: enough to tell, on the same host, whether that process still lives."""

    token: str
    host: str
    pid: int
    process_start: str | None  # /proc/<pid>/stat's start time: a reused pid is another process
    boot_id: str | None
    pid_namespace: str | None  # containers sharing a host name but not their processes
    started_at: str
    mode: str = "run"

    @classmethod
    def parse(cls, raw: bytes | str | None) -> Holder | None:
        if not raw:
            return None
        try:
            data = json.loads(raw)
            return cls(**{k: data.get(k) for k in cls.__dataclass_fields__})
        except (ValueError, TypeError):
            return None  # a record we cannot read names nobody; the lease alone decides

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}, started {self.started_at}"


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _process_start(pid: int) -> str | None:
    stat = _read(f"/proc/{pid}/stat")
    if stat is None:
        return None
    return stat.rsplit(")", 1)[-1].split()[19]  # field 22, counted after the command name


def _pid_namespace() -> str | None:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def this_process(token: str, mode: str) -> Holder:
    pid = os.getpid()
    return Holder(token=token, host=socket.gethostname(), pid=pid, process_start=_process_start(pid),
                  boot_id=_read("/proc/sys/kernel/random/boot_id"), pid_namespace=_pid_namespace(),
                  started_at=datetime.now(UTC).isoformat(timespec="seconds"), mode=mode)


def known_dead(holder: Holder) -> bool:
    """True only when the holder ran in this very process space (host, boot, pid namespace) and its process is
    gone or is another one now. Anything unsure (another host, no /proc) is left to the lease's expiry."""
    me = this_process("", "")
    if None in (holder.boot_id, holder.pid_namespace, holder.process_start, me.boot_id, me.pid_namespace):
        return False
    if (holder.host, holder.boot_id, holder.pid_namespace) != (me.host, me.boot_id, me.pid_namespace):
        return False
    return _process_start(holder.pid) != holder.process_start


def url_of(client: redis.Redis) -> str:
    """A URL for the connection a client was made with (the deleters open their own)."""
    kw = client.connection_pool.connection_kwargs
    auth = ""
    if kw.get("password"):
        from urllib.parse import quote  # noqa: PLC0415

        auth = f"{quote(kw.get('username') or '', safe='')}:{quote(kw['password'], safe='')}@"
    if kw.get("path"):
        return f"unix://{auth}{kw['path']}?db={kw.get('db', 0)}"
    scheme = "rediss" if "SSL" in client.connection_pool.connection_class.__name__ else "redis"
    return f"{scheme}://{auth}{kw.get('host', 'localhost')}:{kw.get('port', 6379)}/{kw.get('db', 0)}"


class RunLease:
    """The lease of one run. ``acquire`` returns the holder of a previous run that died without ending (to be
    reported), or None; ``release`` ends it. Between the two a thread renews it."""

    def __init__(self, client: redis.Redis, repository_id: str, *, keys: tuple[str, str], lease_seconds: float,
                 url: str | None = None, durability: Acknowledged | None = None) -> None:
        self.client, self.repository_id = client, repository_id
        self.key, self.holder_key = keys  # the lease, and the record of who holds it
        self.lease_ms = int(lease_seconds * 1000)
        self.renew_seconds = max(0.2, min(2.0, lease_seconds / 10))
        self.stale_ms = int(self.renew_seconds * 5 * 1000)
        self.url = url
        self.durability = durability if durability is not None and durability.replicas else None
        self.token = secrets.token_hex(16)
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def ref(self) -> LeaseRef:
        acks = self.durability
        return LeaseRef(self.url or url_of(self.client), self.key, self.token, self.lease_ms, self.stale_ms,
                        replica_acks=acks.replicas if acks else 0,
                        confirm_seconds=acks.budget_seconds if acks else LeaseRef.confirm_seconds)

    def acquire(self, mode: str = "run") -> Holder | None:
        """Raises ``Busy`` when another run holds the lease, ``Unconfirmed`` when replicas did not acknowledge it."""
        me = this_process(self.token, mode)
        previous = Holder.parse(self.client.get(self.holder_key))
        if not self._take(TAKE_LUA, self.token, self.lease_ms):
            current = self.client.get(self.key)
            current = current.decode() if isinstance(current, bytes) else current
            if previous is None or previous.token != current or not known_dead(previous) or not self._take(
                    TAKEOVER_LUA, previous.token, self.token, self.lease_ms):
                raise Busy(self._busy_message(previous if previous and previous.token == current else None))
            log.warning("gc lakefs://%s: the run of %s died; its lease is taken over", self.repository_id,
                        previous.describe())
        self.client.set(self.holder_key, json.dumps(asdict(me)), ex=HOLDER_DAYS * 86400)
        self._thread = threading.Thread(target=self._renew, name=f"gc-lease-{self.repository_id}", daemon=True)
        self._thread.start()
        return previous if previous is not None and previous.token != self.token else None

    def _take(self, script: str, *args: str | int) -> bool:
        try:
            return bool(eval_acknowledged(self.client, script, (self.key,), args=args,
                                          durability=self.durability))
        except redis.RedisError as exc:
            if self.durability is None:
                raise
            self._forget()
            if not unconfirmed(exc):
                raise
            raise Unconfirmed(f"the GC lease of lakefs://{self.repository_id} could not be confirmed ({exc}; Redis "
                              "failing over, or no replica in sync): not taken, the run did not start; try again "
                              "later") from None

    def _forget(self) -> None:
        """Best effort: an attempt that ran but was not confirmed leaves no lease for the next run to wait out."""
        try:
            self.client.eval(RELEASE_LUA, 2, self.key, self.holder_key, self.token)
        except redis.RedisError:
            pass  # it expires by itself

    def _busy_message(self, holder: Holder | None) -> str:
        ttl = self.client.pttl(self.key)
        who = f" ({holder.describe()})" if holder else ""
        frees = f"; if it died, the repository is free within {max(ttl, 0) / 1000:.0f}s" if ttl and ttl > 0 else ""
        return f"another GC of lakefs://{self.repository_id} is running{who}{frees}; try again later"

    def _renew(self) -> None:
        confirmed = time.monotonic()
        while not self._stop.wait(self.renew_seconds):
            try:
                renewed = eval_acknowledged(self.client, RENEW_LUA, (self.key,),
                                            args=(self.token, self.lease_ms), durability=self.durability)
            except redis.RedisError as exc:  # the deleters stop once renewals are stale; keep trying until then
                silent = time.monotonic() - confirmed
                if self.durability is not None and silent * 1000 > self.stale_ms:
                    # Not confirmed is not renewed: stale, by the rule the deleters apply (LeaseWatch.check).
                    log.error("gc lakefs://%s: no renewal of its lease confirmed for %.1fs (%s): it counts as "
                              "lost; its deletions stop", self.repository_id, silent, exc)
                    self.lost.set()
                    return
                log.warning("gc lakefs://%s: renewing the lease failed: %s", self.repository_id, exc)
                continue
            if not renewed:
                log.error("gc lakefs://%s lost its lease; its deletions stop", self.repository_id)
                self.lost.set()
                return
            confirmed = time.monotonic()

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        try:
            self.client.eval(RELEASE_LUA, 2, self.key, self.holder_key, self.token)
        except redis.RedisError as exc:  # the lease expires by itself; the next run reports nothing wrong
            log.warning("gc lakefs://%s: releasing the lease failed (it expires by itself): %s",
                        self.repository_id, exc)
