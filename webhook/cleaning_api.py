"""Cleaning policies over HTTP, beside the lifecycle policies, with the caller's own lakeFS credentials (same
authentication, ETag and error behaviour as webhook/policy_api.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from flask import Blueprint, jsonify, request

from spark_jobs.core.cleaning import CleaningPolicyError, parse_cleaning_policies
from webhook.context import services
from webhook.errors import error_response
from webhook.policy_api import as_caller
from workers.gc.cleaning_store import StaleETag, clear_cleaning, get_cleaning, set_cleaning
from workers.gc.store import GCRuns

if TYPE_CHECKING:
    from workers.lakefs.client import LakeFS

bp = Blueprint("cleaning", __name__, url_prefix="/api/v1/repositories/<repository>/settings/gc_cleaning")


def _answer(stored, status: int = 200):
    response = jsonify(stored.document())
    response.status_code = status
    response.headers["ETag"] = stored.etag
    return response


def _lock(repository: str):
    s = services()
    return GCRuns(s.redis, s.settings.key_prefix).edit_lock(repository)


def _stale(exc: StaleETag):
    response = error_response(412, str(exc))
    response.headers["ETag"] = exc.current
    return response


@bp.get("/policies")
@as_caller
def get(lakefs: LakeFS, repository: str):
    return _answer(get_cleaning(lakefs, repository))


@bp.put("/policies")
@as_caller
def put(lakefs: LakeFS, repository: str):
    document = request.get_json(silent=True)
    if document is None:
        return error_response(400, "body must be JSON: {\"policies\": [...]}")
    try:
        policies = parse_cleaning_policies(document)
    except CleaningPolicyError as exc:
        details = [{"index": i, "field": f, "message": m} for i, f, m in exc.errors]
        return error_response(400, "invalid cleaning policies", details=details)
    try:
        return _answer(set_cleaning(lakefs, repository, policies, if_match=request.headers.get("If-Match"),
                                    lock=_lock(repository)))
    except StaleETag as exc:
        return _stale(exc)


@bp.delete("/policies")
@as_caller
def delete(lakefs: LakeFS, repository: str):
    try:
        clear_cleaning(lakefs, repository, if_match=request.headers.get("If-Match"), lock=_lock(repository))
    except StaleETag as exc:
        return _stale(exc)
    return "", 204
