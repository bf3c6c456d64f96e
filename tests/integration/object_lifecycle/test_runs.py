"""Object lifecycle runs on a real lakeFS: generated histories checked against an oracle written here (its own glob
matching), objects written again during a run, staged changes, a veto hook, a protected branch, restore, the GC
freeing exactly what expired, and the scheduled task on a real Celery worker."""

from __future__ import annotations

import hashlib
import random
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import lakefs_sdk
import pytest
from prometheus_client import CollectorRegistry

from tests.gc_engine import Collector
from tests.integration.conftest import commit, create_branch, upload
from workers.celery.app import create_celery
from workers.object_lifecycle.expiry import TEMP_PREFIX
from workers.object_lifecycle.restore import restore
from workers.object_lifecycle.rules import parse_rules
from workers.object_lifecycle.run import RunOptions, run_repository
from workers.object_lifecycle.store import ObjectLifecycleRecords, set_rules
from workers.shared.metrics import Metrics
from workers.shared.settings import load_settings

DAY = timedelta(days=1)
RULES = {"rules": [
    {"id": "raw-30d", "branches": ["main"], "paths": ["raw/**", "!raw/keep/**"], "max_age": "30d"},
    {"id": "scratch", "branches": ["feature-*", "dev"], "paths": ["tmp/**", "logs/*.log"], "max_age": "3d"},
    {"id": "logs-10d", "branches": ["*"], "paths": ["logs/**"], "max_age": "10d"},  # "*": never main
    {"id": "off", "branches": ["main"], "paths": ["results/**"], "max_age": "1d", "status": "disabled"},
]}
FOLDERS = ["raw/2026-01-01", "raw/2026-02-01/x", "raw/keep", "logs", "logs/sub", "tmp", "results", "other"]
AGES = [DAY / 2, 2 * DAY, 5 * DAY, 12 * DAY, 45 * DAY, 400 * DAY]


# --- the oracle: the rules' meaning, spelled out independently of workers.object_lifecycle ---------------------

def _glob(pattern: str) -> re.Pattern:
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out + r"\Z")


def oracle(branch: str, default: str, objects: dict[str, datetime], now: datetime) -> dict[str, set[str]]:
    """path -> the enabled rules that expire it on the branch."""
    out: dict[str, set[str]] = {}
    for rule in RULES["rules"]:
        if rule.get("status") == "disabled":
            continue
        on_branch = branch in rule["branches"] if branch == default else any(
            _glob(b).match(branch) for b in rule["branches"])
        if not on_branch:
            continue
        age = {"30d": 30 * DAY, "3d": 3 * DAY, "10d": 10 * DAY}[rule["max_age"]]
        includes = [_glob(p) for p in rule["paths"] if not p.startswith("!")]
        excludes = [_glob(p[1:]) for p in rule["paths"] if p.startswith("!")]
        for path, mtime in objects.items():
            if any(g.match(path) for g in includes) and not any(g.match(path) for g in excludes) \
                    and mtime + age <= now:
                out.setdefault(path, set()).add(rule["id"])
    return out


# --- building histories ---------------------------------------------------------------------------------------

def aged_upload(lakefs, block_root: Path, repo: str, branch: str, path: str, *, data: bytes, mtime: datetime) -> None:
    """An object with a file behind it and the mtime given (lakeFS takes it when a physical address is linked)."""
    staging = lakefs_sdk.StagingApi(lakefs.api)
    location = staging.get_physical_address(repo, branch, path)
    file = Path(location.physical_address.removeprefix("local://"))
    file = file if file.is_absolute() else block_root / file
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_bytes(data)
    staging.link_physical_address(repo, branch, path, lakefs_sdk.StagingMetadata(
        staging=location, checksum=hashlib.md5(data).hexdigest(), size_bytes=len(data), mtime=int(mtime.timestamp())))


def listing(lakefs, repo: str, ref: str) -> dict[str, dict]:
    return {o["path"]: o for o in lakefs.paginate_json("list", lakefs.objects.list_objects_with_http_info, repo, ref,
                                                       user_metadata=False)}


def build(lakefs, block_root: Path, repo: str, seed: int, now: datetime) -> None:
    rng = random.Random(seed)

    def fill(branch: str, n: int, tag: str) -> None:
        for i in range(n):
            path = f"{rng.choice(FOLDERS)}/{tag}-{i}.{rng.choice(['log', 'parquet'])}"
            aged_upload(lakefs, block_root, repo, branch, path, data=f"{seed}-{tag}-{i}".encode() * rng.randint(1, 9),
                        mtime=now - rng.choice(AGES) - timedelta(minutes=rng.randint(1, 600)))

    fill("main", 60, "m")
    commit(lakefs, repo, "main", "history")
    for branch in ("feature-a", "dev", "keep-me"):
        create_branch(lakefs, repo, branch)
        fill(branch, 15, branch)
        commit(lakefs, repo, branch, f"{branch} work")
    fill("main", 20, "m2")
    commit(lakefs, repo, "main", "more history")


def heads(lakefs, repo: str) -> dict[str, str]:
    return dict(lakefs.branch_heads(repo, show_hidden=True))


# --- tests ----------------------------------------------------------------------------------------------------

@pytest.fixture
def records(redis_client) -> ObjectLifecycleRecords:
    return ObjectLifecycleRecords(redis_client, "lakefs-janitor-test")


@pytest.fixture
def gc(lakefs_server) -> Collector:
    return Collector(lakefs_server.endpoint)


@pytest.fixture
def block_root(lakefs_server) -> Path:
    return lakefs_server.dir / "block"


@pytest.mark.parametrize("seed", [1, 2])
def test_a_run_expires_exactly_what_the_oracle_says_and_restore_brings_it_back(lakefs, repo, records, block_root,
                                                                                seed):
    now = datetime.now(UTC)
    build(lakefs, block_root, repo, seed, now)
    set_rules(lakefs, repo, parse_rules(RULES))
    # A user's staged changes on dev: an upload and a delete of a path the rules expire. They must stay staged.
    dev_before = listing(lakefs, repo, "dev")
    dev_due = sorted(oracle("dev", "main", {p: datetime.fromtimestamp(o["mtime"], UTC)
                                            for p, o in dev_before.items()}, now))
    upload(lakefs, repo, "dev", "tmp/staged-by-user.txt")
    if dev_due:
        lakefs.call("delete", lakefs.objects.delete_object, repo, "dev", dev_due[0])
    staged = [d.path for d in lakefs.call("diff", lakefs.branches.diff_branch, repo, "dev").results]
    before = {b: listing(lakefs, repo, h) for b, h in heads(lakefs, repo).items()}
    start_heads = heads(lakefs, repo)
    expected = {b: oracle(b, "main", {p: datetime.fromtimestamp(o["mtime"], UTC) for p, o in objs.items()}, now)
                for b, objs in before.items()}
    assert expected["main"] and expected["feature-a"]  # the seed exercises both

    # Written again on main while the run works: once after evaluation (seen by the re-check), once after the
    # deletions are committed on the short-lived branch (only the merge's dest-wins can keep it).
    rewritten = sorted(expected["main"])[:2]

    def between(step: str, branch: str) -> None:
        if branch == "main":
            upload(lakefs, repo, "main", rewritten[0 if step == "evaluated" else 1], data=f"new {step}".encode())
            commit(lakefs, repo, "main", f"rewrite during the run ({step})")

    registry = CollectorRegistry()
    report = run_repository(lakefs, records, repo, now=now, options=RunOptions(between=between),
                            metrics=Metrics(registry))
    outcomes = {b.branch_id: b for b in report.branches}
    assert set(outcomes) == {"main", "feature-a", "dev", "keep-me"}
    assert outcomes["dev"].result == "skipped" and outcomes["dev"].reason == "uncommitted-changes"
    assert heads(lakefs, repo)["dev"] == start_heads["dev"]
    assert [d.path for d in lakefs.call("diff", lakefs.branches.diff_branch, repo, "dev").results] == staged

    for branch in ("main", "feature-a", "keep-me"):
        after = listing(lakefs, repo, branch)
        keep = set(rewritten) if branch == "main" else set()
        gone = set(expected[branch]) - keep
        assert set(after) == set(before[branch]) - gone | keep, branch
        o = outcomes[branch]
        assert o.objects == len(gone) and o.bytes == sum(before[branch][p]["size_bytes"] for p in gone)
        by_rule = {r: sum(r in rules for p, rules in expected[branch].items() if p in gone)
                   for r in {r for rules in expected[branch].values() for r in rules}}
        assert {r: t["objects"] for r, t in o.by_rule.items()} == {r: n for r, n in by_rule.items() if n}
        if gone:
            assert o.result == "expired"
            c = lakefs.call("get commit", lakefs.commits.get_commit, repo, o.commit_id)
            assert c.metadata["lakefs_janitor.object_lifecycle.run_id"] == report.run_id
            assert report.run_id in c.message and len(c.parents) == 1  # one commit, revertible as it is
        else:
            assert o.result == "nothing-due" and heads(lakefs, repo)[branch] == start_heads[branch]
    assert outcomes["main"].kept_rewritten == 2
    assert not [b for b in heads(lakefs, repo) if b.startswith(TEMP_PREFIX)]  # short-lived branches gone
    expired_total = sum(o.objects for o in outcomes.values())
    assert sum(registry.get_sample_value("lakefs_janitor_object_lifecycle_objects_expired_total",
                                         {"repository": repo, "rule": r}) or 0 for r in ("raw-30d", "scratch",
                                                                                         "logs-10d")) \
        == sum(sum(t["objects"] for t in o.by_rule.values()) for o in outcomes.values())
    assert registry.get_sample_value("lakefs_janitor_object_lifecycle_branch_runs_total",
                                     {"repository": repo, "result": "skipped"}) == 1

    # A second run finds nothing more due (and never the disabled rule's paths).
    again = run_repository(lakefs, records, repo, now=datetime.now(UTC), options=RunOptions())
    assert all(b.objects == 0 for b in again.branches)

    # History names the commits; restore reverts each and every expired object is back with its content.
    recorded = records.run(repo, report.run_id)
    assert {b["branch_id"]: b["commit_id"] for b in recorded["branches"] if b["commit_id"]} == \
        {b: o.commit_id for b, o in outcomes.items() if o.commit_id}
    restored = restore(lakefs, records, repo, run_id=report.run_id)
    assert {r.branch_id for r in restored} == {b for b, o in outcomes.items() if o.commit_id}
    for branch in ("main", "feature-a", "keep-me"):
        after = listing(lakefs, repo, branch)
        assert set(after) == set(before[branch]), branch
        for path, obj in before[branch].items():
            if path not in rewritten:
                assert after[path]["checksum"] == obj["checksum"]
    assert expired_total > 0


def _key(obj: dict) -> str:
    # lakeFS lists some linked addresses of the local blockstore with its root twice: compare the data/ key.
    return obj["physical_address"].split("/data/", 1)[1]


def test_the_gc_then_frees_exactly_what_expired(lakefs, repo, records, block_root, gc):
    now = datetime.now(UTC)
    build(lakefs, block_root, repo, 3, now)
    set_rules(lakefs, repo, parse_rules(RULES))
    lakefs.call("set gc rules", lakefs.repositories.set_gc_rules, repo,
                lakefs_sdk.GarbageCollectionRules(default_retention_days=1, branches=[]))
    files_before = {p for p in (block_root / repo / "data").rglob("*") if p.is_file()}
    before = {b: listing(lakefs, repo, h) for b, h in heads(lakefs, repo).items()}
    report = run_repository(lakefs, records, repo, now=now, options=RunOptions())
    assert sum(b.objects for b in report.branches) > 0
    reached = {_key(o) for b, h in heads(lakefs, repo).items() for o in listing(lakefs, repo, h).values()}
    expired_addresses = {_key(o) for objs in before.values() for o in objs.values()} - reached
    assert expired_addresses

    # Within the retention (1 day after the expiry commit) the GC deletes nothing the expiry removed.
    gc.run(repo)
    assert {p for p in (block_root / repo / "data").rglob("*") if p.is_file()} == files_before
    # Once it has passed (the GC refuses a future date, so the retention is shortened to 0 days instead; lakeFS
    # stores rules of all zeros as no rules, hence the branch entry): exactly the expired objects' files go.
    lakefs.call("set gc rules", lakefs.repositories.set_gc_rules, repo,
                lakefs_sdk.GarbageCollectionRules(default_retention_days=0, branches=[
                    lakefs_sdk.GarbageCollectionRule(branch_id="main", retention_days=0)]))
    summary, _ = gc.run(repo)
    files_after = {p for p in (block_root / repo / "data").rglob("*") if p.is_file()}
    freed = {str(p).split("/data/", 1)[1] for p in files_before - files_after}
    assert freed == expired_addresses and summary.num_deleted_objects == len(expired_addresses)


def test_a_veto_hook_a_protected_branch_and_a_dry_run_change_nothing(lakefs, repo, records, block_root, receiver):
    now = datetime.now(UTC)
    for i in range(5):
        aged_upload(lakefs, block_root, repo, "main", f"raw/old-{i}", data=b"x", mtime=now - 60 * DAY)
    veto = ("name: veto\non:\n  pre-merge:\n    branches: [main]\nhooks:\n  - id: refuse\n    type: webhook\n"
            f"    properties:\n      url: {receiver.url}/no-such-endpoint\n")
    lakefs.upload(repo, "main", "_lakefs_actions/veto.yaml", data=veto.encode())
    commit(lakefs, repo, "main", "history and a veto hook")
    set_rules(lakefs, repo, parse_rules(RULES))
    head = heads(lakefs, repo)["main"]

    dry = run_repository(lakefs, records, repo, now=now + 400 * DAY, options=RunOptions(), dry_run=True)
    assert [(b.branch_id, b.result, b.objects) for b in dry.branches] == [("main", "would-expire", 5)]
    assert records.runs(repo) == []  # a dry run records nothing

    vetoed = run_repository(lakefs, records, repo, now=now, options=RunOptions())
    assert [(b.branch_id, b.result, b.reason) for b in vetoed.branches] == [("main", "vetoed", "hook")]
    assert heads(lakefs, repo) == {"main": head}  # no commit, short-lived branch gone
    assert len(listing(lakefs, repo, "main")) == 6

    # A pre-commit hook of every branch refuses the short-lived branch's commit: the same, nothing changes.
    veto_commit = veto.replace("pre-merge:\n    branches: [main]", "pre-commit:\n    branches: [\"janitor-*\"]")
    lakefs.upload(repo, "main", "_lakefs_actions/veto.yaml", data=veto_commit.encode())
    commit(lakefs, repo, "main", "veto the janitor's commits instead")
    head = heads(lakefs, repo)["main"]
    vetoed = run_repository(lakefs, records, repo, now=now, options=RunOptions())
    assert [(b.branch_id, b.result, b.reason) for b in vetoed.branches] == [("main", "vetoed", "hook")]
    assert "pre-commit" in vetoed.branches[0].detail or "commit" in vetoed.branches[0].detail
    assert heads(lakefs, repo) == {"main": head}

    lakefs.call("delete", lakefs.objects.delete_object, repo, "main", "_lakefs_actions/veto.yaml")
    commit(lakefs, repo, "main", "no more veto")
    head = heads(lakefs, repo)["main"]
    lakefs.call("protect", lakefs.repositories.set_branch_protection_rules, repo,
                [lakefs_sdk.BranchProtectionRule(pattern="ma*")])
    protected = run_repository(lakefs, records, repo, now=now, options=RunOptions())
    assert [(b.branch_id, b.result, b.reason) for b in protected.branches] == [("main", "skipped", "protected")]
    assert "'ma*'" in protected.branches[0].detail and heads(lakefs, repo) == {"main": head}

    lakefs.call("unprotect", lakefs.repositories.set_branch_protection_rules, repo, [])
    capped = run_repository(lakefs, records, repo, now=now, options=RunOptions(max_deletions=2))
    assert [(b.result, b.objects, b.capped) for b in capped.branches] == [("expired", 2, 3)]
    rest = run_repository(lakefs, records, repo, now=datetime.now(UTC), options=RunOptions())
    assert [(b.result, b.objects) for b in rest.branches] == [("expired", 3)]
    assert set(listing(lakefs, repo, "main")) == set()
    assert [r["run_id"] for r in records.runs(repo)][:4] == [rest.run_id, capped.run_id, protected.run_id,
                                                             vetoed.run_id]


def test_cli_run_history_restore_and_the_celery_task(cli, env, lakefs, repo, block_root, celery_worker, monkeypatch,
                                                      redis_client):
    now = datetime.now(UTC)
    for i in range(3):
        aged_upload(lakefs, block_root, repo, "main", f"raw/a/old-{i}", data=b"abc", mtime=now - 60 * DAY)
    aged_upload(lakefs, block_root, repo, "main", "raw/a/new", data=b"abc", mtime=now)
    commit(lakefs, repo, "main", "history")
    set_rules(lakefs, repo, parse_rules(RULES))
    preview = cli("object-lifecycle", "preview", f"lakefs://{repo}", "--impact").output
    assert "3 objects, 9 bytes would expire" in preview and "no GC rules" in preview
    dry = cli("object-lifecycle", "run", f"lakefs://{repo}/main", "--dry-run").output
    assert "would expire 3 objects" in dry and len(listing(lakefs, repo, "main")) == 4
    future = cli("object-lifecycle", "run", f"lakefs://{repo}", "--now", "2999-01-01T00:00:00Z", expect_exit=2)
    assert "in the future" in future.output and len(listing(lakefs, repo, "main")) == 4

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    app = create_celery(load_settings())
    result = app.send_task("workers.object_lifecycle.tasks.run_repository", args=(repo,)).get(timeout=120)
    assert result["objects"] == 3 and result["branches"][0]["result"] == "expired"
    assert set(listing(lakefs, repo, "main")) == {"raw/a/new"}
    history = cli("object-lifecycle", "history", f"lakefs://{repo}").output
    assert result["run_id"] in history and "raw-30d" in history
    by_prefix = cli("object-lifecycle", "history", f"lakefs://{repo}", "--by-prefix").output
    assert "raw/" in by_prefix and "prefix" in by_prefix
    out = cli("object-lifecycle", "restore", f"lakefs://{repo}", result["run_id"]).output
    assert "reverted" in out and len(listing(lakefs, repo, "main")) == 4
    missing = cli("object-lifecycle", "restore", f"lakefs://{repo}", "no-such-run", expect_exit=1).output
    assert "no object lifecycle run 'no-such-run'" in missing
    twice = cli("object-lifecycle", "restore", f"lakefs://{repo}", result["run_id"], expect_exit=1).output
    assert "already restored" in twice and len(listing(lakefs, repo, "main")) == 4

    # A run whose record Redis lost: restore finds its commit by the commit metadata.
    again = app.send_task("workers.object_lifecycle.tasks.run_repository", args=(repo,)).get(timeout=120)
    assert again["objects"] == 3
    redis_client.hdel(f"lakefs-janitor:object-lifecycle:run-records:{repo}", again["run_id"])
    assert "reverted" in cli("object-lifecycle", "restore", f"lakefs://{repo}", again["run_id"]).output
    assert len(listing(lakefs, repo, "main")) == 4


def test_concurrent_runs_expire_each_object_once_and_a_dead_runs_branch_is_removed(lakefs, repo, records,
                                                                                    block_root):
    import threading  # noqa: PLC0415

    now = datetime.now(UTC)
    for i in range(30):
        aged_upload(lakefs, block_root, repo, "main", f"raw/p/{i:02d}", data=b"x" * i, mtime=now - 90 * DAY)
    commit(lakefs, repo, "main", "history")
    set_rules(lakefs, repo, parse_rules(RULES))
    # A run that died after creating its short-lived branch (hidden, as a run makes it).
    leftover = f"{TEMP_PREFIX}20260101t000000-dead00-0"
    lakefs.call("create", lakefs.branches.create_branch, repo,
                lakefs_sdk.BranchCreation(name=leftover, source="main", hidden=True))
    reports = []
    threads = [threading.Thread(target=lambda: reports.append(
        run_repository(lakefs, records, repo, now=now, options=RunOptions()))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done = [r for r in reports if not r.locked_out]
    assert sum(b.objects for r in done for b in r.branches) == 30
    assert sum(r.locked_out for r in reports) == 3 - len(done)
    assert set(listing(lakefs, repo, "main")) == set()
    assert set(heads(lakefs, repo)) == {"main"}  # the dead run's branch and every run's own are gone
    log = lakefs.call("log", lakefs.refs.log_commits, repo, "main", amount=10).results
    assert sum("lakefs_janitor.object_lifecycle.run_id" in c.metadata for c in log) == 1
