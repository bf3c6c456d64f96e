"""Real services on 127.0.0.1 for tests and the local demo: redis-server, lakeFS, the receiver, a Celery worker.

Each is a subprocess on a free port with its state in a temporary directory, stopped and removed by ``stop()``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import requests
import yaml

ROOT = Path(__file__).resolve().parent.parent
ADMIN_ACCESS_KEY = "AKIAIOSFOLKJANITOR1"
ADMIN_SECRET_KEY = "janitor-test-secret-key-0123456789abcdef"  # a throwaway key for a throwaway server
WEBHOOK_SECRET = "janitor-webhook-test-secret"


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
    name = "redis"

    def start(self) -> RedisServer:
        binary = shutil.which("redis-server")
        if not binary:
            raise RuntimeError("redis-server is not installed (Debian package redis-server); run scripts/install.sh")
        self._spawn([binary, "--bind", "127.0.0.1", "--port", str(self.port), "--dir", str(self.dir),
                     "--save", "", "--appendonly", "no", "--protected-mode", "yes"])
        wait_until(self._ping, 15, "redis-server", self.proc, self.log)
        return self

    def _ping(self) -> bool:
        with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


def lakefs_binary() -> str:
    if os.environ.get("LAKEFS_BIN"):
        return os.environ["LAKEFS_BIN"]
    out = subprocess.run([str(ROOT / "scripts" / "build-lakefs.sh")], check=True, capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1]


class MotoS3Server(Service):
    """A loopback S3 (moto) to serve as lakeFS's blockstore."""

    name = "s3"
    access_key = "janitor-s3-test-key"
    secret_key = "janitor-s3-test-secret"

    def start(self) -> MotoS3Server:
        binary = Path(sys.executable).with_name("moto_server")
        self._spawn([str(binary), "-H", "127.0.0.1", "-p", str(self.port)])
        wait_until(lambda: requests.get(self.endpoint, timeout=1).status_code == 200, 30, "moto", self.proc, self.log)
        return self

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self):
        import boto3  # noqa: PLC0415

        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id=self.access_key, aws_secret_access_key=self.secret_key)


class LakeFSServer(Service):
    name = "lakefs"

    def __init__(self, extra_env: dict[str, str] | None = None, s3: MotoS3Server | None = None) -> None:
        super().__init__()
        self.extra_env = extra_env or {}
        self.import_dir = self.dir / "import"
        self.s3 = s3

    def blockstore(self) -> dict:
        if self.s3 is None:
            return {"type": "local", "local": {
                "path": str(self.dir / "block"), "import_enabled": True,
                "allowed_external_prefixes": [str(self.import_dir)]}}
        return {"type": "s3", "s3": {
            "endpoint": self.s3.endpoint, "force_path_style": True, "region": "us-east-1",
            "credentials": {"access_key_id": self.s3.access_key, "secret_access_key": self.s3.secret_key}}}

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
        self.import_dir.mkdir()
        cfg = self.dir / "lakefs.yaml"
        cfg.write_text(yaml.safe_dump(self.config()))
        env = {**os.environ, **self.extra_env}
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
