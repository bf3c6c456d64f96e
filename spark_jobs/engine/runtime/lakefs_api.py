"""The GC's view of lakeFS: a small REST client on `requests`, the one the engine uses on either runner, on the
driver and on executors (spark_jobs ships alone, without lakefs_sdk). Plain configuration in, so it can be rebuilt
on an executor from what the job was given. It reads: GC rules, grace period, branch HEADs, first-parent logs,
tags, cleaning policies (repository metadata), prepared commits and uncommitted addresses, metadata files.
Idempotent GETs are retried on connection errors and 5xx with back-off; everything else fails with a clear
LakeFSApiError naming the call."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import requests


class LakeFSApiError(RuntimeError):
    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.reason = "lakefs-unavailable" if status is None or status >= 500 else "lakefs"


@dataclass(frozen=True)
class LakeFSApiConfig:
    api_url: str  # .../api/v1
    access_key: str
    secret_key: str
    connect_timeout: float = 10.0
    read_timeout: float = 10.0
    retries: int = 4


class LakeFSApi:
    def __init__(self, config: LakeFSApiConfig) -> None:
        self.config = config
        self.session = requests.Session()
        self.session.auth = (config.access_key, config.secret_key)

    def close(self) -> None:
        self.session.close()

    def _request(self, method: str, path: str, what: str, *, ok=(200,), retry: bool = True,
                 **kwargs: Any) -> requests.Response:
        url = f"{self.config.api_url.rstrip('/')}{path}"
        attempts = self.config.retries + 1 if retry else 1
        for attempt in range(attempts):
            try:
                resp = self.session.request(method, url, timeout=(self.config.connect_timeout,
                                                                  self.config.read_timeout), **kwargs)
            except requests.RequestException as exc:
                if attempt + 1 < attempts:
                    time.sleep(min(0.5 * 2 ** attempt, 8))
                    continue
                raise LakeFSApiError(f"{what}: lakeFS at {self.config.api_url} unreachable: {exc}") from None
            if resp.status_code in ok:
                return resp
            if resp.status_code >= 500 and attempt + 1 < attempts:
                time.sleep(min(0.5 * 2 ** attempt, 8))
                continue
            try:
                message = resp.json().get("message", resp.text)
            except ValueError:
                message = resp.text
            raise LakeFSApiError(f"{what}: lakeFS answered {resp.status_code}: {message}", resp.status_code)
        raise AssertionError("unreachable")

    def _get(self, path: str, what: str, /, **params: Any) -> Any:  # positional: a query may be named "path"
        return self._request("GET", path, what, params=params or None).json()

    def _paginate(self, path: str, what: str, /, **params: Any) -> Iterator[dict[str, Any]]:
        after = ""
        while True:
            page = self._get(path, what, after=after, amount=1000, **params)
            yield from page.get("results", [])
            pagination = page.get("pagination", {})
            if not pagination.get("has_more"):
                return
            after = pagination["next_offset"]

    @staticmethod
    def _repo(repository_id: str) -> str:
        return f"/repositories/{quote(repository_id, safe='')}"

    def repository(self, repository_id: str) -> dict[str, Any]:
        return self._get(self._repo(repository_id), f"get repository {repository_id}")

    def repository_metadata(self, repository_id: str) -> dict[str, str]:
        return self._get(f"{self._repo(repository_id)}/metadata", f"get metadata of {repository_id}") or {}

    def tags(self, repository_id: str) -> dict[str, str]:
        """tag id -> commit id."""
        return {t["id"]: t["commit_id"] for t in self._paginate(
            f"{self._repo(repository_id)}/tags", f"list tags of {repository_id}")}

    def gc_rules(self, repository_id: str) -> dict[str, Any] | None:
        """The repository's GC rules, or None when it has none (lakeFS answers 404)."""
        try:
            return self._get(f"{self._repo(repository_id)}/settings/gc_rules", f"get GC rules of {repository_id}")
        except LakeFSApiError as exc:
            if exc.status == 404:
                return None
            raise

    def gc_grace_period_seconds(self) -> int:
        return int(self._get("/config/garbage-collection", "get GC config").get("grace_period", 86400))

    def branches(self, repository_id: str) -> dict[str, str]:
        """branch id -> HEAD commit id, hidden branches included."""
        return {b["id"]: b["commit_id"] for b in self._paginate(
            f"{self._repo(repository_id)}/branches", f"list branches of {repository_id}", show_hidden="true")}

    def log(self, repository_id: str, ref: str, *, first_parent: bool = False) -> Iterator[dict[str, Any]]:
        params = {"first_parent": "true"} if first_parent else {}
        yield from self._paginate(f"{self._repo(repository_id)}/refs/{quote(ref, safe='')}/commits",
                                  f"log {repository_id}@{ref}", **params)

    def commit(self, repository_id: str, commit_id: str) -> dict[str, Any]:
        return self._get(f"{self._repo(repository_id)}/commits/{commit_id}", f"get commit {commit_id}")

    def metadata_object(self, repository_id: str, kind: str, object_id: str) -> bytes:
        """A range or metarange file's bytes through lakeFS (kind: range | meta_range)."""
        return self._request("GET", f"{self._repo(repository_id)}/metadata/object/{kind}/{object_id}",
                             f"read {kind} {object_id}").content

    def objects(self, repository_id: str, ref: str, *, amount: int = 1000) -> Iterator[dict[str, Any]]:
        yield from self._paginate(f"{self._repo(repository_id)}/refs/{quote(ref, safe='')}/objects/ls",
                                  f"list objects of {repository_id}@{ref}")

    def first_object(self, repository_id: str, ref: str) -> dict[str, Any] | None:
        page = self._get(f"{self._repo(repository_id)}/refs/{quote(ref, safe='')}/objects/ls",
                         f"list objects of {repository_id}@{ref}", amount=1)
        return next(iter(page.get("results", [])), None)

    def staged_addresses(self, repository_id: str, branch_id: str) -> list[str]:
        """Physical addresses of a branch's staged (uncommitted) objects: its diff, then a stat per object."""
        out = []
        branch = quote(branch_id, safe="")
        for diff in self._paginate(f"{self._repo(repository_id)}/branches/{branch}/diff",
                                   f"list uncommitted changes of {repository_id}@{branch_id}"):
            if diff.get("type") == "removed" or diff.get("path_type", "object") != "object":
                continue
            try:
                stat = self._get(f"{self._repo(repository_id)}/refs/{branch}/objects/stat",
                                 f"stat {diff['path']}", path=diff["path"])
            except LakeFSApiError as exc:
                if exc.status == 404:
                    continue
                raise
            out.append(stat["physical_address"])
        return out

    def prepare_commits(self, repository_id: str, *, timeout: float = 1200) -> dict[str, Any]:
        """lakeFS's own retained-commits computation (async form; the blocking one fails on the local
        blockstore). Returns {run_id, gc_commits_location, ...}."""
        return self.prepared_commits(repository_id, self.start_prepare_commits(repository_id), timeout=timeout)

    def start_prepare_commits(self, repository_id: str) -> str:
        """Ask lakeFS to prepare its retained commits and return at once with the task's id
        (``prepared_commits`` waits for it): the caller reads the history while lakeFS walks it."""
        return self._request("POST", f"{self._repo(repository_id)}/gc/prepare_commits/async",
                             f"prepare GC commits of {repository_id}", ok=(202,), retry=False).json()["id"]

    def prepared_commits(self, repository_id: str, task_id: str, *, timeout: float = 1200) -> dict[str, Any]:
        """The result of ``start_prepare_commits``' task, once lakeFS has finished it."""
        deadline = time.monotonic() + timeout
        delay = 0.01  # a small history is prepared in milliseconds; a large one in seconds
        while time.monotonic() < deadline:
            status = self._get(f"{self._repo(repository_id)}/gc/prepare_commits/status",
                               "GC commits status", id=task_id)
            if status.get("completed"):
                if status.get("error"):
                    raise LakeFSApiError(f"prepare GC commits of {repository_id}: {status['error']}")
                return status["result"]
            time.sleep(delay)
            delay = min(delay * 1.5, 2)
        raise LakeFSApiError(f"prepare GC commits of {repository_id}: not done after {timeout:g}s")

    def prepare_uncommitted(self, repository_id: str, *, attempts: int = 5) -> tuple[str, list[str]]:
        """(run id, parquet locations) of every staged address, all branches (hidden ones too). lakeFS answers 404
        when a branch it is walking is deleted meanwhile: the walk is then asked for again, from the start."""
        for attempt in range(attempts):
            try:
                return self._prepare_uncommitted(repository_id)
            except LakeFSApiError as exc:
                if exc.status != 404 or attempt + 1 == attempts:
                    raise
                time.sleep(0.05 * 2 ** attempt)
        raise AssertionError("unreachable")

    def _prepare_uncommitted(self, repository_id: str) -> tuple[str, list[str]]:
        token, locations, run_id = "", [], ""
        while True:
            body = {"continuation_token": token} if token else {}
            out = self._request("POST", f"{self._repo(repository_id)}/gc/prepare_uncommited",
                                f"prepare uncommitted of {repository_id}", ok=(201,), retry=False, json=body).json()
            run_id = run_id or out.get("run_id", "")
            if out.get("gc_uncommitted_location"):
                locations.append(out["gc_uncommitted_location"])
            token = out.get("continuation_token") or ""
            if not token:
                return run_id, locations
