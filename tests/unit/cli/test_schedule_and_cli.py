import os

import pytest
from celery.schedules import crontab
from click.testing import CliRunner

from workers.celery.app import beat_schedule
from workers.cli import main
from workers.shared.settings import Settings

CONN = {"endpoint_url": "http://127.0.0.1:8000", "access_key_id": "A", "secret_access_key": "S"}


def test_beat_schedule_follows_settings():
    s = Settings(lakefs=CONN, lifecycle_schedule="15 3 * * 1-5", reconcile_schedule="*/10 * * * *")
    schedule = beat_schedule(s)
    assert schedule["branch-lifecycle"]["task"] == "workers.branch_lifecycle.tasks.run_all"
    assert schedule["branch-lifecycle"]["schedule"] == crontab(minute="15", hour="3", day_of_week="1-5")
    assert schedule["reconcile-idle-clock"]["schedule"] == crontab(minute="*/10")


@pytest.fixture
def env(tmp_path):
    clean = {k: None for k in os.environ if k.startswith(("LAKEFS_JANITOR_", "LAKECTL_"))}
    return {**clean, "HOME": str(tmp_path), "LAKECTL_SERVER_ENDPOINT_URL": "http://127.0.0.1:9",
            "LAKECTL_CREDENTIALS_ACCESS_KEY_ID": "A", "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY": "S"}


def test_serve_refuses_to_start_without_a_secret(env):
    result = CliRunner().invoke(main, ["serve"], env=env)
    assert result.exit_code == 1 and "LAKEFS_JANITOR_WEBHOOK_SECRET" in result.output


def test_bad_settings_are_one_clear_line_not_a_traceback(env):
    result = CliRunner().invoke(main, ["branches", "lakefs://repo"], env={**env, "LAKEFS_JANITOR_REDIS_URL": "nope"})
    assert result.exit_code == 1 and "redis_url" in result.output and "Traceback" not in result.output


def test_now_must_be_iso(env):
    result = CliRunner().invoke(main, ["branch-lifecycle", "preview", "lakefs://repo", "--now", "tomorrow"], env=env)
    assert result.exit_code == 2 and "ISO-8601" in result.output


def test_restore_needs_a_branch_uri(env):
    result = CliRunner().invoke(main, ["branch-lifecycle", "restore", "lakefs://repo"], env=env)
    assert result.exit_code == 2 and "lakefs://<repository>/<branch>" in result.output
