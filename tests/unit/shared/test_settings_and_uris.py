
import pytest

from tests.settings_env import LAKECTL, clean_env  # noqa: F401 (clean_env: autouse)
from workers.idle_clock.hooks_install import InstallError, action_file
from workers.shared.settings import SettingsError, load_settings
from workers.shared.uris import URIError, parse_branch_uri, parse_repository_uri


def test_lakectl_environment_is_read(monkeypatch):
    for k, v in LAKECTL.items():
        monkeypatch.setenv(k, v)
    s = load_settings()
    assert s.lakefs.endpoint_url == "http://127.0.0.1:8000" and s.lakefs.api_url.endswith("/api/v1")
    assert s.lifecycle_schedule == "0 * * * *"


def test_lakectl_yaml_file_and_config_file(monkeypatch, tmp_path):
    (tmp_path / ".lakectl.yaml").write_text(
        "server: {endpoint_url: 'http://lakefs.internal:8000'}\ncredentials: {access_key_id: A, secret_access_key: B}\n")
    cfg = tmp_path / "janitor.yaml"
    cfg.write_text("lifecycle_max_deletions: 7\nredis_url: redis://127.0.0.1:6390/2\n")
    monkeypatch.setenv("LAKEFS_JANITOR_CONFIG", str(cfg))
    monkeypatch.setenv("LAKEFS_JANITOR_LIFECYCLE_MAX_DELETIONS", "9")  # environment beats the file
    s = load_settings()
    assert (s.lakefs.access_key_id, s.lifecycle_max_deletions, s.redis_url) == ("A", 9, "redis://127.0.0.1:6390/2")


def test_missing_lakefs_connection_names_the_settings():
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert "lakefs" in str(err.value) and "LAKECTL_SERVER_ENDPOINT_URL" in str(err.value)


@pytest.mark.parametrize(("env", "needle"), [
    ({"LAKEFS_JANITOR_LIFECYCLE_SCHEDULE": "every hour"}, "lifecycle_schedule"),
    ({"LAKEFS_JANITOR_LIFECYCLE_SCHEDULE": "61 * * * *"}, "lifecycle_schedule"),
    ({"LAKEFS_JANITOR_REDIS_URL": "localhost:6379"}, "redis_url"),
    ({"LAKEFS_JANITOR_LIFECYCLE_MAX_DELETIONS": "0"}, "LAKEFS_JANITOR_LIFECYCLE_MAX_DELETIONS"),
    ({"LAKEFS_JANITOR_LIFECYCLE_WARN_BEFORE": "soon"}, "lifecycle_warn_before"),
    ({"LAKEFS_JANITOR_NO_SUCH_THING": "1"}, None),
    ({"LAKECTL_SERVER_ENDPOINT_URL": "lakefs:8000"}, "http://"),
])
def test_bad_settings_fail_at_start_naming_the_setting(monkeypatch, env, needle):
    for k, v in {**LAKECTL, **env}.items():
        monkeypatch.setenv(k, v)
    if needle is None:  # unknown env vars with our prefix are not fields: ignored by pydantic-settings
        load_settings()
        return
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert needle in str(err.value)


def test_unreadable_config_file_is_a_clear_error(monkeypatch, tmp_path):
    for k, v in LAKECTL.items():
        monkeypatch.setenv(k, v)
    bad = tmp_path / "bad.yaml"
    bad.write_text("redis_url: [unclosed")
    monkeypatch.setenv("LAKEFS_JANITOR_CONFIG", str(bad))
    with pytest.raises(SettingsError, match="not valid YAML"):
        load_settings()
    monkeypatch.setenv("LAKEFS_JANITOR_CONFIG", str(tmp_path / "missing.yaml"))
    with pytest.raises(SettingsError, match="cannot be read"):
        load_settings()


def test_uris():
    assert parse_repository_uri("lakefs://my-repo").repository_id == "my-repo"
    assert parse_branch_uri("lakefs://my-repo/feature-1").ref == "feature-1"
    for bad in ("s3://x", "lakefs://UPPER", "lakefs://ab", "lakefs://repo/branch"):
        with pytest.raises(URIError):
            parse_repository_uri(bad)
    for bad in ("lakefs://repo", "lakefs://repo/a/b", "lakefs://repo/-x"):
        with pytest.raises(URIError):
            parse_branch_uri(bad)


def test_action_file_uses_the_prefixed_secret_and_post_events():
    text = action_file("https://janitor.example/")
    assert "url: https://janitor.example/webhooks/lakefs" in text
    assert "{{ ENV.LAKEFSACTION_JANITOR_SECRET }}" in text
    assert "pre-" not in text
    with pytest.raises(InstallError, match="LAKEFSACTION_"):
        action_file("https://x", secret_env="LAKEFSACTIONS_SECRET")
    with pytest.raises(InstallError, match="http"):
        action_file("janitor:8080")
