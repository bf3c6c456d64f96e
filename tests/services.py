"""Real services on 127.0.0.1 for tests and the local demo: redis-server, lakeFS, the receiver, a Celery worker,
and the object stores lakeFS and the GC run on (versitygw for S3, Azurite, fake-gcs-server, lakeFS's local store),
with a FaultProxy to put in front of a store (throttling answers, stalls, dropped connections, the store gone).

Each is a subprocess on a free port with its state in a temporary directory, stopped and removed by ``stop()``.
"""

from __future__ import annotations

import functools
import http.client
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

import redis
import requests
import yaml

ROOT = Path(__file__).resolve().parent.parent
ADMIN_ACCESS_KEY = "AKIAIOSFOLKJANITOR1"
ADMIN_SECRET_KEY = "janitor-test-secret-key-0123456789abcdef"  # a throwaway key for a throwaway server
WEBHOOK_SECRET = "janitor-webhook-test-secret"
# gcsfs (imported through fsspec's "gs" protocol) otherwise first probes a gRPC API for each bucket's type, which
# fails TLS against fake-gcs-server only after a 60 s timeout. Read when gcsfs is first imported: set it here, early.
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(check: Callable[[], bool], timeout: float, what: str, proc: subprocess.Popen | None = None,
               log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            tail = log.read_text()[-3000:] if log and log.exists() else ""
            raise RuntimeError(f"{what} exited with {proc.returncode}:\n{tail}")
        try:
            if check():
                return
        except (OSError, requests.RequestException):
            pass
        time.sleep(0.1)
    tail = log.read_text()[-3000:] if log and log.exists() else ""
    raise RuntimeError(f"{what} did not become ready in {timeout}s\n{tail}")


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def stop_on_sigterm() -> None:
    """SIGTERM (a CI runner's cancel, a person's kill) as Ctrl-C: what started these services still runs its
    teardown (pytest's fixtures, a benchmark's ``finally``) and stops them. Each runs in a session of its own, so
    nothing else would: SIGTERM's default ends the process at once and they live on."""
    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        signal.signal(signal.SIGTERM, _interrupted)


class Service:
    name = "service"

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=f"lakefs-janitor-{self.name}-"))
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.log = self.dir / f"{self.name}.log"

    def _spawn(self, args: list[str], env: dict[str, str] | None = None, cwd: Path = ROOT) -> None:
        out = open(self.log, "ab")  # noqa: SIM115 - owned by the child for its lifetime
        self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                     start_new_session=True)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        self.proc = None

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class RedisServer(Service):
    """``durable``: every write in an append-only file before it is answered, so what was written survives a
    SIGKILL and a ``start()`` again on the same port (a Redis restarted by its supervisor)."""

    name = "redis"

    def __init__(self, durable: bool = False) -> None:
        super().__init__()
        self.durable = durable

    def start(self) -> RedisServer:
        binary = shutil.which("redis-server")
        if not binary:
            raise RuntimeError("redis-server is not installed (Debian package redis-server); run scripts/install.sh")
        persistence = ["--appendonly", "yes", "--appendfsync", "always"] if self.durable else ["--appendonly", "no"]
        self._spawn([binary, "--bind", "127.0.0.1", "--port", str(self.port), "--dir", str(self.dir),
                     "--save", "", *persistence, "--protected-mode", "yes"])
        wait_until(self._ping, 15, "redis-server", self.proc, self.log)
        return self

    def _ping(self) -> bool:
        with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


class RedisNode(Service):
    """One redis-server of a replicated pair, with a password; ``replica_of`` a port on 127.0.0.1."""

    name = "redis-node"

    def __init__(self, password: str, replica_of: int | None = None) -> None:
        super().__init__()
        self.password, self.replica_of = password, replica_of

    def start(self) -> RedisNode:
        binary = shutil.which("redis-server")
        if not binary:
            raise RuntimeError("redis-server is not installed (Debian package redis-server); run scripts/install.sh")
        replica = ["--replicaof", "127.0.0.1", str(self.replica_of)] if self.replica_of else []
        self._spawn([binary, "--bind", "127.0.0.1", "--port", str(self.port), "--dir", str(self.dir), "--save", "",
                     "--appendonly", "no", "--requirepass", self.password, "--masterauth", self.password,
                     *replica])
        wait_until(lambda: self.client().ping(), 15, "redis-server", self.proc, self.log)
        return self

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password, socket_timeout=2)

    def kill(self) -> None:
        """SIGKILL: no shutdown, no last write flushed to the replica."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)
        self.proc = None


class SentinelNode(Service):
    name = "sentinel"

    def __init__(self, master: str, primary_port: int, password: str, sentinel_password: str) -> None:
        super().__init__()
        self.password = sentinel_password
        # Fast failover for tests: the primary is "down" after 2 s of silence, two Sentinels agreeing. Not 1 s: a
        # Sentinel that switches to a new primary sends it a first PING only after its ping period (1 s) and judges
        # it down once 1 s passed without an answer, both counted from the switch; at 1 s it could mark the primary
        # it had just named as down and, with another Sentinel of the same view, fail over again to the node just
        # restarted and not yet in sync, losing what the first primary had acknowledged (seen in CI: a task queued
        # after the switch never ran).
        (self.dir / "sentinel.conf").write_text(
            f"port {self.port}\nbind 127.0.0.1\ndir {self.dir}\nrequirepass {sentinel_password}\n"
            f"sentinel sentinel-pass {sentinel_password}\n"
            f"sentinel monitor {master} 127.0.0.1 {primary_port} 2\nsentinel auth-pass {master} {password}\n"
            f"sentinel down-after-milliseconds {master} 2000\nsentinel failover-timeout {master} 4000\n"
            f"sentinel parallel-syncs {master} 1\n")

    def start(self) -> SentinelNode:
        self._spawn([shutil.which("redis-server") or "redis-server", str(self.dir / "sentinel.conf"), "--sentinel"])
        wait_until(lambda: self.client().ping(), 15, "redis sentinel", self.proc, self.log)
        return self

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password, socket_timeout=2)


class RedisSentinelCluster:
    """A primary, a replica and three Sentinels on 127.0.0.1, every one with a password (the Sentinels their own):
    Redis as a highly-available deployment runs it. ``failover()`` SIGKILLs the primary and returns once the
    Sentinels name the replica instead; the killed node comes back as the new replica."""

    master = "janitor"

    def __init__(self, password: str = "redis-test-pw", sentinel_password: str = "sentinel-test-pw") -> None:
        self.password, self.sentinel_password = password, sentinel_password
        self.nodes: list[RedisNode] = []
        self.sentinels: list[SentinelNode] = []

    def start(self) -> RedisSentinelCluster:
        primary = RedisNode(self.password).start()
        self.nodes = [primary, RedisNode(self.password, replica_of=primary.port).start()]
        self.sentinels = [SentinelNode(self.master, primary.port, self.password, self.sentinel_password).start()
                          for _ in range(3)]
        self.wait_healthy()
        return self

    @property
    def url(self) -> str:
        """LAKEFS_JANITOR_REDIS_URL: Celery's form, the Redis password in the first part."""
        hosts = [f"127.0.0.1:{s.port}/0" for s in self.sentinels]
        return ";".join(f"sentinel://{':' + quote(self.password) + '@' if i == 0 else ''}{h}"
                        for i, h in enumerate(hosts))

    def env(self) -> dict[str, str]:
        return {"LAKEFS_JANITOR_REDIS_URL": self.url, "LAKEFS_JANITOR_REDIS_SENTINEL_MASTER": self.master,
                "LAKEFS_JANITOR_REDIS_SENTINEL_PASSWORD": self.sentinel_password}

    def primary_port(self) -> int:
        for sentinel in self.sentinels:
            try:
                return int(sentinel.client().sentinel_get_master_addr_by_name(self.master)[1])
            except (redis.RedisError, TypeError):
                continue
        raise RuntimeError("no Sentinel answers")

    def primary(self) -> RedisNode:
        port = self.primary_port()
        return next(n for n in self.nodes if n.port == port)

    def replica(self) -> RedisNode:
        port = self.primary_port()
        return next(n for n in self.nodes if n.port != port)

    def wait_healthy(self, timeout: float = 30) -> None:
        """Every Sentinel agrees on the primary, knows the other two and a replica that is in sync."""
        def healthy() -> bool:
            port = self.primary_port()
            for sentinel in self.sentinels:
                c = sentinel.client()
                info = c.sentinel_master(self.master)
                if int(info["port"]) != port or int(info["num-other-sentinels"]) < 2 or \
                        int(info["num-slaves"]) < 1 or "s_down" in info.get("flags", "") + str(info.get("flags")):
                    return False
                if not any(r.get("master-link-status") == "ok" and "s_down" not in str(r.get("flags"))
                           for r in c.sentinel_slaves(self.master)):
                    return False
            repl = self.replica().client().info("replication")
            return repl.get("master_link_status") == "up"
        wait_until(lambda: _quiet(healthy), timeout, "redis sentinel cluster")

    def failover(self, timeout: float = 30) -> RedisNode:
        """SIGKILL the primary; return the killed node once the Sentinels name another primary."""
        old = self.primary()
        old.kill()
        # Every Sentinel names the new primary, and it answers as one (the promotion done)
        wait_until(lambda: _quiet(lambda: self._switched(old.port)), timeout, "sentinel failover")
        return old

    def cut_replica(self) -> RedisNode:
        """From now on the primary's writes reach no replica (it is frozen, its link dropped): a failover then
        loses them, as one does when the replica is promoted before it caught up."""
        replica, primary = self.replica(), self.primary()
        os.killpg(replica.proc.pid, signal.SIGSTOP)
        primary.client().client_kill_filter(_type="replica")
        return replica

    def failover_losing(self, replica: RedisNode, timeout: float = 30) -> RedisNode:
        """SIGKILL the primary, thaw the cut replica; return the killed node once the replica is the primary."""
        old = self.primary()
        old.kill()
        os.killpg(replica.proc.pid, signal.SIGCONT)
        wait_until(lambda: _quiet(lambda: self._switched(old.port)), timeout, "sentinel failover")
        return old

    def freeze(self, timeout: float = 30) -> RedisNode:
        """SIGSTOP the primary (a VM pause, a partition, a long fork look the same); return it once the Sentinels
        have promoted another node. Its sockets stay open: clients hang on it instead of failing."""
        old = self.stop_primary()
        self.wait_promoted(old, timeout)
        return old

    def stop_primary(self) -> RedisNode:
        """``freeze``'s first half: SIGSTOP the primary and return it at once, before the Sentinels notice."""
        old = self.primary()
        os.killpg(old.proc.pid, signal.SIGSTOP)
        return old

    def wait_promoted(self, old: RedisNode, timeout: float = 30) -> None:
        """``freeze``'s second half: every Sentinel names another primary than ``old``, and it answers as one."""
        wait_until(lambda: _quiet(lambda: self._switched(old.port)), timeout, "sentinel failover")

    def thaw(self, node: RedisNode) -> None:
        os.killpg(node.proc.pid, signal.SIGCONT)

    def demoted(self, node: RedisNode) -> bool:
        """The old primary is a replica again, in sync with the new one."""
        return _quiet(lambda: (info := node.client().info("replication"))["role"] == "slave"
                      and info.get("master_link_status") == "up")

    def _switched(self, old_port: int) -> bool:
        ports = {int(s.client().sentinel_get_master_addr_by_name(self.master)[1]) for s in self.sentinels}
        if len(ports) != 1 or old_port in ports:
            return False
        node = next(n for n in self.nodes if n.port in ports)
        return node.client().info("replication")["role"] == "master"

    def restore(self, node: RedisNode) -> None:
        """Restart a killed node on its port (the Sentinels make it a replica of the new primary); wait for sync."""
        node.replica_of = self.primary_port()
        node.start()
        self.wait_healthy()

    def heal(self) -> None:
        """Whatever a test left (a node killed, one frozen): every node up again and in sync."""
        for node in self.nodes:
            if node.proc is not None and node.proc.poll() is None:
                os.killpg(node.proc.pid, signal.SIGCONT)
        for node in self.nodes:
            if node.proc is None or node.proc.poll() is not None:
                node.proc = None
                self.restore(node)
        self.wait_healthy()

    def cleanup(self) -> None:
        for service in (*self.sentinels, *self.nodes):
            service.cleanup()


def _quiet(check: Callable[[], bool]) -> bool:
    try:
        return check()
    except (redis.RedisError, StopIteration, KeyError, ValueError):
        return False


def lakefs_binary() -> str:
    if os.environ.get("LAKEFS_BIN"):
        return os.environ["LAKEFS_BIN"]
    out = subprocess.run([str(ROOT / "scripts" / "build-lakefs.sh")], check=True, capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1]


class LakeFSServer(Service):
    name = "lakefs"

    def __init__(self, extra_env: dict[str, str] | None = None, store: Store | None = None) -> None:
        super().__init__()
        self.extra_env = extra_env or {}
        self.import_dir = self.dir / "import"
        # Default: the local blockstore in the server's own folder, imports allowed from import_dir.
        self.store = store or LocalStore(self.dir / "block", self.import_dir)

    def blockstore(self) -> dict:
        return self.store.lakefs_blockstore()

    def config(self) -> dict:
        d = self.dir
        return {
            "listen_address": f"127.0.0.1:{self.port}",
            "logging": {"level": "INFO", "format": "text", "output": str(d / "lakefs-server.log")},
            "database": {"type": "local", "local": {"path": str(d / "db")}},
            "blockstore": self.blockstore(),
            "committed": {"local_cache": {"dir": str(d / "cache")}},
            "auth": {"encrypt": {"secret_key": "janitor-test-encrypt-secret"}},
            "installation": {"user_name": "admin", "access_key_id": ADMIN_ACCESS_KEY,
                             "secret_access_key": ADMIN_SECRET_KEY},
            "stats": {"enabled": False},
            "email_subscription": {"enabled": False},
            "security": {"check_latest_version": False},
        }

    def start(self) -> LakeFSServer:
        self.import_dir.mkdir(exist_ok=True)  # a restart keeps the server's folder, database and port
        cfg = self.dir / "lakefs.yaml"
        cfg.write_text(yaml.safe_dump(self.config()))
        env = {**os.environ, **self.store.lakefs_env(), **self.extra_env}
        env = {k: v for k, v in env.items() if not k.startswith("LAKEFS_")}  # only our config file counts
        # In its own folder: each GC prepare call leaves a gc.db/ (with a 2 GiB sparse file) in the working directory.
        self._spawn([lakefs_binary(), "run", "--local-settings", "-c", str(cfg)], env, cwd=self.dir)
        wait_until(lambda: requests.get(f"{self.endpoint}/api/v1/healthcheck", timeout=1).status_code == 204,
                   90, "lakeFS", self.proc, self.dir / "lakefs-server.log")
        return self

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def lakectl_env(self) -> dict[str, str]:
        return {
            "LAKECTL_SERVER_ENDPOINT_URL": self.endpoint,
            "LAKECTL_CREDENTIALS_ACCESS_KEY_ID": ADMIN_ACCESS_KEY,
            "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY": ADMIN_SECRET_KEY,
        }


def janitor_env(lakefs: LakeFSServer, redis_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAKEFS_JANITOR_", "LAKECTL_"))}
    env.update(lakefs.lakectl_env())
    env["LAKECTL_CONFIG_FILE"] = os.devnull  # never read the developer's own ~/.lakectl.yaml
    env["LAKEFS_JANITOR_REDIS_URL"] = redis_url
    env["LAKEFS_JANITOR_WEBHOOK_SECRET"] = WEBHOOK_SECRET
    # No LAKEFS_JANITOR_GC__LOCAL_BLOCKSTORE_PATH: on the local blockstore the GC learns the folder from lakeFS.
    # The GC's range cache in the session's own folder, not the home's ~/.cache (removed with lakeFS's folder)
    env["LAKEFS_JANITOR_GC__RANGE_CACHE_FOLDER"] = str(lakefs.dir / "range-cache")
    env.update(extra)
    return env


class ReceiverServer(Service):
    """The real receiver: `lakefs-janitor serve` (gunicorn)."""

    name = "receiver"

    def __init__(self, env: dict[str, str], workers: int = 2) -> None:
        super().__init__()
        self.env = {**env, "PROMETHEUS_MULTIPROC_DIR": str(self.dir / "metrics")}
        self.workers = workers

    def start(self) -> ReceiverServer:
        self._spawn([sys.executable, "-m", "workers.cli", "serve", "--bind", f"127.0.0.1:{self.port}",
                     "--workers", str(self.workers)], self.env)
        wait_until(lambda: requests.get(f"{self.url}/metrics", timeout=1).status_code == 200,
                   30, "receiver", self.proc, self.log)
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


class CeleryWorker(Service):
    """A real Celery worker process (`celery -A workers.celery.worker worker`)."""

    name = "celery"

    def __init__(self, env: dict[str, str], queues: str = "celery", *, beat: bool = False) -> None:
        super().__init__()
        self.env = env
        self.queues = queues
        self.beat = beat  # embed beat (-B), its schedule file in the worker's own folder

    def start(self) -> CeleryWorker:
        beat = ["-B", "--schedule", str(self.dir / "beat-schedule")] if self.beat else []
        self._spawn([sys.executable, "-m", "celery", "-A", "workers.celery.worker", "worker", "--pool", "threads",
                     "--concurrency", "4", "--loglevel", "INFO", "-Q", self.queues, *beat,
                     "--hostname", f"janitor-test-{self.port}@%h", "--without-mingle", "--without-gossip"], self.env)
        wait_until(lambda: b"ready." in self.log.read_bytes(), 60, "celery worker", self.proc, self.log)
        return self


class CeleryBeat(Service):
    """Celery beat on its own (`celery -A workers.celery.worker beat`), as every deploy runs it."""

    name = "celery-beat"

    def __init__(self, env: dict[str, str]) -> None:
        super().__init__()
        self.env = env

    def start(self) -> CeleryBeat:
        self._spawn([sys.executable, "-m", "celery", "-A", "workers.celery.worker", "beat", "--loglevel", "INFO",
                     "--schedule", str(self.dir / "beat-schedule")], self.env)
        wait_until(lambda: b"beat: Starting" in self.log.read_bytes(), 60, "celery beat", self.proc, self.log)
        return self


# ---- Object stores: lakeFS's blockstore and the GC's storage, each reached through fsspec ----

AZURITE_ACCOUNT = "devstoreaccount1"
# Azurite's public, documented development key (the same in every Azurite): not a secret.
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


@functools.cache
def _built_stores() -> dict[str, str]:
    out = subprocess.run([str(ROOT / "scripts" / "build-stores.sh")], check=True, capture_output=True, text=True)
    return dict(line.split(" ", 1) for line in out.stdout.strip().splitlines())


def store_binary(name: str, env_var: str) -> str:
    """A server of scripts/build-stores.sh (built once, cached), or the executable the env var names."""
    return os.environ.get(env_var) or _built_stores()[name]


def _answers(url: str) -> bool:
    """Any HTTP answer (even 403 to an unsigned request) means the server is up."""
    requests.get(url, timeout=1)
    return True


class Store:
    """What every object store of the tests offers, lakeFS's local blockstore included, so a test can be
    parametrized over all of them. ``endpoint=`` (where taken) points the client at another address of the same
    store, e.g. a ThrottlingProxy in front of it."""

    kind = ""  # "local" | "s3" | "azure" | "gcs"

    def start(self) -> Store:
        return self

    def cleanup(self) -> None:
        pass

    def lakefs_blockstore(self) -> dict:
        """lakeFS's ``blockstore:`` config for this store."""
        raise NotImplementedError

    def lakefs_env(self) -> dict[str, str]:
        """Extra environment lakeFS needs to reach the store."""
        return {}

    def namespace(self, repo: str) -> str:
        """The storage namespace to create repository ``repo`` with (its bucket or container created first)."""
        raise NotImplementedError

    def fsspec_protocol(self) -> str:
        raise NotImplementedError

    def fsspec_options(self, endpoint: str | None = None) -> dict:
        """Exactly the keyword arguments of ``fsspec.filesystem(self.fsspec_protocol(), **options)``."""
        raise NotImplementedError

    def fsspec_path(self, namespace: str, key: str = "") -> str:
        """The fsspec path of ``key`` inside ``namespace`` (``bucket/prefix/key`` for the clouds)."""
        root = namespace.split("://", 1)[1]
        if self.kind == "azure":  # https://<account>.blob.core.windows.net/<container>/<prefix>
            root = root.split("/", 1)[1]
        return f"{root.rstrip('/')}/{key}" if key else root.rstrip("/")

    def filesystem(self, endpoint: str | None = None):
        """A fresh fsspec filesystem (no instance or listing cache carried over from an earlier one)."""
        import fsspec  # noqa: PLC0415

        return fsspec.filesystem(self.fsspec_protocol(), skip_instance_cache=True,
                                 **self.fsspec_options(endpoint))

    def janitor_env(self, endpoint: str | None = None) -> dict[str, str]:
        """The LAKEFS_JANITOR_GC__* variables the janitor needs to reach the store."""
        return {}

    def backdate(self, key: str, namespace: str, seconds: float) -> None:
        """Make object ``key`` of ``namespace`` look ``seconds`` old (modification time = now - seconds)."""
        raise NotImplementedError(f"{self.kind}: the store offers no way to backdate an object")


class LocalStore(Store):
    """lakeFS's local blockstore: a folder; namespace ``local://<name>`` is ``<root>/<name>``."""

    kind = "local"

    def __init__(self, root: Path | None = None, import_dir: Path | None = None) -> None:
        self._own = root is None and import_dir is None
        base = Path(tempfile.mkdtemp(prefix="lakefs-janitor-local-")) if self._own else None
        self.root = root or base / "block"
        self.import_dir = import_dir or base / "import"
        self._base = base

    def cleanup(self) -> None:
        if self._own:
            shutil.rmtree(self._base, ignore_errors=True)

    def lakefs_blockstore(self) -> dict:
        return {"type": "local", "local": {"path": str(self.root), "import_enabled": True,
                                           "allowed_external_prefixes": [str(self.import_dir)]}}

    def namespace(self, repo: str) -> str:
        return f"local://{repo}"

    def fsspec_protocol(self) -> str:
        return "file"

    def fsspec_options(self, endpoint: str | None = None) -> dict:
        return {}

    def fsspec_path(self, namespace: str, key: str = "") -> str:
        path = self.root / namespace.removeprefix("local://")
        return str(path / key) if key else str(path)

    def backdate(self, key: str, namespace: str, seconds: float) -> None:
        when = time.time() - seconds
        os.utime(self.fsspec_path(namespace, key), (when, when))


class VersityGW(Service, Store):
    """S3: versitygw's posix backend; objects are plain files ``<dir>/data/<bucket>/<key>``."""

    name = "versitygw"
    kind = "s3"
    access_key = "janitor-versitygw-key"
    secret_key = "janitor-versitygw-secret"  # throwaway root credentials of a throwaway server
    region = "us-east-1"

    def __init__(self, max_requests: int | None = None, bucket: str = "janitor", *, versioning: bool = False,
                 keep_alive: bool = False) -> None:
        super().__init__()
        self.max_requests = max_requests
        self.bucket = bucket
        # versitygw answers every request with "Connection: close" unless told otherwise; S3 keeps connections open,
        # so the benchmarks ask for that (a HEAD then costs the client no socket set-up: 1.7 -> 1.2 ms of CPU)
        self.keep_alive = keep_alive
        self.versioning = versioning  # buckets may turn versioning on (PutBucketVersioning); lifecycle: NotImplemented
        self._buckets: set[str] = set()

    def start(self) -> VersityGW:
        (self.dir / "iam").mkdir()
        (self.dir / "data").mkdir()
        limit = ["--max-requests", str(self.max_requests)] if self.max_requests else []
        limit += ["--keep-alive"] if self.keep_alive else []
        versions = []
        if self.versioning:  # beside the data folder: versitygw refuses one inside it
            (self.dir / "versions").mkdir()
            versions = ["--versioning-dir", str(self.dir / "versions")]
        env = {**os.environ, "ROOT_ACCESS_KEY": self.access_key, "ROOT_SECRET_KEY": self.secret_key}
        self._spawn([store_binary("versitygw", "VERSITYGW_BIN"), "--port", f"127.0.0.1:{self.port}",
                     "--iam-dir", str(self.dir / "iam"), "--quiet", *limit, "posix", *versions,
                     str(self.dir / "data")], env)
        wait_until(lambda: _answers(self.endpoint), 30, "versitygw", self.proc, self.log)
        return self

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self, endpoint: str | None = None, **config):
        """A boto3 S3 client; ``config`` goes to botocore's Config (e.g. ``retries={"total_max_attempts": 1}``)."""
        import boto3  # noqa: PLC0415
        from botocore.config import Config  # noqa: PLC0415

        return boto3.client("s3", endpoint_url=endpoint or self.endpoint, region_name=self.region,
                            aws_access_key_id=self.access_key, aws_secret_access_key=self.secret_key,
                            config=Config(s3={"addressing_style": "path"}, **config))

    def create_bucket(self, name: str) -> None:
        if name not in self._buckets:
            self.client().create_bucket(Bucket=name)
            self._buckets.add(name)

    def lakefs_blockstore(self) -> dict:
        return {"type": "s3", "s3": {
            "endpoint": self.endpoint, "force_path_style": True, "region": self.region,
            "credentials": {"access_key_id": self.access_key, "secret_access_key": self.secret_key}}}

    def namespace(self, repo: str) -> str:
        self.create_bucket(self.bucket)
        return f"s3://{self.bucket}/{repo}"

    def fsspec_protocol(self) -> str:
        return "s3"

    def fsspec_options(self, endpoint: str | None = None) -> dict:
        return {"key": self.access_key, "secret": self.secret_key,
                "client_kwargs": {"endpoint_url": endpoint or self.endpoint, "region_name": self.region}}

    def janitor_env(self, endpoint: str | None = None) -> dict[str, str]:
        return {"LAKEFS_JANITOR_GC__S3_ENDPOINT_URL": endpoint or self.endpoint,
                "LAKEFS_JANITOR_GC__S3_REGION": self.region,
                "LAKEFS_JANITOR_GC__S3_ACCESS_KEY_ID": self.access_key,
                "LAKEFS_JANITOR_GC__S3_SECRET_ACCESS_KEY": self.secret_key}

    def backdate(self, key: str, namespace: str, seconds: float) -> None:
        # Last-Modified is the file's mtime.
        when = time.time() - seconds
        os.utime(self.dir / "data" / self.fsspec_path(namespace, key), (when, when))


class Azurite(Service, Store):
    """Azure Blob: azurite-blob, account devstoreaccount1 with its well-known key."""

    name = "azurite"
    kind = "azure"

    def __init__(self, container: str = "janitor") -> None:
        super().__init__()
        self.container = container
        self._containers: set[str] = set()

    def start(self) -> Azurite:
        self._spawn([store_binary("azurite-blob", "AZURITE_BLOB_BIN"), "--blobHost", "127.0.0.1",
                     "--blobPort", str(self.port), "--location", str(self.dir / "data"),
                     # the SDK's API version may be newer than Azurite knows; telemetry: a closed network
                     "--skipApiVersionCheck", "--silent", "--disableTelemetry"])
        wait_until(lambda: _answers(self.endpoint), 60, "azurite", self.proc, self.log)
        return self

    @property
    def endpoint(self) -> str:
        """The blob endpoint: the account is the first path segment (Azurite's path-style addressing)."""
        return f"http://127.0.0.1:{self.port}/{AZURITE_ACCOUNT}"

    def connection_string(self, endpoint: str | None = None) -> str:
        return (f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
                f"BlobEndpoint={endpoint or self.endpoint};")

    def container_client(self, container: str | None = None, endpoint: str | None = None, **kwargs):
        """azure-storage-blob's ContainerClient (``kwargs`` e.g. ``retry_policy=``)."""
        from azure.storage.blob import ContainerClient  # noqa: PLC0415

        return ContainerClient.from_connection_string(self.connection_string(endpoint),
                                                      container or self.container, **kwargs)

    def create_container(self, name: str) -> None:
        if name not in self._containers:
            with self.container_client(name) as client:
                client.create_container()
            self._containers.add(name)

    def lakefs_blockstore(self) -> dict:
        # lakeFS sends every request to test_endpoint_url; storage_account must be the namespace's account, or
        # lakeFS drops the key and falls back to default Azure credentials.
        return {"type": "azure", "azure": {"storage_account": AZURITE_ACCOUNT, "storage_access_key": AZURITE_KEY,
                                           "test_endpoint_url": self.endpoint}}

    def namespace(self, repo: str) -> str:
        # lakeFS reads the account from the host's first label and the container from the first path segment.
        self.create_container(self.container)
        return f"https://{AZURITE_ACCOUNT}.blob.core.windows.net/{self.container}/{repo}"

    def fsspec_protocol(self) -> str:
        return "az"

    def fsspec_options(self, endpoint: str | None = None) -> dict:
        # A connection string is adlfs's only way to an http:// endpoint (account_host means https://).
        return {"connection_string": self.connection_string(endpoint)}

    def janitor_env(self, endpoint: str | None = None) -> dict[str, str]:
        return {"LAKEFS_JANITOR_GC__AZURE_CONNECTION_STRING": self.connection_string(endpoint),
                "LAKEFS_JANITOR_GC__AZURE_ACCOUNT_NAME": AZURITE_ACCOUNT,
                "LAKEFS_JANITOR_GC__AZURE_ACCOUNT_KEY": AZURITE_KEY,
                "LAKEFS_JANITOR_GC__AZURE_ENDPOINT_URL": endpoint or self.endpoint}

    def backdate(self, key: str, namespace: str, seconds: float) -> None:
        raise NotImplementedError("Azurite sets Last-Modified itself and keeps it in its own database (LokiJS); "
                                  "no API or file changes it while it runs")


class FakeGCS(Service, Store):
    """GCS: fake-gcs-server, filesystem backend; objects are files ``<dir>/data/<bucket>/<key>``, their metadata
    (timestamps included) a JSON document in the file's ``user.metadata`` xattr."""

    name = "fake-gcs"
    kind = "gcs"
    project = "janitor-test"

    def __init__(self, bucket: str = "janitor") -> None:
        super().__init__()
        self.bucket = bucket
        self._buckets: set[str] = set()

    def start(self) -> FakeGCS:
        (self.dir / "data").mkdir()
        # -public-host/-external-url: the URLs it hands out (upload sessions, media links) point back at itself.
        self._spawn([store_binary("fake-gcs-server", "FAKE_GCS_SERVER_BIN"), "-scheme", "http",
                     "-host", "127.0.0.1", "-port", str(self.port), "-backend", "filesystem",
                     "-filesystem-root", str(self.dir / "data"), "-public-host", f"127.0.0.1:{self.port}",
                     "-external-url", self.endpoint, "-log-level", "warn"])
        wait_until(lambda: requests.get(f"{self.endpoint}/storage/v1/b", timeout=1).ok, 30, "fake-gcs-server",
                   self.proc, self.log)
        return self

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def create_bucket(self, name: str) -> None:
        if name not in self._buckets:
            requests.post(f"{self.endpoint}/storage/v1/b", params={"project": self.project}, json={"name": name},
                          timeout=10).raise_for_status()
            self._buckets.add(name)

    def batch_delete(self, bucket: str, names: list[str], endpoint: str | None = None) -> requests.Response:
        """One JSON-API batch request deleting ``names``. Hand-written: gcsfs batches only on Google's own host
        (to an emulator it sends one DELETE per object), and fake-gcs-server cannot parse the batch bodies of gcsfs
        (LF line ends) nor of google-cloud-storage (no Content-ID per part)."""
        parts = "".join(f"--part\r\nContent-Type: application/http\r\nContent-ID: <{i}>\r\n\r\n"
                        f"DELETE /storage/v1/b/{bucket}/o/{quote(name, safe='')} HTTP/1.1\r\n\r\n\r\n"
                        for i, name in enumerate(names))
        return requests.post(f"{endpoint or self.endpoint}/batch/storage/v1", data=f"{parts}--part--\r\n",
                             headers={"Content-Type": "multipart/mixed; boundary=part"}, timeout=60)

    def lakefs_blockstore(self) -> dict:
        # Presigning cannot work against the emulator.
        return {"type": "gs", "gs": {"disable_pre_signed": True}}

    def lakefs_env(self) -> dict[str, str]:
        # The Go client then talks plain http to the emulator and skips authentication.
        return {"STORAGE_EMULATOR_HOST": f"127.0.0.1:{self.port}"}

    def namespace(self, repo: str) -> str:
        self.create_bucket(self.bucket)
        return f"gs://{self.bucket}/{repo}"

    def fsspec_protocol(self) -> str:
        return "gs"

    def fsspec_options(self, endpoint: str | None = None) -> dict:
        return {"endpoint_url": endpoint or self.endpoint, "token": "anon", "project": self.project}

    def janitor_env(self, endpoint: str | None = None) -> dict[str, str]:
        return {"LAKEFS_JANITOR_GC__GCS_ENDPOINT_URL": endpoint or self.endpoint,
                "LAKEFS_JANITOR_GC__GCS_TOKEN": "anon",
                "LAKEFS_JANITOR_GC__GCS_PROJECT": self.project,
                "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}  # see the top of this module

    def backdate(self, key: str, namespace: str, seconds: float) -> None:
        # The server reads an object's metadata from the xattr on every request, so an edit shows at once.
        path = self.dir / "data" / self.fsspec_path(namespace, key)
        meta = json.loads(os.getxattr(path, "user.metadata"))
        when = datetime.fromtimestamp(time.time() - seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        meta["Created"] = meta["Updated"] = when
        os.setxattr(path, "user.metadata", json.dumps(meta).encode())


STORES: dict[str, type[Store]] = {"local": LocalStore, "s3": VersityGW, "azure": Azurite, "gcs": FakeGCS}


# ---- A fault-injecting reverse proxy in front of a store ----

def is_delete(kind: str, method: str, target: str) -> bool:
    """A batch delete, or a single object's DELETE (what adlfs, and gcsfs against an emulator, send instead)."""
    return method == "DELETE" or is_batch_delete(kind, method, target)


def is_batch_delete(kind: str, method: str, target: str) -> bool:
    url = urlsplit(target)
    query = parse_qs(url.query, keep_blank_values=True)
    if kind == "s3":  # DeleteObjects: POST /<bucket>?delete
        return method == "POST" and "delete" in query
    if kind == "azure":  # Blob Batch: POST /<account>[/<container>]?[restype=container&]comp=batch
        return method == "POST" and query.get("comp") == ["batch"]
    if kind == "gcs":  # JSON API batch: POST /batch/storage/v1
        return method == "POST" and url.path.startswith("/batch/storage/v1")
    raise ValueError(f"unknown store kind {kind!r}")


def is_list(kind: str, method: str, target: str) -> bool:
    """A listing of objects (S3 ListObjectsV2 / ListObjects)."""
    if kind != "s3":
        raise ValueError(f"listing requests are matched for s3 only, not {kind!r}")
    url = urlsplit(target)
    return method == "GET" and ("list-type" in parse_qs(url.query) or url.path.rstrip("/").count("/") == 1)


def internal_error(kind: str) -> tuple[int, dict[str, str], bytes]:
    """S3's 500 InternalError (a passing server fault)."""
    if kind != "s3":
        raise ValueError(f"internal_error is written for s3 only, not {kind!r}")
    return 500, {"Content-Type": "application/xml"}, (
        b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InternalError</Code>'
        b"<Message>We encountered an internal error. Please try again.</Message><RequestId>fault</RequestId></Error>")


def throttle_answer(kind: str, status: int | None = None) -> tuple[int, dict[str, str], bytes]:
    """The store's own "slow down" answer: status, headers, body."""
    if kind == "s3":
        return status or 503, {"Content-Type": "application/xml"}, (
            b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
            b"<Message>Please reduce your request rate.</Message><RequestId>throttled</RequestId></Error>")
    if kind == "azure":
        return status or 503, {"Content-Type": "application/xml", "x-ms-error-code": "ServerBusy",
                               "x-ms-request-id": "00000000-0000-0000-0000-000000000000"}, (
            b'<?xml version="1.0" encoding="utf-8"?>\n<Error><Code>ServerBusy</Code>'
            b"<Message>The server is busy.</Message></Error>")
    if kind == "gcs":
        status = status or 429
        reason, message = (("rateLimitExceeded", "The rate of change requests exceeds the rate limit.")
                           if status == 429 else ("backendError", "Backend Error"))
        body = {"error": {"code": status, "message": message,
                          "errors": [{"message": message, "domain": "global", "reason": reason}]}}
        return status, {"Content-Type": "application/json; charset=UTF-8"}, json.dumps(body).encode()
    raise ValueError(f"unknown store kind {kind!r}")


# Hop-by-hop headers are the proxy's own business; everything else (Host included) reaches the store unchanged,
# so request signatures made for the proxy's address still verify.
_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade", "expect"}


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as clients expect of a store
    server: _ProxyServer

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - quiet
        pass

    def _body(self) -> bytes | None:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0], 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):  # trailers
                pass
            return b"".join(chunks)
        length = self.headers.get("Content-Length")
        return self.rfile.read(int(length)) if length else None

    def _reply(self, status: int, reason: str, headers: list[tuple[str, str]], body: bytes) -> None:
        self.send_response_only(status, reason)
        for name, value in headers:
            self.send_header(name, value)
        names = {name.lower() for name, _ in headers}
        if "content-length" not in names and status not in (204, 304) and self.command != "HEAD":
            self.send_header("Content-Length", str(len(body)))
        try:
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up first (a stalled request)
            self.close_connection = True

    def _handle(self) -> None:
        proxy = self.server.proxy
        with proxy.in_flight:
            self._handle_one(proxy)

    def _handle_one(self, proxy: FaultProxy) -> None:
        body = self._body()
        fault = "gone" if proxy.went else proxy._choose(self.command, self.path)
        if fault in ("gone", "drop"):  # closed unanswered; "gone": this and every later request, the port closed
            self.close_connection = True
            if fault == "gone":
                proxy.went = True
                threading.Thread(target=proxy.stop, daemon=True).start()
            return
        if fault == "answer":
            status, headers, payload = proxy.answer_for()
            self._reply(status, "Throttled", list(headers.items()), payload)
            return
        if fault == "stall":
            time.sleep(proxy.stall)
        if proxy.delay > 0:
            time.sleep(proxy.delay)
        upstream = http.client.HTTPConnection(proxy.upstream.hostname, proxy.upstream.port, timeout=120)
        try:
            upstream.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for name, value in self.headers.items():
                if name.lower() not in _HOP:
                    upstream.putheader(name, value)
            if body is not None and "Content-Length" not in self.headers:
                upstream.putheader("Content-Length", str(len(body)))  # was chunked
            upstream.endheaders(body)
            response = upstream.getresponse()
            payload = response.read()
            if fault == "lost-answer":  # the store did it; its answer never reaches the client
                self.close_connection = True
                return
            headers = [(k, v) for k, v in response.getheaders() if k.lower() not in _HOP]
            self._reply(response.status, response.reason, headers, payload)
        finally:
            upstream.close()

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = do_PATCH = do_OPTIONS = _handle


class _ProxyServer(ThreadingHTTPServer):
    daemon_threads = True
    proxy: FaultProxy


# What the proxy can do to a chosen request
FAULTS = ("answer", "stall", "drop", "lost-answer", "gone")


class FaultProxy:
    """A reverse proxy on 127.0.0.1 that forwards every request to ``upstream_url`` unchanged, except the chosen
    ones, which get a fault. ``match``: which requests may be chosen: "batch-delete" (the store's batch delete),
    "delete" (that or any DELETE), "list" (S3 listings), or a function of (method, target) -> bool.

    Which matching requests: the first ``first``, every ``every``-th, and a ``share`` drawn by a random generator
    seeded with ``seed`` (any combination). Each chosen request gets one of ``faults`` (drawn with the same
    generator; default: "gone" when ``gone``, else "stall" when ``stall``, else "answer"):

    - "answer": the store's own "slow down" answer (``throttle_answer(kind, status)``), or ``answer``: one
      (status, headers, body) or a list of them, one drawn per request;
    - "stall": held ``stall`` seconds, then forwarded (a client whose time-out is shorter gives up first);
    - "drop": the connection closed without an answer, the store never asked;
    - "lost-answer": forwarded, the store's answer dropped with the connection (it did what was asked);
    - "gone": the store goes away: this and every later request dropped unanswered, the port closed.

    ``delay``: every forwarded request is held this long first (a slow network). Counters: ``requests`` (all),
    ``matched``, ``throttled`` (chosen), ``faults`` (per fault). Point a client at ``url``
    (``store.fsspec_options(proxy.url)``; for Azure ``proxy.url`` ends in the account)."""

    def __init__(self, upstream_url: str, kind: str, *, first: int = 0, every: int = 0, share: float = 0.0,
                 seed: int = 0, status: int | None = None,
                 match: str | Callable[[str, str], bool] = "batch-delete",
                 answer: tuple[int, dict[str, str], bytes] | list[tuple[int, dict[str, str], bytes]] | None = None,
                 stall: float = 0.0, gone: bool = False, faults: tuple[str, ...] | None = None,
                 delay: float = 0.0) -> None:
        self.upstream = urlsplit(upstream_url)
        self.kind = kind
        self.first, self.every, self.share = first, every, share
        presets = {"batch-delete": is_batch_delete, "delete": is_delete, "list": is_list}
        self.match = functools.partial(presets[match], kind) if isinstance(match, str) else match
        self.answers = answer if isinstance(answer, list) else [answer or throttle_answer(kind, status)]
        self.stall, self.delay = stall, delay
        self.kinds = faults or (("gone",) if gone else ("stall",) if stall > 0 else ("answer",))
        if unknown := set(self.kinds) - set(FAULTS):
            raise ValueError(f"unknown faults {sorted(unknown)}; known: {FAULTS}")
        if "stall" in self.kinds and stall <= 0:
            raise ValueError("a stall fault needs stall= seconds")
        self.went = False
        self.requests = self.matched = self.throttled = 0
        self.faults: dict[str, int] = dict.fromkeys(self.kinds, 0)
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._server: _ProxyServer | None = None
        self.in_flight = _Counter()

    @property
    def answer(self) -> tuple[int, dict[str, str], bytes]:
        return self.answers[0]

    def start(self) -> FaultProxy:
        self._server = _ProxyServer(("127.0.0.1", 0), _ProxyHandler)
        self._server.proxy = self
        threading.Thread(target=self._server.serve_forever, name="fault-proxy", daemon=True).start()
        return self

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        """The proxy's address with the upstream's path (Azurite's account segment)."""
        return f"http://127.0.0.1:{self.port}{self.upstream.path}"

    def _choose(self, method: str, target: str) -> str | None:
        """The fault this request gets, or None: forwarded as it is."""
        with self._lock:
            self.requests += 1
            if not self.match(method, target):
                return None
            self.matched += 1
            hit = (self.matched <= self.first or (self.every > 0 and self.matched % self.every == 0)
                   or (self.share > 0 and self._random.random() < self.share))
            if not hit:
                return None
            self.throttled += 1
            fault = self.kinds[0] if len(self.kinds) == 1 else self._random.choice(self.kinds)
            self.faults[fault] += 1
            return fault

    def answer_for(self) -> tuple[int, dict[str, str], bytes]:
        with self._lock:
            return self.answers[0] if len(self.answers) == 1 else self._random.choice(self.answers)

    def stop(self) -> None:
        with self._lock:  # the store going away stops it from a handler thread, the test's cleanup too
            server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()

    def cleanup(self) -> None:
        """Stopped, and no request it holds (a stall) can reach the store any more."""
        self.stop()
        self.in_flight.wait_idle(self.stall + self.delay + 130)


class _Counter:
    """Requests being handled: ``with counter:`` around each; ``wait_idle`` until there are none."""

    def __init__(self) -> None:
        self.count = 0
        self._idle = threading.Condition()

    def __enter__(self) -> None:
        with self._idle:
            self.count += 1

    def __exit__(self, *exc: object) -> None:
        with self._idle:
            self.count -= 1
            self._idle.notify_all()

    def wait_idle(self, timeout: float) -> None:
        with self._idle:
            self._idle.wait_for(lambda: self.count == 0, timeout)


# Its first name, when it only throttled
ThrottlingProxy = FaultProxy
