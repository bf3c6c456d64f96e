"""What a benchmark result records about the machine and the code it measured."""

from __future__ import annotations

import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def version_of(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=False)
    except OSError:
        return "unavailable"
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0] if text else "?"


def _cpu_model() -> str:
    try:
        return next(ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                    if ln.startswith("model name"))
    except (OSError, StopIteration):
        return "unknown"


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False).stdout


def machine_info(packages: tuple[str, ...], **extra: Any) -> dict[str, Any]:
    versions = {}
    for name in packages:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    # Files changed against HEAD outside bench/: the measured code may not be the commit's.
    dirty = _git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)bench").splitlines()
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu_count": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "packages": versions,
        "redis_server": version_of(["redis-server", "--version"]),
        "git_head": _git("rev-parse", "--short", "HEAD").strip() or None,
        "git_modified_outside_bench": [line[3:] for line in dirty],
        **extra,
    }
