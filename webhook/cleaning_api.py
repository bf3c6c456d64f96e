"""Cleaning policies over HTTP, beside the lifecycle policies, with the caller's own lakeFS credentials
(``webhook.policy_views``: authentication, ETag and error behaviour shared with the lifecycle policies); a PUT with
``?dry_run=true`` previews instead of storing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flask import Blueprint, jsonify, request

from spark_jobs.core.cleaning import CleaningPolicyError, parse_cleaning_policies
from webhook.app_services import app_services
from webhook.errors import error_response
from webhook.policy_views import Invalid, flag, policy_routes
from workers.gc.cleaning_store import CLEANING
from workers.gc.history import GCRuns
from workers.gc.run import GCError

if TYPE_CHECKING:
    from workers.shared.lakefs.client import LakeFS

bp = Blueprint("cleaning", __name__, url_prefix="/api/v1/repositories/<repository>/settings/gc_cleaning")


def _parse(lakefs: LakeFS, repository: str, document: Any):
    policies = parse_cleaning_policies(document)
    if flag("dry_run"):
        return _preview(repository, policies)
    return policies


def _preview(repository: str, policies):
    """What the next run would delete and keep in addition under ``policies``, by path prefix; stores nothing.
    Runs as the caller (their lakeFS key reads the history)."""
    from spark_jobs.core.durations import DurationError, parse_duration  # noqa: PLC0415
    from spark_jobs.engine.runtime.lakefs_api import LakeFSApiConfig  # noqa: PLC0415 - the engine only for previews
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
    settings = app_services().settings
    auth = request.authorization
    caller = LakeFSApiConfig(settings.lakefs.api_url, auth.username, auth.password,
                             read_timeout=settings.lakefs_timeout_seconds)
    try:
        effect = policy_preview(settings.gc, caller, repository, policies=policies, depth=depth, min_age=min_age)
    except GCError as exc:
        return error_response(409 if exc.reason in ("no-rules", "bad-policies") else 502,
                              f"preview of {repository} failed ({exc.reason}): {exc}")
    return jsonify({"dry_run": True, **effect.document()})


policy_routes(bp, CLEANING, locks=GCRuns.of, parse=_parse, invalid=Invalid(
    CleaningPolicyError, "invalid cleaning policies",
    lambda exc: [{"index": i, "field": f, "message": m} for i, f, m in exc.errors]))
