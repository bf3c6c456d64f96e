"""A test run stopped with SIGTERM (a CI runner's cancel, a person's kill) stops the servers it started: the
session's fixtures are torn down (tests/conftest.py), so no lakeFS, Redis or store server outlives it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

INNER = '''
import os
import time
from pathlib import Path

import pytest

from tests.services import RedisServer


@pytest.fixture(scope="session")
def server():
    started = RedisServer().start()
    yield started
    started.cleanup()


def test_holds_a_server(server):
    Path(os.environ["SERVER_PID_FILE"]).write_text(str(server.proc.pid))
    time.sleep(120)
'''


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# In one process, and as `make test` runs it: on pytest-xdist workers (the SIGTERM reaches the controller only)
@pytest.mark.parametrize("workers", [[], ["-n", "2", "--dist", "loadscope"]], ids=["one-process", "xdist"])
def test_a_terminated_test_run_stops_the_servers_it_started(tmp_path, workers):
    inner = tmp_path / "test_inner.py"
    inner.write_text(INNER)
    pid_file = tmp_path / "server.pid"
    # the project's tests/conftest.py as a plugin: the inner file lives outside tests/
    run = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:cacheprovider",
                            "--rootdir", str(tmp_path), *workers, str(inner)], cwd=ROOT,
                           env={**os.environ, "SERVER_PID_FILE": str(pid_file)}, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    server = None
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists() or not pid_file.read_text():
            assert run.poll() is None and time.monotonic() < deadline, run.communicate(timeout=10)[0]
            time.sleep(0.1)
        server = int(pid_file.read_text())
        assert alive(server)
        run.send_signal(signal.SIGTERM)
        out = run.communicate(timeout=60)[0]
        deadline = time.monotonic() + 10
        while alive(server) and time.monotonic() < deadline:
            time.sleep(0.1)
        outlived = alive(server)
    finally:
        if run.poll() is None:
            run.kill()
        if server is not None and alive(server):  # leave nothing behind, even when failing
            os.kill(server, signal.SIGKILL)
    assert not outlived, f"redis-server {server} outlived the stopped test run:\n{out}"
    assert "KeyboardInterrupt" in out and run.returncode != 0, out
