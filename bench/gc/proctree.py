"""Resident memory and CPU of a process tree, sampled from /proc (Linux): a GC run in a child process — the
threads runner's one Python process, or Spark local mode's driver Python, its JVM and the JVM's Python workers."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")
HZ = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, str, float, int] | None:
    """(ppid, comm, cpu seconds incl. reaped children, rss bytes) of a live process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    comm = raw[raw.index("(") + 1:raw.rindex(")")]
    f = raw[raw.rindex(")") + 2:].split()
    # fields after comm: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14) ... rss(21)
    return int(f[1]), comm, (int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])) / HZ, int(f[21]) * PAGE


def processes() -> dict[int, tuple[int, str, float, int]]:
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (s := _stat(int(entry))) is not None:
            out[int(entry)] = s
    return out


def tree(root: int, table: dict[int, tuple[int, str, float, int]]) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, (ppid, *_rest) in table.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in table:
            out.append(pid)
            todo += children.get(pid, [])
    return out


def tree_cpu(root: int) -> float:
    table = processes()
    return sum(table[p][2] for p in tree(root, table))


def machine_busy() -> float:
    """CPU seconds the whole machine has been busy (user + nice + system + irq + softirq)."""
    ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6]) / HZ


def role(pid: int, root: int, comm: str) -> str:
    if pid == root:
        return "driver"
    return "jvm" if comm == "java" else "workers"


class TreeSampler:
    """Samples the RSS of ``root``'s process tree every ``interval`` s, by role (driver = ``root``, jvm, workers =
    any other descendant); ``mark(name)`` starts a segment, ``segments`` has each one's peaks (MiB) and the
    tree's CPU seconds."""

    def __init__(self, root: int, interval: float = 0.1) -> None:
        self.root, self.interval = root, interval
        self.segments: dict[str, dict] = {}
        self._current: dict | None = None
        self._cpu: dict[int, float] = {}
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> TreeSampler:
        self._thread.start()
        return self

    def mark(self, name: str) -> None:
        with self._lock:
            self._close()
            self._current = {"name": name, "peak_mib": 0.0, "peak_by_role_mib": {}, "samples": 0,
                             "started": time.monotonic(), "cpu0": sum(self._cpu.values())}
        self.sample()

    def _close(self) -> None:
        if self._current is not None:
            c = self._current
            c["seconds"] = time.monotonic() - c.pop("started")
            c["cpu_seconds"] = sum(self._cpu.values()) - c.pop("cpu0")
            self.segments[c.pop("name")] = c
            self._current = None

    def sample(self) -> None:
        table = processes()
        by_role: dict[str, float] = {}
        for pid in tree(self.root, table):
            _ppid, comm, cpu, rss = table[pid]
            self._cpu[pid] = cpu
            r = role(pid, self.root, comm)
            by_role[r] = by_role.get(r, 0.0) + rss / 2**20
        with self._lock:
            c = self._current
            if c is None:
                return
            c["samples"] += 1
            c["peak_mib"] = max(c["peak_mib"], sum(by_role.values()))
            for r, mib in by_role.items():
                c["peak_by_role_mib"][r] = max(c["peak_by_role_mib"].get(r, 0.0), mib)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def stop(self) -> dict[str, dict]:
        self._stop.set()
        self._thread.join()
        with self._lock:
            self._close()
        return self.segments
