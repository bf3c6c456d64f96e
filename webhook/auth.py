"""Shared-secret check for lakeFS hook calls (lakeFS signs nothing)."""

from __future__ import annotations

import hmac

from flask import request

SECRET_HEADER = "X-Lakefs-Janitor-Secret"
SECRET_PARAM = "secret"


def secret_ok(expected: str | None) -> bool:
    if not expected:
        return False
    given = request.headers.get(SECRET_HEADER) or request.args.get(SECRET_PARAM) or ""
    return hmac.compare_digest(given.encode(), expected.encode())
