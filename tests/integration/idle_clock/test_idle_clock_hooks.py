"""lakeFS calls the real receiver through the action file that `hooks install` commits."""

from __future__ import annotations

import json
import time
from datetime import datetime

import lakefs_sdk
import pytest

from tests.integration.conftest import commit, create_branch, eventually, upload


def rows(cli, repo: str) -> dict[str, dict]:
    return {row["branch"]: row for row in json.loads(cli("branches", f"lakefs://{repo}", "--json").output)}


def ts(value: str | None) -> float | None:
    return datetime.fromisoformat(value).timestamp() if value else None


@pytest.fixture
def hooked_repo(cli, repo, receiver, lakefs):
    result = cli("hooks", "install", f"lakefs://{repo}", "--url", receiver.url)
    assert "installed lakefs://" in result.output
    return repo


def test_install_is_idempotent_and_valid(cli, hooked_repo, lakefs, receiver):
    again = cli("hooks", "install", f"lakefs://{hooked_repo}", "--url", receiver.url)
    assert "already up to date" in again.output
    content = lakefs.call("get", lakefs.objects.get_object, hooked_repo, "main", "_lakefs_actions/lakefs-janitor.yaml")
    assert b"{{ ENV.LAKEFSACTION_JANITOR_SECRET }}" in content
    commits = lakefs.call("log", lakefs.refs.log_commits, hooked_repo, "main").results
    assert sum(c.message.startswith("lakefs-janitor") for c in commits) == 1


def test_install_refuses_a_dirty_default_branch(cli, repo, receiver, lakefs):
    upload(lakefs, repo, "main", "someone-elses-work.txt")
    result = cli("hooks", "install", f"lakefs://{repo}", "--url", receiver.url, expect_exit=1)
    assert "uncommitted changes" in result.output
    # their staged object is still staged, not committed along with ours
    diff = lakefs.call("diff", lakefs.branches.diff_branch, repo, "main").results
    assert [d.path for d in diff] == ["someone-elses-work.txt"]


def test_branch_life_is_recorded_from_hooks(cli, hooked_repo, lakefs):
    repo = hooked_repo
    before = time.time()
    create_branch(lakefs, repo, "feature-a")
    row = eventually(lambda: rows(cli, repo).get("feature-a", {}).get("created_at") and rows(cli, repo)["feature-a"])
    assert before - 1 <= ts(row["created_at"]) <= time.time() + 1
    assert row["created_source"] == "webhook" and row["last_write_at"] is None

    time.sleep(1.1)  # event times have second precision
    upload(lakefs, repo, "feature-a", "a.txt")
    c = commit(lakefs, repo, "feature-a", "first")
    row = eventually(lambda: rows(cli, repo)["feature-a"]["last_write_at"] and rows(cli, repo)["feature-a"])
    assert ts(row["last_write_at"]) > ts(row["created_at"])
    assert row["source"] == "webhook" and row["head"] == c.id

    # merge bumps the destination, not the source
    time.sleep(1.1)
    main_before = rows(cli, repo)["main"]["last_write_at"]
    feature_before = rows(cli, repo)["feature-a"]["last_write_at"]
    lakefs.call("merge", lakefs.refs.merge_into_branch, repo, "feature-a", "main")
    eventually(lambda: rows(cli, repo)["main"]["last_write_at"] != main_before)
    assert rows(cli, repo)["feature-a"]["last_write_at"] == feature_before


def _bumped(cli, repo, branch, previous):
    return eventually(lambda: (ts(rows(cli, repo)[branch]["last_write_at"]) or 0) > (previous or 0))


def test_revert_cherry_pick_and_import_bump_the_clock(cli, hooked_repo, lakefs, lakefs_server):
    repo = hooked_repo
    create_branch(lakefs, repo, "work")
    create_branch(lakefs, repo, "other")
    upload(lakefs, repo, "work", "w.txt")
    picked = commit(lakefs, repo, "work", "to pick")
    eventually(lambda: rows(cli, repo)["work"]["last_write_at"])

    time.sleep(1.1)
    last = ts(rows(cli, repo)["work"]["last_write_at"])
    lakefs.call("revert", lakefs.branches.revert_branch, repo, "work", lakefs_sdk.RevertCreation(ref=picked.id, parent_number=0))
    _bumped(cli, repo, "work", last)

    last = ts(rows(cli, repo)["other"]["last_write_at"])
    lakefs.call("cherry-pick", lakefs.branches.cherry_pick, repo, "other", lakefs_sdk.CherryPickCreation(ref=picked.id))
    _bumped(cli, repo, "other", last)

    time.sleep(1.1)
    source = lakefs_server.import_dir / repo
    source.mkdir()
    (source / "imported.csv").write_text("a,b\n")
    last = ts(rows(cli, repo)["other"]["last_write_at"])
    started = lakefs.call("import", lakefs.imports.import_start, repo, "other", lakefs_sdk.ImportCreation(
        paths=[lakefs_sdk.ImportLocation(type="common_prefix", path=f"local://{source}/", destination="imported/")],
        commit=lakefs_sdk.CommitCreation(message="import")))
    eventually(lambda: lakefs.call("status", lakefs.imports.import_status, repo, "other", started.id).completed)
    _bumped(cli, repo, "other", last)


def test_delete_forgets_the_branch_and_a_tag_changes_nothing(cli, hooked_repo, lakefs, clock):
    repo = hooked_repo
    create_branch(lakefs, repo, "short-lived")
    eventually(lambda: clock.get(repo, "short-lived").created_at)
    main_before = clock.get(repo, "main")
    lakefs.call("tag", lakefs.tags.create_tag, repo, lakefs_sdk.TagCreation(id="v1", ref="main"))
    lakefs.call("delete", lakefs.branches.delete_branch, repo, "short-lived")
    eventually(lambda: clock.get(repo, "short-lived").created_at is None)
    assert "short-lived" not in clock.known_branches(repo)
    assert clock.get(repo, "main") == main_before  # the tag changed nothing


def test_install_on_a_protected_branch_says_why(cli, repo, receiver, lakefs):
    lakefs.call("protect", lakefs.repositories.set_branch_protection_rules, repo,
                [lakefs_sdk.BranchProtectionRule(pattern="main")])
    result = cli("hooks", "install", f"lakefs://{repo}", "--url", receiver.url, expect_exit=1)
    assert "lakeFS refused to write _lakefs_actions/lakefs-janitor.yaml" in result.output
    assert "Branch protection" in result.output and "Traceback" not in result.output


def test_install_refused_by_a_pre_commit_hook_leaves_nothing_staged(cli, repo, receiver, lakefs):
    veto = ("name: no-commits\non:\n  pre-commit:\n    branches: [main]\nhooks:\n  - id: refuse\n    type: webhook\n"
            f"    properties:\n      url: {receiver.url}/no-such-endpoint\n")
    # The veto would refuse its own commit on main: merge it in. The branch starts from main's commit id, not the
    # name "main", because lakeFS caches the action files it read for a ref name for up to 7.5 s.
    head = lakefs.call("get", lakefs.branches.get_branch, repo, "main").commit_id
    create_branch(lakefs, repo, "setup", source=head)
    lakefs.upload(repo, "setup", "_lakefs_actions/veto.yaml", data=veto.encode())
    commit(lakefs, repo, "setup", "veto")
    lakefs.call("merge", lakefs.refs.merge_into_branch, repo, "setup", "main")
    first = cli("hooks", "install", f"lakefs://{repo}", "--url", receiver.url, expect_exit=1).output
    assert "pre-commit hook" in first and "refused" in first
    assert lakefs.call("diff", lakefs.branches.diff_branch, repo, "main").results == []
    second = cli("hooks", "install", f"lakefs://{repo}", "--url", receiver.url, expect_exit=1).output
    assert "already up to date" not in second
