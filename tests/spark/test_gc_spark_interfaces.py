"""The Spark engine as users reach it: `gc run --runner spark` from the CLI and the Celery task with
GC__RUNNER=spark on a real worker; each submits the job, follows it and reads its summary back."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import lakefs_sdk
import pytest
import redis
from click.testing import CliRunner

from tests.services import CeleryWorker, LakeFSServer, RedisServer, janitor_env
from tests.spark.cluster import spark_env
from tests.spark.history import build_history
from workers.gc.history import GCRuns
from workers.shared.lakefs.errors import LakeFSError


@pytest.fixture
def env(lakefs_server: LakeFSServer, redis_server: RedisServer) -> dict[str, str]:
    # A database of its own on the session's Redis: the Celery worker a test here starts must be the only one on
    # its queue (the session's worker, without the Spark settings, listens on database 0).
    redis_url = redis_server.url.rsplit("/", 1)[0] + "/1"
    return spark_env(janitor_env(lakefs_server, redis_url), LAKEFS_JANITOR_SPARK__MASTER="local[2]",
                     LAKEFS_JANITOR_SPARK__RANGE_NUM_PARTITIONS="4", LAKEFS_JANITOR_SPARK__ADDRESS_NUM_PARTITIONS="4")


@pytest.fixture
def history(lakefs) -> Iterator[str]:
    name = f"si-{uuid.uuid4().hex[:10]}"
    build_history(lakefs, repository_id=name, storage_namespace=f"local://{name}", now=datetime.now(UTC))
    yield name
    lakefs.repositories.delete_repository(name, force=True)


def gone(lakefs, repo: str, ref: str, path: str) -> bool:
    try:
        lakefs.objects.get_object(repo, ref, path)
    except lakefs_sdk.ApiException as exc:
        return exc.status == 410
    except LakeFSError as exc:
        return exc.status == 410
    return False


def cli(env: dict[str, str], *args: str, expect_exit: int = 0):
    from workers.cli import main  # noqa: PLC0415

    result = CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)
    assert result.exit_code == expect_exit, result.output
    return result


def test_gc_run_with_the_spark_engine_from_the_cli(env, history, lakefs):
    dry = json.loads(cli(env, "gc", "run", f"lakefs://{history}", "--runner", "spark", "--min-age", "0s",
                         "--dry-run", "--json").stdout)
    assert dry["dry_run"] and dry["phase"] == "mark" and dry["num_deleted_objects"] >= 5
    assert not gone(lakefs, history, "v1", "tables/a/part-0")
    done = json.loads(cli(env, "gc", "run", f"lakefs://{history}", "--runner", "spark", "--min-age", "0s",
                          "--json").stdout)
    assert done["phase"] == "swept" and done["swept"] == dry["num_deleted_objects"] and done["success"]
    assert gone(lakefs, history, "v1", "tables/a/part-0")  # the tag's overwritten version (tags are not kept)
    # the plan was made as datasets on executors (ranges read there), the mark cache unused
    assert (dry["cache"]["state"], dry["listing"]["plan"]) == ("unused", "spark"), dry
    assert (done["cache"]["state"], done["listing"]["plan"]) == ("unused", "spark"), done
    uncached = json.loads(cli(env, "gc", "run", f"lakefs://{history}", "--runner", "spark", "--min-age", "0s",
                              "--dry-run", "--no-cache", "--json").stdout)
    assert uncached["cache"] == {"state": "off"} and uncached["num_deleted_objects"] == 0
    runs = json.loads(cli(env, "gc", "show", f"lakefs://{history}", "--json").stdout)
    assert [(r["mode"], r["runner"], r["success"]) for r in runs[1:3]] == [("run", "spark", True)] * 2


def test_the_celery_task_submits_the_spark_job(env, history, lakefs, monkeypatch):
    from workers.celery.app import create_celery  # noqa: PLC0415
    from workers.shared.settings import load_settings  # noqa: PLC0415

    worker_env = {**env, "LAKEFS_JANITOR_GC__RUNNER": "spark", "LAKEFS_JANITOR_GC__MIN_AGE": "0s"}
    worker = CeleryWorker(worker_env).start()
    try:
        for key, value in worker_env.items():
            monkeypatch.setenv(key, value)
        app = create_celery(load_settings())
        result = app.send_task("workers.gc.tasks.run_repository", args=(history,)).get(timeout=300)
        assert result["success"] and result["deleted"] >= 5, result
        assert gone(lakefs, history, "v1", "tables/a/part-0")
        runs = GCRuns(redis.Redis.from_url(env["LAKEFS_JANITOR_REDIS_URL"]), "lakefs-janitor").history(history)
        assert runs[0]["runner"] == "spark" and runs[0]["phase"] == "swept" and runs[0]["swept"] == result["deleted"]
    finally:
        worker.cleanup()


def test_a_repository_without_rules_is_the_same_clear_skip_on_spark(env, lakefs):
    name = f"si-{uuid.uuid4().hex[:10]}"
    lakefs.repositories.create_repository(lakefs_sdk.RepositoryCreation(
        name=name, storage_namespace=f"local://{name}", default_branch="main"))
    try:
        out = cli(env, "gc", "run", f"lakefs://{name}", "--runner", "spark", expect_exit=1).output
        assert f"lakefs://{name} has no GC rules: skipped" in out and "(no-rules)" in out
    finally:
        lakefs.repositories.delete_repository(name, force=True)


def test_plan_on_spark_then_sweep_in_process_from_the_cli(env, history, lakefs):
    # --by-prefix names what goes on either runner, the same way
    planned = json.loads(cli(env, "gc", "plan", f"lakefs://{history}", "--runner", "spark", "--min-age", "0s",
                             "--by-prefix", "--json").stdout)
    assert planned["phase"] == "mark" and planned["num_deleted_objects"] >= 5 and planned["runner"] == "spark"
    assert sum(objects for objects, _ in planned["by_path"].values()) == planned["num_deleted_objects"]
    in_process = json.loads(cli(env, "gc", "plan", f"lakefs://{history}", "--runner", "threads", "--min-age",
                                "0s", "--by-prefix", "--json").stdout)
    assert in_process["by_path"] == planned["by_path"] and "tables/a/" in planned["by_path"]
    assert not gone(lakefs, history, "v1", "tables/a/part-0")
    swept = json.loads(cli(env, "gc", "sweep", f"lakefs://{history}", "--mark-id", planned["run_id"],
                           "--json").stdout)
    assert swept["phase"] == "swept" and swept["swept"] == planned["num_deleted_objects"]
    assert swept["run_id"] == planned["run_id"] and swept["runner"] == "threads"
    assert gone(lakefs, history, "v1", "tables/a/part-0")
