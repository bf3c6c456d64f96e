"""Each domain's command module imports on its own (a fresh interpreter each), and the group then has every
domain's commands: no import order is needed to use one of them."""

from __future__ import annotations

import subprocess
import sys

import pytest

EXPECTED = ["branch-lifecycle", "branches", "gc", "hooks", "object-lifecycle", "reconcile", "serve"]


@pytest.mark.parametrize("module", ["workers.gc.cli", "workers.idle_clock.cli", "workers.branch_lifecycle.cli",
                                    "workers.gc.savepoint_cli", "workers.gc.policy_cli", "workers.gc.show_cli",
                                    "workers.object_lifecycle.cli", "workers.cli",
                                    "workers.cli.main"])
def test_a_command_module_imports_first(module):
    code = f"import sys, {module}, workers.cli.main; print(sorted(sys.modules['workers.cli.main'].main.commands))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == str(EXPECTED)
