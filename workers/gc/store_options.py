"""Each object store's fsspec options, from the settings: what the one GC engine needs to reach a namespace on S3,
Azure Blob / ADLS Gen2 or GCS (local needs none). Keyed by store, so one JSON object serves every repository of a
lakeFS whatever its store; an unset setting is left out so the provider's default credential chain applies."""

from __future__ import annotations

import json
from typing import Any

from workers.shared.settings import GCSettings


def storage_options(gc: GCSettings) -> dict[str, dict[str, Any]]:
    timeout = gc.store_timeout_seconds
    s3: dict[str, Any] = {"config_kwargs": {"connect_timeout": timeout, "read_timeout": timeout}}
    if gc.s3_endpoint_url or gc.s3_region:
        s3["client_kwargs"] = {k: v for k, v in (("endpoint_url", gc.s3_endpoint_url),
                                                 ("region_name", gc.s3_region or "us-east-1")) if v}
    if gc.s3_access_key_id and gc.s3_secret_access_key:
        s3.update(key=gc.s3_access_key_id, secret=gc.s3_secret_access_key.get_secret_value())
    azure: dict[str, Any] = {"connection_timeout": timeout, "read_timeout": timeout}
    if gc.azure_connection_string:
        azure["connection_string"] = gc.azure_connection_string.get_secret_value()
    else:
        if gc.azure_account_name:
            azure["account_name"] = gc.azure_account_name
        if gc.azure_account_key:
            azure["account_key"] = gc.azure_account_key.get_secret_value()
        if gc.azure_endpoint_url:
            azure["account_host"] = gc.azure_endpoint_url.split("://", 1)[1]
        if not gc.azure_account_key:
            azure["anon"] = False  # the default credential chain (DefaultAzureCredential)
    gcs: dict[str, Any] = {"requests_timeout": timeout}
    if gc.gcs_endpoint_url:
        gcs["endpoint_url"] = gc.gcs_endpoint_url
    if gc.gcs_token:
        gcs["token"] = gc.gcs_token
    if gc.gcs_project:
        gcs["project"] = gc.gcs_project
    return {"s3": s3, "azure": azure, "gcs": gcs}


def storage_options_json(gc: GCSettings) -> str:
    return json.dumps(storage_options(gc), sort_keys=True)
