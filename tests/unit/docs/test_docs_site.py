"""The documentation site builds with strict checking (broken links, missing pages, unknown anchors), and its
references are generated from the code: every command, setting and metric is in them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
from prometheus_client import CollectorRegistry

from workers.cli.main import main
from workers.shared.metrics import Metrics
from workers.shared.settings import Settings

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "docs"))
import hooks  # noqa: E402


def _build(tmp_path: Path, docs_dir: Path | None = None) -> subprocess.CompletedProcess:
    config = ROOT / "mkdocs.yml"
    if docs_dir is not None:
        config = tmp_path / "mkdocs.yml"
        config.write_text((ROOT / "mkdocs.yml").read_text().replace("docs_dir: docs", f"docs_dir: {docs_dir}")
                          .replace("  - docs/hooks.py", f"  - {ROOT / 'docs' / 'hooks.py'}"))
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, timeout=300)


def test_the_site_builds_strictly(tmp_path):
    built = _build(tmp_path)
    assert built.returncode == 0, built.stderr
    for page in ("index.html", "gc/index.html", "reference/cli/index.html", "reference/settings/index.html",
                 "reference/metrics/index.html", "contributing/index.html"):
        assert (tmp_path / "site" / page).is_file(), page


def test_a_broken_link_fails_the_build(tmp_path):
    docs = tmp_path / "docs"
    subprocess.run(["cp", "-r", str(ROOT / "docs"), str(docs)], check=True)
    (docs / "gc.md").write_text((docs / "gc.md").read_text() + "\nSee [nowhere](no-such-page.md).\n")
    built = _build(tmp_path, docs)
    assert built.returncode != 0
    assert "no-such-page.md" in built.stderr


def _commands(command: click.Command, path: tuple[str, ...]) -> list[tuple[str, ...]]:
    found = [path]
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            found += _commands(sub, (*path, name))
    return found


def test_the_cli_reference_names_every_command_and_option():
    text = hooks.cli_reference()
    for path in _commands(main, ("lakefs-janitor",)):
        assert f"`{' '.join(path)}`" in text, path
    for option in ("--min-age", "--by-prefix", "--impact", "--inventory", "--max-deletions"):
        assert f"`{option}`" in text, option


def test_the_settings_reference_names_every_setting_with_its_environment_variable():
    text = hooks.settings_reference()
    for name, field in Settings.model_fields.items():
        nested = getattr(field.annotation, "model_fields", None)
        for sub in nested or [None]:
            env = f"LAKEFS_JANITOR_{name.upper()}" + (f"__{sub.upper()}" if sub else "")
            assert f"`{env}`" in text, env


def test_the_metrics_reference_names_every_metric_and_its_labels():
    text = hooks.metrics_reference()
    registry = CollectorRegistry()
    Metrics(registry)
    for family in registry.collect():
        assert f"`{family.name}" in text, family.name


def test_the_readme_is_a_landing_page():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200
