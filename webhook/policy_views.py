"""What the three policy APIs (branch lifecycle, object lifecycle, cleaning) share: the caller's own lakeFS client,
GET, PUT and DELETE of a repository's policy document with its ETag, and the query flags they take.

The service holds no authority of its own here: each request acts as the caller (HTTP Basic with their lakeFS
access key), so lakeFS decides who may read or change a repository's policies.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from functools import wraps
from typing import TYPE_CHECKING, Any

from flask import Blueprint, Response, jsonify, request

from webhook.app_services import app_services
from webhook.errors import error_response
from workers.shared.lakefs.documents import PolicyDocument, StaleETag, Stored

if TYPE_CHECKING:
    from workers.shared.lakefs.client import LakeFS
    from workers.shared.locks import EditLocks
    from workers.shared.services import Services


def flag(name: str) -> bool:
    """A query flag set as ``?name=true`` (or 1, yes)."""
    return request.args.get(name, "").lower() in ("1", "true", "yes")


@contextmanager
def caller_client() -> Iterator[LakeFS | None]:
    auth = request.authorization
    if auth is None or auth.type != "basic" or not auth.username or not auth.password:
        yield None
        return
    from workers.shared.lakefs.client import make_lakefs_for  # noqa: PLC0415 - the SDK only for policy calls

    settings = app_services().settings
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


@dataclass(frozen=True)
class Invalid:
    """How a PUT's body the domain refuses is answered: ``error``, the domain's validation error (which holds every
    mistake), becomes a 400 saying ``title`` with ``details(error)``, one JSON object per mistake."""

    error: type[Exception]
    title: str
    details: Callable[[Any], list[dict]]


def policy_routes(bp: Blueprint, document: PolicyDocument, *, locks: Callable[[Services], EditLocks],
                  parse: Callable[[LakeFS, str, Any], list | Response], invalid: Invalid, path: str = "/policies",
                  shape: str = '{"policies": [...]}') -> None:
    """``path`` on the blueprint (``/policies`` unless said; ``shape`` names the body a PUT takes): GET answers the
    document with its ETag; PUT replaces it and DELETE clears it, under the domain's
    ``locks(services).edit_lock(repository)`` (which its other writers hold too) and the request's If-Match (412
    with the current ETag when the document moved on).
    ``parse(lakefs, repository, body)`` turns a PUT's JSON into policies, or answers instead (a preview, a
    confirmation asked for); the ``invalid`` error it raises is a 400 that names every mistake."""

    def lock(repository: str) -> AbstractContextManager:
        return locks(app_services()).edit_lock(repository)

    def answer(stored: Stored) -> Response:
        response = jsonify(document.body(stored.policies))
        response.headers["ETag"] = stored.etag
        return response

    def stale(exc: StaleETag) -> Response:
        response = error_response(412, str(exc))
        response.headers["ETag"] = exc.current
        return response

    @bp.get(path)
    @as_caller
    def get(lakefs: LakeFS, repository: str):
        return answer(document.get(lakefs, repository))

    @bp.put(path)
    @as_caller
    def put(lakefs: LakeFS, repository: str):
        body = request.get_json(silent=True)
        if body is None:
            return error_response(400, f"body must be JSON: {shape}")
        try:
            policies = parse(lakefs, repository, body)
        except invalid.error as exc:
            return error_response(400, invalid.title, details=invalid.details(exc))
        if isinstance(policies, Response):
            return policies
        try:
            return answer(document.set(lakefs, repository, policies, if_match=request.headers.get("If-Match"),
                                       lock=lock(repository)))
        except StaleETag as exc:
            return stale(exc)

    @bp.delete(path)
    @as_caller
    def delete(lakefs: LakeFS, repository: str):
        try:
            document.clear(lakefs, repository, if_match=request.headers.get("If-Match"), lock=lock(repository))
        except StaleETag as exc:
            return stale(exc)
        return "", 204
