"""A lakeFS history that exercises every path of the GC mark, built through the API with backdated commits:
branches with their own retention, a merge, overwritten and deleted objects, a deleted branch (its commits
dangle), a tag (not protected), staged objects on a visible and a hidden branch."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

import lakefs_sdk

DAY = 86400


@dataclass(frozen=True)
class History:
    repository_id: str
    storage_namespace: str
    now: datetime


def _upload(lakefs, repo: str, branch: str, path: str) -> None:
    lakefs.upload(repo, branch, path, data=f"{path} {uuid.uuid4().hex}".encode())


def _commit(lakefs, repo: str, branch: str, message: str, date: datetime) -> str:
    return lakefs.commits.commit(repo, branch, lakefs_sdk.CommitCreation(
        message=message, date=int(date.timestamp()))).id


def build_history(lakefs, *, repository_id: str, storage_namespace: str, now: datetime) -> History:
    ago = lambda days: now - timedelta(days=days)  # noqa: E731
    lakefs.repositories.create_repository(lakefs_sdk.RepositoryCreation(
        name=repository_id, storage_namespace=storage_namespace, default_branch="main"))
    repo = repository_id
    for i in range(12):
        _upload(lakefs, repo, "main", f"tables/a/part-{i}")
    _commit(lakefs, repo, "main", "base", ago(40))
    lakefs.tags.create_tag(repo, lakefs_sdk.TagCreation(id="v1", ref="main"))
    for i in range(4):
        _upload(lakefs, repo, "main", f"tables/a/part-{i}")  # overwritten
    lakefs.objects.delete_object(repo, "main", "tables/a/part-11")
    _commit(lakefs, repo, "main", "overwrite", ago(30))

    lakefs.branches.create_branch(repo, lakefs_sdk.BranchCreation(name="feature", source="main"))
    _upload(lakefs, repo, "feature", "tables/b/part-0")
    _commit(lakefs, repo, "feature", "feature work", ago(25))
    _upload(lakefs, repo, "feature", "tables/b/part-0")
    _commit(lakefs, repo, "feature", "feature rework", ago(3))

    lakefs.branches.create_branch(repo, lakefs_sdk.BranchCreation(name="tmp", source="main"))
    _upload(lakefs, repo, "tmp", "scratch/x")
    _commit(lakefs, repo, "tmp", "scratch", ago(20))
    _upload(lakefs, repo, "tmp", "scratch/x")
    _commit(lakefs, repo, "tmp", "scratch 2", ago(2))
    lakefs.branches.delete_branch(repo, "tmp")  # its commits dangle: default retention

    for i in range(4, 8):
        _upload(lakefs, repo, "main", f"tables/a/part-{i}")
    _commit(lakefs, repo, "main", "recent overwrite", ago(12))
    _upload(lakefs, repo, "main", "tables/a/part-4")
    _commit(lakefs, repo, "main", "recent", ago(1))
    lakefs.refs.merge_into_branch(repo, "feature", "main", merge=lakefs_sdk.Merge(message="merge feature"))

    _upload(lakefs, repo, "main", "staged/on-main")  # uncommitted: kept
    _upload(lakefs, repo, "main", "tables/a/part-5")  # an uncommitted overwrite: both versions kept
    lakefs.branches.create_branch(repo, lakefs_sdk.BranchCreation(name="hidden-b", source="main", hidden=True))
    _upload(lakefs, repo, "hidden-b", "staged/on-hidden")

    lakefs.repositories.set_gc_rules(repo, lakefs_sdk.GarbageCollectionRules(
        default_retention_days=7, branches=[lakefs_sdk.GarbageCollectionRule(branch_id="feature",
                                                                              retention_days=30)]))
    return History(repository_id, storage_namespace, now)
