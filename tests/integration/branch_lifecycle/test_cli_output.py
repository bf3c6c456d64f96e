"""What a person sees: tables readable at 80 columns, one time format, errors that name the option."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.integration.conftest import create_branch
from workers.branch_lifecycle.policies import parse_policies
from workers.branch_lifecycle.store import set_policies
from workers.shared.cli_common import console


@pytest.fixture
def narrow(monkeypatch):
    monkeypatch.setattr(console, "_width", 80)
    monkeypatch.setattr(console, "_force_terminal", False)


def readable(output: str) -> None:
    for line in output.splitlines():
        assert len(line) <= 80, f"line wider than 80 columns: {line!r}"
    assert "…" not in output, output


def test_preview_and_branches_fit_80_columns(cli, lakefs, clock, repo, narrow):
    now = datetime.now(UTC)
    for name in ("feature-with-a-rather-long-descriptive-name-1", "tmp-x"):
        create_branch(lakefs, repo, name)
        clock.record_created(repo, name, now - timedelta(days=3))
    set_policies(lakefs, repo, parse_policies({"policies": [
        {"id": "long-lived-features", "patterns": ["feature-*"], "max_age": "1w3d12h", "max_idle_age": "2d"},
        {"id": "temp", "patterns": ["tmp-*"], "max_idle_age": "1d"}]}, "main"))
    preview = cli("branch-lifecycle", "preview", f"lakefs://{repo}").output
    readable(preview)
    assert "+00:00" not in preview and "T" not in preview.split("deleted")[-1].split()[0]
    readable(cli("branches", f"lakefs://{repo}").output)
    dry = cli("branch-lifecycle", "run", f"lakefs://{repo}", "--dry-run").output
    assert "would delete 1 branch;" in dry


def test_option_errors_name_the_option(cli, repo, tmp_path):
    assert "--now" in cli("branch-lifecycle", "preview", f"lakefs://{repo}", "--now", "yesterday",
                          expect_exit=2).output
    assert "lakefs://REPOSITORY/BRANCH" in cli("branch-lifecycle", "restore", f"lakefs://{repo}",
                                               expect_exit=2).output


def test_set_validates_the_file_before_contacting_lakefs(env, tmp_path):
    from click.testing import CliRunner  # noqa: PLC0415

    from workers.cli import main  # noqa: PLC0415

    bad = tmp_path / "p.yaml"
    bad.write_text("policies: [{patterns: ['x-*'], max_age: '-1d'}]\n")
    down = {**env, "LAKECTL_SERVER_ENDPOINT_URL": "http://127.0.0.1:9"}
    result = CliRunner().invoke(main, ["branch-lifecycle", "set", "lakefs://some-repo", "-f", str(bad)], env=down)
    assert result.exit_code == 1 and "invalid policies" in result.output and "unreachable" not in result.output


def test_unreachable_lakefs_is_one_short_line(env):
    from click.testing import CliRunner  # noqa: PLC0415

    from workers.cli import main  # noqa: PLC0415

    down = {**env, "LAKECTL_SERVER_ENDPOINT_URL": "http://127.0.0.1:9"}
    result = CliRunner().invoke(main, ["branches", "lakefs://some-repo"], env=down)
    assert result.exit_code == 1
    assert "lakeFS at http://127.0.0.1:9 is unreachable: connection refused" in result.output
    assert "HTTPConnectionPool" not in result.output and "Max retries" not in result.output
