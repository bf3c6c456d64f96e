"""The local run: a real lakeFS, Redis and the janitor on 127.0.0.1, hooks installed into a demo repository,
a few writes, then the branches' idle clocks and a lifecycle preview; then a committed GC with a cleaning policy
on a history of backdated commits (plan by path, run, past runs); then an object lifecycle rule previewed and run
on files written 40 days ago, and the GC freeing exactly what it expired. Everything is stopped at the end.

    make demo            (or: .venv/bin/python scripts/demo.py [--keep])
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import lakefs_sdk  # noqa: E402

from tests.services import (  # noqa: E402
    ADMIN_ACCESS_KEY,
    ADMIN_SECRET_KEY,
    WEBHOOK_SECRET,
    LakeFSServer,
    ReceiverServer,
    RedisServer,
    janitor_env,
)
from workers.shared.lakefs.client import make_lakefs_for  # noqa: E402

REPO = "demo"
POLICIES = """\
policies:
  - id: stale-features
    patterns: ["feature-*"]
    max_idle_age: "2w"
    description: Feature branches nobody wrote to for two weeks
  - patterns: ["tmp-*"]
    max_age: "1d"
"""
GC_RULES = "default_retention_days: 7\n"
CLEANING = """\
policies:
  - id: releases
    patterns: ["main"]
    keep_commits: 1
    savepoints: ["release-*"]
"""
OBJECT_RULES = """\
rules:
  - id: raw-30d
    branches: [main]
    paths: ["raw/**"]
    max_age: 30d
    description: raw landing files, 30 days
"""
DAY = 86400


def janitor(env: dict[str, str], *args: str) -> None:
    print(f"\n$ lakefs-janitor {' '.join(args)}", flush=True)
    subprocess.run([sys.executable, "-m", "workers.cli", *args], env=env, check=True, cwd=ROOT)


def writes(lakefs, lakefs_server) -> None:
    create = lambda name, src="main": lakefs.call(  # noqa: E731
        "create branch", lakefs.branches.create_branch, REPO, lakefs_sdk.BranchCreation(name=name, source=src))
    for name in ("feature-login", "feature-search", "tmp-scratch", "release-1"):
        create(name)
    lakefs.upload(REPO, "feature-login", "login/form.json", data=b'{"fields": 3}')
    lakefs.call("commit", lakefs.commits.commit, REPO, "feature-login",
                lakefs_sdk.CommitCreation(message="login form"))
    lakefs.call("merge", lakefs.refs.merge_into_branch, REPO, "feature-login", "main")
    # A staged write fires no hook: the reconciler picks it up (a second later, so that it is news: event
    # times have one-second precision).
    time.sleep(1.1)
    lakefs.upload(REPO, "feature-search", "search/index.parquet", data=b"PAR1")


def gc_history(lakefs) -> None:
    """Daily snapshots of two tables over a month (backdated commits), a release tag on an old one."""
    now = int(time.time())
    for day in range(30, 0, -5):
        for table in ("tables/events", "tables/users"):
            lakefs.upload(REPO, "main", f"{table}/part-0.parquet", data=f"{table} as of {day} days ago".encode())
        lakefs.call("commit", lakefs.commits.commit, REPO, "main",
                    lakefs_sdk.CommitCreation(message=f"snapshot {day} days ago", date=now - day * DAY))
        if day == 25:
            lakefs.call("tag", lakefs.tags.create_tag, REPO, lakefs_sdk.TagCreation(id="release-2026.10", ref="main"))


def aged_raw_files(lakefs, block_root: Path) -> list[Path]:
    """Landing files last written 40 days ago on main (lakeFS takes the mtime given when a physical address is
    linked), committed; the files behind them, to watch the GC free them."""
    staging = lakefs_sdk.StagingApi(lakefs.api)
    mtime = int(time.time()) - 40 * DAY
    files = []
    for day in range(1, 7):
        path, data = f"raw/2026-10-0{day}/events.json", f'{{"day": {day}}}'.encode()
        location = staging.get_physical_address(REPO, "main", path)
        file = Path(location.physical_address.removeprefix("local://"))
        file = file if file.is_absolute() else block_root / file
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_bytes(data)
        staging.link_physical_address(REPO, "main", path, lakefs_sdk.StagingMetadata(
            staging=location, checksum=hashlib.md5(data).hexdigest(), size_bytes=len(data), mtime=mtime))
        files.append(file)
    lakefs.call("commit", lakefs.commits.commit, REPO, "main", lakefs_sdk.CommitCreation(message="raw landing files"))
    return files


def object_lifecycle(env: dict[str, str], lakefs, lakefs_server, folder: Path) -> None:
    """A rule that expires raw files after 30 days: preview (with when the GC frees them), run, history; then the
    GC, its retention shortened to 0 days so that the demo need not wait a week, frees exactly those files."""
    files = aged_raw_files(lakefs, lakefs_server.dir / "block")
    (folder / "object-rules.yaml").write_text(OBJECT_RULES)
    janitor(env, "object-lifecycle", "rules", "set", f"lakefs://{REPO}", "-f", str(folder / "object-rules.yaml"))
    janitor(env, "object-lifecycle", "preview", f"lakefs://{REPO}/main", "--impact")
    janitor(env, "object-lifecycle", "run", f"lakefs://{REPO}/main")
    janitor(env, "object-lifecycle", "history", f"lakefs://{REPO}")
    print(f"\nthe {len(files)} expired files are still on disk ({sum(f.exists() for f in files)} of {len(files)}): "
          "older commits reach them until the GC retention has passed", flush=True)
    (folder / "rules-0d.json").write_text(
        '{"default_retention_days": 0, "branches": [{"branch_id": "main", "retention_days": 0}]}')
    janitor(env, "gc", "rules", "set", f"lakefs://{REPO}", "-f", str(folder / "rules-0d.json"))
    janitor(env, "gc", "policy", "clear", f"lakefs://{REPO}")  # keep_commits: 1 would keep the commit before
    janitor(env, "gc", "run", f"lakefs://{REPO}", "--min-age", "0s")
    print(f"\nafter the GC, {sum(not f.exists() for f in files)} of the {len(files)} expired files are freed",
          flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", action="store_true", help="leave the services running until Ctrl-C")
    args = parser.parse_args()
    print("starting redis-server and lakeFS on 127.0.0.1 ...", flush=True)
    redis_server = RedisServer().start()
    lakefs_server = LakeFSServer({"LAKEFSACTION_JANITOR_SECRET": WEBHOOK_SECRET}).start()
    env = janitor_env(lakefs_server, redis_server.url)
    receiver = ReceiverServer(env).start()
    try:
        print(f"lakeFS   {lakefs_server.endpoint}  (access key {ADMIN_ACCESS_KEY})")
        print(f"receiver {receiver.url}  (/webhooks/lakefs, /metrics, /healthz)")
        lakefs = make_lakefs_for(lakefs_server.endpoint, ADMIN_ACCESS_KEY, ADMIN_SECRET_KEY)
        lakefs.call("create repository", lakefs.repositories.create_repository,
                    lakefs_sdk.RepositoryCreation(name=REPO, storage_namespace=f"local://{REPO}"))
        janitor(env, "hooks", "install", f"lakefs://{REPO}", "--url", receiver.url)
        writes(lakefs, lakefs_server)
        time.sleep(2)  # post-hooks are asynchronous in lakeFS
        janitor(env, "reconcile", f"lakefs://{REPO}")
        janitor(env, "branches", f"lakefs://{REPO}")
        policy_file = Path(redis_server.dir) / "policies.yaml"
        policy_file.write_text(POLICIES)
        janitor(env, "branch-lifecycle", "set", f"lakefs://{REPO}", "-f", str(policy_file))
        future = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 15 * 86400))
        janitor(env, "branch-lifecycle", "preview", f"lakefs://{REPO}", "--now", future)
        janitor(env, "branch-lifecycle", "run", f"lakefs://{REPO}", "--dry-run", "--now", future)

        print("\n--- committed garbage collection ---", flush=True)
        gc_history(lakefs)
        (Path(redis_server.dir) / "rules.yaml").write_text(GC_RULES)
        (Path(redis_server.dir) / "cleaning.yaml").write_text(CLEANING)
        janitor(env, "gc", "rules", "set", f"lakefs://{REPO}", "-f", str(Path(redis_server.dir) / "rules.yaml"))
        janitor(env, "gc", "policy", "set", f"lakefs://{REPO}", "-f", str(Path(redis_server.dir) / "cleaning.yaml"))
        janitor(env, "gc", "plan", f"lakefs://{REPO}", "--min-age", "0s", "--by-prefix", "1")
        janitor(env, "gc", "run", f"lakefs://{REPO}", "--min-age", "0s")
        janitor(env, "gc", "show", f"lakefs://{REPO}")

        print("\n--- object lifecycle ---", flush=True)
        object_lifecycle(env, lakefs, lakefs_server, Path(redis_server.dir))
        if args.keep:
            print("\nservices are running; environment for lakefs-janitor:")
            for key in sorted(k for k in env if k.startswith(("LAKECTL_", "LAKEFS_JANITOR_"))
                              and k != "LAKECTL_CONFIG_FILE"):
                print(f"  export {key}={shlex.quote(env[key])}")
            print("press Ctrl-C to stop")
            while True:
                time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        for service in (receiver, lakefs_server, redis_server):
            service.cleanup()
    print("\nall services stopped")
    return 0


if __name__ == "__main__":
    os.chdir(ROOT)
    raise SystemExit(main())
