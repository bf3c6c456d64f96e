"""The lakeFS client factory and the translation of SDK errors into our own.

Everything that talks to lakeFS receives a ``LakeFS`` built here at the edge (CLI, Celery worker, Flask app);
nothing creates one at import time.
"""

from __future__ import annotations

import contextlib
import json
import logging
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import lakefs_sdk
import urllib3
from lakefs_sdk.exceptions import ApiException

from workers.shared.lakefs.errors import (
    BY_STATUS,
    Conflict,
    Forbidden,
    LakeFSError,
    NotFound,
    PreconditionFailed,
    Unauthorized,
    Unavailable,
)
from workers.shared.settings import LakeFSConnection

log = logging.getLogger(__name__)
T = TypeVar("T")

__all__ = ["Conflict", "Forbidden", "LakeFS", "LakeFSError", "NotFound", "PreconditionFailed", "Unauthorized",
           "Unavailable", "make_lakefs", "make_lakefs_for", "translate_errors"]


def _message(exc: ApiException) -> str:
    try:
        return json.loads(exc.body or "{}").get("message") or str(exc.reason)
    except (ValueError, AttributeError):
        return str(exc.body or exc.reason)


def _why_unreachable(exc: BaseException) -> str:
    """One short reason instead of urllib3's "HTTPConnectionPool(...): Max retries exceeded ..." text."""
    seen: BaseException | None = exc
    while seen is not None:
        reason = getattr(seen, "reason", None)
        if isinstance(seen, ConnectionRefusedError) or "Connection refused" in str(seen):
            return "connection refused"
        if isinstance(seen, TimeoutError) or "timed out" in str(seen).lower():
            return "timed out"
        if "Name or service not known" in str(seen) or "nodename nor servname" in str(seen):
            return "unknown host"
        seen = reason if isinstance(reason, BaseException) else (seen.__cause__ or seen.__context__)
    return type(exc).__name__


@contextlib.contextmanager
def translate_errors(what: str, host: str | None = None) -> Iterator[None]:
    """Turn SDK and transport exceptions into LakeFSError subclasses that say what was being done."""
    try:
        yield
    except ApiException as exc:
        status = exc.status or 0
        cls = BY_STATUS.get(status, Unavailable if status >= 500 else LakeFSError)
        raise cls(f"{what}: lakeFS answered {status}: {_message(exc)}", status) from None
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        where = f"lakeFS at {host.removesuffix('/api/v1')}" if host else "lakeFS"
        raise Unavailable(f"{where} is unreachable: {_why_unreachable(exc)} ({what})") from None


@dataclass
class LakeFS:
    api: lakefs_sdk.ApiClient
    timeout: float

    def __post_init__(self) -> None:
        self.branches = lakefs_sdk.BranchesApi(self.api)
        self.commits = lakefs_sdk.CommitsApi(self.api)
        self.refs = lakefs_sdk.RefsApi(self.api)
        self.objects = lakefs_sdk.ObjectsApi(self.api)
        self.repositories = lakefs_sdk.RepositoriesApi(self.api)
        self.internal = lakefs_sdk.InternalApi(self.api)
        self.actions = lakefs_sdk.ActionsApi(self.api)
        self.auth = lakefs_sdk.AuthApi(self.api)
        self.imports = lakefs_sdk.ImportApi(self.api)
        self.tags = lakefs_sdk.TagsApi(self.api)
        self.experimental = lakefs_sdk.ExperimentalApi(self.api)

    def call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        with translate_errors(what, self.api.configuration.host):
            return fn(*args, _request_timeout=self.timeout, **kwargs)

    def paginate(self, what: str, fn: Callable[..., Any], *args: Any, amount: int = 1000, **kwargs: Any) -> Iterator[Any]:
        """Yield every result of a paginated lakeFS listing."""
        after = kwargs.pop("after", "") or ""
        while True:
            page = self.call(what, fn, *args, after=after, amount=amount, **kwargs)
            yield from page.results
            if not page.pagination.has_more:
                return
            after = page.pagination.next_offset

    def paginate_json(self, what: str, fn: Callable[..., Any], *args: Any, amount: int = 1000,
                      **kwargs: Any) -> Iterator[dict]:
        """Like paginate, over a ``*_with_http_info`` method, yielding plain dicts: for listings of thousands of
        items the SDK's model validation costs several times the HTTP round trips."""
        after = kwargs.pop("after", "") or ""
        while True:
            response = self.call(what, fn, *args, after=after, amount=amount, _preload_content=False, **kwargs)
            page = json.loads(response.raw_data)
            yield from page["results"]
            if not page["pagination"]["has_more"]:
                return
            after = page["pagination"]["next_offset"]

    def branch_heads(self, repository_id: str, after: str = "", show_hidden: bool = False) -> Iterator[tuple[str, str]]:
        """(branch_id, HEAD commit id) of every branch, in branch order."""
        for ref in self.paginate_json("list branches", self.branches.list_branches_with_http_info, repository_id,
                                      after=after, show_hidden=show_hidden):
            yield ref["id"], ref["commit_id"]

    def each_repository(self, run: Callable[[str], T], *, what: str) -> list[T]:
        """``run(repository_id)`` for every repository in turn, for a scheduled pass over all of them: one that
        fails is logged and left out, so that a broken repository never stops the others."""
        results = []
        for repo in self.paginate("list repositories", self.repositories.list_repositories):
            try:
                results.append(run(repo.id))
            except Exception:
                log.exception("%s: run for %s failed", what, repo.id)
        return results

    def upload(self, repository_id: str, branch_id: str, path: str, *, data: bytes) -> Any:
        # The generated SDK only uploads from a file path, so the bytes go through a temporary file.
        with tempfile.NamedTemporaryFile(prefix="lakefs-janitor-upload-") as tmp:
            tmp.write(data)
            tmp.flush()
            return self.call(f"upload {path}", self.objects.upload_object, repository_id, branch_id, path,
                             content=tmp.name)

    def close(self) -> None:
        self.api.close()


def make_lakefs(conn: LakeFSConnection, timeout: float = 30.0) -> LakeFS:
    config = lakefs_sdk.Configuration(
        host=conn.api_url,
        username=conn.access_key_id,
        password=conn.secret_access_key.get_secret_value(),
    )
    return LakeFS(lakefs_sdk.ApiClient(config), timeout)


def make_lakefs_for(endpoint_url: str, access_key_id: str, secret_access_key: str, *, timeout: float = 30.0) -> LakeFS:
    """A client acting with someone else's credentials (the policy API checks callers this way)."""
    conn = LakeFSConnection(endpoint_url=endpoint_url, access_key_id=access_key_id, secret_access_key=secret_access_key)
    return make_lakefs(conn, timeout)
