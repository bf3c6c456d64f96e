"""Where settings come from besides keyword arguments and ``LAKEFS_JANITOR_*``: the YAML file named by
``LAKEFS_JANITOR_CONFIG``, lakectl's environment variables and lakectl's own config file (the lakeFS connection
only), each a pydantic-settings source that ``workers.shared.settings.Settings`` lists in its order of priority."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic_settings import PydanticBaseSettingsSource

CONFIG_FILE_ENV = "LAKEFS_JANITOR_CONFIG"


class SettingsError(RuntimeError):
    """Settings that cannot be used; the message names each offending setting."""


class DictSource(PydanticBaseSettingsSource):
    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ returns the whole mapping

    def values(self) -> dict[str, Any]:
        raise NotImplementedError

    def __call__(self) -> dict[str, Any]:
        return self.values()


def _read_yaml(path: Path, what: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except OSError as exc:
        raise SettingsError(f"{what} {path}: cannot be read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise SettingsError(f"{what} {path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise SettingsError(f"{what} {path}: expected a mapping at the top level")
    return data


class ConfigFileSource(DictSource):
    def values(self) -> dict[str, Any]:
        path = os.environ.get(CONFIG_FILE_ENV)
        return _read_yaml(Path(path), "config file") if path else {}


def _lakectl_mapping(server: Any, credentials: Any) -> dict[str, Any]:
    server = server if isinstance(server, dict) else {}
    credentials = credentials if isinstance(credentials, dict) else {}
    found = {
        "endpoint_url": server.get("endpoint_url"),
        "access_key_id": credentials.get("access_key_id"),
        "secret_access_key": credentials.get("secret_access_key"),
    }
    found = {k: v for k, v in found.items() if v}
    return {"lakefs": found} if found else {}


class LakectlFileSource(DictSource):
    def values(self) -> dict[str, Any]:
        explicit = os.environ.get("LAKECTL_CONFIG_FILE")
        path = Path(explicit) if explicit else Path.home() / ".lakectl.yaml"
        if not explicit and not path.exists():
            return {}
        data = _read_yaml(path, "lakectl config")
        return _lakectl_mapping(data.get("server"), data.get("credentials"))


class LakectlEnvSource(DictSource):
    def values(self) -> dict[str, Any]:
        env = os.environ
        return _lakectl_mapping(
            {"endpoint_url": env.get("LAKECTL_SERVER_ENDPOINT_URL")},
            {
                "access_key_id": env.get("LAKECTL_CREDENTIALS_ACCESS_KEY_ID"),
                "secret_access_key": env.get("LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY"),
            },
        )
