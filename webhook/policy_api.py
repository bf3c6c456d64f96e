"""Branch lifecycle policies over HTTP, at the lakeFS Enterprise paths, with the caller's own lakeFS credentials.

The service holds no authority of its own here: each request acts as the caller (HTTP Basic with their lakeFS
access key), so lakeFS decides who may read or change a repository's policies.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import TYPE_CHECKING

from flask import Blueprint, jsonify, request

from webhook.context import services
from webhook.errors import error_response
from workers.branch_lifecycle.policies import PolicyValidationError, canonical, parse_policies
from workers.branch_lifecycle.store import LifecycleRecords, StaleETag, clear_policies, get_policies, set_policies

if TYPE_CHECKING:
    from workers.lakefs.client import LakeFS

bp = Blueprint("policies", __name__, url_prefix="/api/v1/repositories/<repository>/settings/branch_lifecycle")


@contextmanager
def caller_client() -> Iterator[LakeFS | None]:
    auth = request.authorization
    if auth is None or auth.type != "basic" or not auth.username or not auth.password:
        yield None
        return
    from workers.lakefs.client import make_lakefs_for  # noqa: PLC0415 - the SDK only for policy calls

    settings = services().settings
    client = make_lakefs_for(settings.lakefs.endpoint_url, auth.username, auth.password,
                             timeout=settings.lakefs_timeout_seconds)
    try:
        yield client
    finally:
        client.close()


def _unauthorized():
    response = error_response(401, "send your lakeFS access key id and secret as HTTP Basic credentials")
    response.headers["WWW-Authenticate"] = 'Basic realm="lakefs-janitor"'
    return response


def as_caller(view: Callable) -> Callable:
    """Run the view with a lakeFS client acting as the caller, or answer 401."""

    @wraps(view)
    def wrapper(repository: str):
        with caller_client() as lakefs:
            return _unauthorized() if lakefs is None else view(lakefs, repository)

    return wrapper


def _with_etag(stored, status: int = 200):
    response = jsonify(canonical(stored.policies))
    response.status_code = status
    response.headers["ETag"] = stored.etag
    return response


@bp.get("/policies")
@as_caller
def get(lakefs: LakeFS, repository: str):
    return _with_etag(get_policies(lakefs, repository))


@bp.put("/policies")
@as_caller
def put(lakefs: LakeFS, repository: str):
    document = request.get_json(silent=True)
    if document is None:
        return error_response(400, "body must be JSON: {\"policies\": [...]}")
    repo = lakefs.call("get repository", lakefs.repositories.get_repository, repository)
    try:
        policies = parse_policies(document, repo.default_branch)
    except PolicyValidationError as exc:
        details = [{"index": e.index, "field": e.field, "message": e.message} for e in exc.errors]
        return error_response(400, "invalid policies", details=details)
    try:
        return _with_etag(set_policies(lakefs, repository, policies, if_match=request.headers.get("If-Match"),
                                       lock=_edit_lock(repository)))
    except StaleETag as exc:
        return _stale(exc)


@bp.delete("/policies")
@as_caller
def delete(lakefs: LakeFS, repository: str):
    try:
        clear_policies(lakefs, repository, if_match=request.headers.get("If-Match"), lock=_edit_lock(repository))
    except StaleETag as exc:
        return _stale(exc)
    return "", 204


def _edit_lock(repository: str):
    return LifecycleRecords.of(services()).edit_lock(repository)


def _stale(exc: StaleETag):
    response = error_response(412, str(exc))
    response.headers["ETag"] = exc.current
    return response
