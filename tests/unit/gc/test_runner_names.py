"""The runner's names: --runner and gc.runner (threads | spark | auto); --engine, gc.engine and inprocess are
deprecated spellings that still work and say so once; records older versions wrote read as new ones."""

import logging

import pytest
from click.testing import CliRunner

from spark_jobs.core.report import Summary, upgrade_record
from tests.settings_env import LAKECTL, clean_env  # noqa: F401 (clean_env: autouse)
from workers.cli import main
from workers.shared import settings as settings_module
from workers.shared.settings import SettingsError, load_settings


@pytest.fixture(autouse=True)
def lakectl_env(clean_env, monkeypatch):  # noqa: F811 (the shared fixture, requested first)
    for k, v in LAKECTL.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(settings_module, "_warned", set())  # once per process: each test starts a new one


def deprecations(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "deprecated" in r.getMessage()]


def test_the_runner_setting_and_its_default(monkeypatch, caplog):
    assert load_settings().gc.runner == "auto"
    monkeypatch.setenv("LAKEFS_JANITOR_GC__RUNNER", "threads")
    assert load_settings().gc.runner == "threads"
    monkeypatch.setenv("LAKEFS_JANITOR_GC__RUNNER", "spark")
    assert load_settings().gc.runner == "spark"
    assert deprecations(caplog) == []
    monkeypatch.setenv("LAKEFS_JANITOR_GC__RUNNER", "processes")
    with pytest.raises(SettingsError, match="gc.runner"):
        load_settings()


def test_the_old_engine_setting_loads_as_the_runner_with_one_warning(monkeypatch, caplog):
    monkeypatch.setenv("LAKEFS_JANITOR_GC__ENGINE", "inprocess")
    with caplog.at_level(logging.WARNING):
        assert load_settings().gc.runner == "threads"
        assert load_settings().gc.runner == "threads"
    (warning,) = deprecations(caplog)  # once per process, however often the settings load
    assert "gc.engine" in warning and "gc.runner: threads" in warning and "LAKEFS_JANITOR_GC__RUNNER" in warning
    monkeypatch.setenv("LAKEFS_JANITOR_GC__ENGINE", "spark")
    assert load_settings().gc.runner == "spark"
    monkeypatch.setenv("LAKEFS_JANITOR_GC__RUNNER", "spark")  # both, the same: fine
    assert load_settings().gc.runner == "spark"


def test_the_old_engine_setting_in_the_config_file(monkeypatch, tmp_path, caplog):
    config = tmp_path / "janitor.yaml"
    config.write_text("gc: {engine: inprocess}\n")
    monkeypatch.setenv("LAKEFS_JANITOR_CONFIG", str(config))
    with caplog.at_level(logging.WARNING):
        assert load_settings().gc.runner == "threads"
    assert any("gc.engine" in w for w in deprecations(caplog))
    config.write_text("gc: {runner: inprocess}\n")  # the old value under the new name
    with caplog.at_level(logging.WARNING):
        assert load_settings().gc.runner == "threads"
    assert any("gc.runner: inprocess is deprecated" in w for w in deprecations(caplog))


@pytest.mark.parametrize(("env", "needle"), [
    ({"LAKEFS_JANITOR_GC__ENGINE": "spark", "LAKEFS_JANITOR_GC__RUNNER": "threads"}, "'spark'"),
    ({"LAKEFS_JANITOR_GC__ENGINE": "inprocess", "LAKEFS_JANITOR_GC__RUNNER": "auto"}, "'inprocess'"),
])
def test_both_settings_disagreeing_is_an_error_naming_both(monkeypatch, env, needle):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(SettingsError) as err:
        load_settings()
    message = str(err.value)
    assert "gc.runner (LAKEFS_JANITOR_GC__RUNNER)" in message and "gc.engine (LAKEFS_JANITOR_GC__ENGINE)" in message
    assert needle in message


def test_a_bad_old_engine_value_names_the_old_setting(monkeypatch):
    monkeypatch.setenv("LAKEFS_JANITOR_GC__ENGINE", "cluster")
    with pytest.raises(SettingsError, match=r"gc.engine .*'cluster' is not one of threads, spark, auto"):
        load_settings()


@pytest.mark.parametrize("command", [["run"], ["plan"], ["sweep", "--mark-id", "m"]])
def test_the_cli_says_runner_and_hides_the_old_flag(command):
    help_text = CliRunner().invoke(main, ["gc", command[0], "--help"]).output
    assert "--runner [threads|spark|auto]" in help_text and "--engine" not in help_text
    refused = CliRunner().invoke(main, ["gc", *command[:1], "lakefs://repo", *command[1:], "--runner", "threads",
                                        "--engine", "spark"])
    assert refused.exit_code == 2 and "--runner threads" in refused.output and "--engine spark" in refused.output
    unknown = CliRunner().invoke(main, ["gc", *command[:1], "lakefs://repo", *command[1:], "--runner", "inprocess"])
    assert unknown.exit_code == 2 and "inprocess" in unknown.output


def test_records_older_versions_wrote_read_as_new_ones():
    old = {"run_id": "r", "repository_id": "repo", "success": True, "start_time": "t", "cutoff_time": "t",
           "num_deleted_objects": 1, "engine": "inprocess", "marked": True}
    summary = Summary.from_dict(old)
    assert summary.runner == "threads" and summary.marked and "engine" not in summary.as_dict()
    assert Summary.from_dict({**old, "engine": "spark"}).runner == "spark"
    assert upgrade_record({"mode": "run", "engine": "auto", "reason": "storage-config"}) == {
        "mode": "run", "runner": "auto", "reason": "storage-config"}
    assert upgrade_record({"engine": "inprocess", "engine_reason": "asked for"}) == {
        "runner": "threads", "runner_reason": "asked for"}
    new = {"runner": "spark", "runner_reason": "asked for"}
    assert upgrade_record(new) is new
