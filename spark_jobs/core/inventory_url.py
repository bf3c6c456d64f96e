"""Which URLs can name an inventory report (pure): the one check the CLI's ``--inventory`` and the ``gc.inventory``
setting both make, before anything is read."""

from __future__ import annotations

import re

_S3 = re.compile(r"^s3a?://[^/\s]+/")
_AZURE = re.compile(r"^https?://[a-z0-9]{3,24}\.(?:blob|dfs)\.core\.windows\.net/[^/\s]+")

EXPECTED = ("an S3 Inventory report by its manifest's URL (s3://bucket/.../YYYY-MM-DDTHH-MMZ/manifest.json) or its "
            "configuration's folder, or an Azure Blob Inventory report by its manifest's URL (https://<account>.blob."
            "core.windows.net/<container>/YYYY/MM/DD/HH-MM-SS/<rule>/<rule>-manifest.json) or its rule "
            "(https://<account>.blob.core.windows.net/<container>/<rule>)")


def problem(url: str) -> str | None:
    """Why ``url`` cannot name an inventory report (None: it can)."""
    if _S3.match(url) or _AZURE.match(url):
        return None
    return f"{url!r} names no inventory report: give {EXPECTED}"
