"""The one check of an inventory URL, made by `gc run --inventory` and by the gc.inventory setting alike."""

from __future__ import annotations

import pytest

from spark_jobs.core import inventory_url


@pytest.mark.parametrize("url", [
    "s3://inv/reports/lake/daily/2026-11-26T00-00Z/manifest.json", "s3a://inv/reports/lake/daily/",
    "https://acct1.blob.core.windows.net/inventory/2026/11/26/01-02-03/rule/rule-manifest.json",
    "https://acct1.dfs.core.windows.net/inventory/rule",
])
def test_report_urls_of_both_stores_are_taken(url):
    assert inventory_url.problem(url) is None


@pytest.mark.parametrize("url", ["gs://b/manifest.json", "https://x/m", "s3://", "manifest.json",
                                 "https://UPPER.blob.core.windows.net/c/r", "https://acct.blob.core.windows.net/"])
def test_anything_else_is_refused_naming_both_forms(url):
    why = inventory_url.problem(url)
    assert why and "S3 Inventory" in why and "Azure Blob Inventory" in why


def test_the_setting_takes_an_azure_report_and_refuses_others(monkeypatch):
    from workers.shared.settings import GCSettings  # noqa: PLC0415

    azure = "https://acct1.blob.core.windows.net/inventory/rule"
    assert GCSettings(inventory={"r": azure}).inventory == {"r": azure}
    with pytest.raises(ValueError, match=r"gc.inventory\['r'\].*names no inventory report"):
        GCSettings(inventory={"r": "https://x/m"})
