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
from workers.gc.runner import GCError
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
    return GCRuns.of(services()).edit_lock(repository)


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
    if request.args.get("dry_run", "").lower() in ("1", "true", "yes"):
        return _preview(repository, policies)
    try:
        return _answer(set_cleaning(lakefs, repository, policies, if_match=request.headers.get("If-Match"),
                                    lock=_lock(repository)))
    except StaleETag as exc:
        return _stale(exc)


def _preview(repository: str, policies):
    """What the next run would delete and keep in addition under ``policies``, by path prefix; stores nothing.
    Runs as the caller (their lakeFS key reads the history)."""
    from spark_jobs.core.durations import DurationError, parse_duration  # noqa: PLC0415
    from spark_jobs.engine.lakefs_api import LakeFSApiConfig  # noqa: PLC0415 - the engine only for previews
    from workers.gc.preview import policy_preview  # noqa: PLC0415

    try:
        depth = int(request.args.get("depth", "2"))
        if not 1 <= depth <= 32:
            raise ValueError
    except ValueError:
        return error_response(400, "depth must be a whole number from 1 to 32")
    try:
        min_age = parse_duration(request.args["min_age"], allow_zero=True) if "min_age" in request.args else None
    except DurationError as exc:
        return error_response(400, f"min_age: {exc}")
    settings = services().settings
    auth = request.authorization
    caller = LakeFSApiConfig(settings.lakefs.api_url, auth.username, auth.password,
                             read_timeout=settings.lakefs_timeout_seconds)
    try:
        effect = policy_preview(settings.gc, caller, repository, policies=policies, depth=depth, min_age=min_age)
    except GCError as exc:
        return error_response(409 if exc.reason in ("no-rules", "bad-policies") else 502,
                              f"preview of {repository} failed ({exc.reason}): {exc}")
    return jsonify({"dry_run": True, **effect.document()})


@bp.delete("/policies")
@as_caller
def delete(lakefs: LakeFS, repository: str):
    try:
        clear_cleaning(lakefs, repository, if_match=request.headers.get("If-Match"), lock=_lock(repository))
    except StaleETag as exc:
        return _stale(exc)
    return "", 204
