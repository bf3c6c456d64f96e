"""The Spark engine's submit side without Spark: the shipped zip, the properties file, the job configuration."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from spark_jobs.jobs.config import JobSettings, JobSettingsError
from spark_jobs.jobs.protocol import EVENT_PREFIX, parse_job_event
from workers.gc.submit import (
    JOB_FOLDER_PREFIX,
    JOBS_DIR,
    JobOutcome,
    SparkSubmitError,
    build_py_files,
    cluster_properties,
    job_properties,
    remove_left_behind,
    secrets_of,
    submit_command,
    write_properties,
)
from workers.shared.settings import LakeFSConnection, SparkSettings


def test_zip_holds_the_whole_package_and_nothing_else(tmp_path: Path):
    names = set(zipfile.ZipFile(build_py_files(tmp_path)).namelist())
    assert {"spark_jobs/__init__.py", "spark_jobs/jobs/gc.py", "spark_jobs/jobs/protocol.py",
            "spark_jobs/core/__init__.py", "spark_jobs/core/sstable.py"} <= names
    # the engine's step packages, with both backends' halves
    steps = ("reach", "listing", "plan", "sweep", "state", "stores", "backends", "runtime")
    assert {f"spark_jobs/engine/{step}/__init__.py" for step in steps} <= names
    assert {f"spark_jobs/engine/{step}/{half}.py" for step in ("reach", "listing", "plan", "state")
            for half in ("arrow", "spark")} <= names
    assert all(n.startswith("spark_jobs/") and n.endswith(".py") and "__pycache__" not in n for n in names)


def test_seed_keys_and_credentials_go_to_the_properties_not_the_command_line(tmp_path: Path):
    spark = SparkSettings(conf={"spark.executor.memory": "2g", "spark.hadoop.lakefs.gc.range.num_partitions": "7"})
    conn = LakeFSConnection(endpoint_url="http://127.0.0.1:8000", access_key_id="AKIA", secret_access_key="s=cr:t")
    props = job_properties(spark=spark, python="/usr/bin/python3", lakefs=conn)
    assert props["spark.hadoop.lakefs.gc.address.num_partitions"] == "200"
    assert props["spark.hadoop.lakefs.gc.range.num_partitions"] == "7"  # the user's conf wins
    assert props["spark.hadoop.lakefs.api.read.timeout_seconds"] == "10"
    assert props["spark.hadoop.lakefs.api.connection.timeout_seconds"] == "10"
    assert props["spark.hadoop.lakefs.api.url"] == "http://127.0.0.1:8000/api/v1"
    path = tmp_path / "job.properties"
    write_properties(path, props)
    assert path.stat().st_mode & 0o077 == 0
    assert r"spark.hadoop.lakefs.api.secret_key=s\=cr\:t" in path.read_text().splitlines()
    command = submit_command(spark=spark, home=Path("/spark"), entry="ping", args=["--x"], py_files=tmp_path / "z",
                             properties_file=path, app_name="a")
    assert "s=cr:t" not in " ".join(command)
    assert command[:3] == ["/spark/bin/spark-submit", "--master", "local[*]"]


def test_job_config_defaults_and_bad_values():
    config = JobSettings.from_hadoop({}.get)
    assert (config.range_num_partitions, config.address_num_partitions) == (50, 200)
    assert config.timeouts == (10, 10)
    with pytest.raises(JobSettingsError, match="lakefs.gc.range.num_partitions='0' must be positive"):
        JobSettings.from_hadoop({"lakefs.gc.range.num_partitions": "0"}.get)
    with pytest.raises(JobSettingsError, match="is not an integer"):
        JobSettings.from_hadoop({"lakefs.api.read.timeout_seconds": "ten"}.get)


def test_events_and_outcome():
    assert parse_job_event(EVENT_PREFIX + '{"event": "result", "success": true}') == {"event": "result", "success": True}
    assert parse_job_event("INFO something") is None
    assert parse_job_event(EVENT_PREFIX + "not json") is None
    failed = JobOutcome(returncode=1, stderr_tail="26/11/22 15:45:04 INFO a\nValueError: boom\n")
    assert not failed.success and failed.failure_reason() == "spark-submit exited with 1: ValueError: boom"
    assert not JobOutcome(returncode=0).success


def test_spark_master_setting_is_checked():
    with pytest.raises(ValueError, match="is not a Spark master"):
        SparkSettings(master="localhost:7077")


def test_distribution_helpers():
    from spark_jobs.jobs.distribute import _partitions  # noqa: PLC0415

    assert (_partitions(0, 50), _partitions(3, 50), _partitions(500, 50)) == (1, 3, 50)


def test_a_run_request_travels_to_the_job_whole():
    """Every field of a RunRequest reaches the job: as an argument (request.ARGUMENTS) or from the job itself."""
    import argparse  # noqa: PLC0415
    from dataclasses import fields  # noqa: PLC0415
    from datetime import UTC, datetime, timedelta  # noqa: PLC0415

    from spark_jobs.engine.request import ARGUMENTS, RunRequest  # noqa: PLC0415
    from spark_jobs.engine.runtime.range_cache import RangeCacheSettings  # noqa: PLC0415
    from spark_jobs.engine.sweep.lease_watch import LeaseRef  # noqa: PLC0415

    own = {"runner": "spark", "range_partitions": 3, "address_partitions": 5, "driver_ranges": 7,
           "range_cache": RangeCacheSettings("~/ranges", 11),
           "lease": LeaseRef("redis://127.0.0.1:1/0", "k", "t", lease_ms=60_000, stale_ms=5_000)}
    assert set(ARGUMENTS) | set(own) == {f.name for f in fields(RunRequest)}
    request = RunRequest("repo", "sweep", now=datetime(2026, 11, 22, 15, 45, 4, 123456, tzinfo=UTC), run_id="r",
                         mark_id="m", min_age=timedelta(hours=36, microseconds=7), max_deletions=9, prefix_depth=4,
                         by_path=True, metadata_from="lakefs", cache=False, purge_noncurrent=True, **own)
    assert RunRequest.from_args(request.to_args(), parser=argparse.ArgumentParser(), **own) == request
    assert RunRequest.from_args(["--repository-id", "r"], parser=argparse.ArgumentParser()) == RunRequest("r")
    assert "--run-id" not in RunRequest("r").to_args()  # unset: left out
    with pytest.raises(SystemExit):
        RunRequest.from_args(["--repository-id", "r", "--by-path", "yes"], parser=argparse.ArgumentParser())


def test_job_settings_travel_whole_and_credentials_stay_private():
    full = JobSettings(api_url="http://l/api/v1", access_key="a", secret_key="s", read_timeout_seconds=3,
                     connection_timeout_seconds=4, range_num_partitions=5, address_num_partitions=6,
                     storage_options_json='{"s3": {}}', local_root="/data", max_in_flight=7, lease_json="{}",
                     daily_driver_ranges=9, range_cache_folder="~/ranges", range_cache_mib=11)
    props = full.properties()
    assert JobSettings.from_hadoop(lambda key: props.get(f"spark.hadoop.{key}")) == full
    assert set(full.public()) == {"api_url", "read_timeout_seconds", "connection_timeout_seconds",
                                  "range_num_partitions", "address_num_partitions",
                                  "daily_driver_ranges", "range_cache_folder", "range_cache_mib"}
    assert JobSettings().properties() == {"spark.hadoop.lakefs.api.read.timeout_seconds": "10",
                                        "spark.hadoop.lakefs.api.connection.timeout_seconds": "10",
                                        "spark.hadoop.lakefs.gc.range.num_partitions": "50",
                                        "spark.hadoop.lakefs.gc.address.num_partitions": "200",
                                        "spark.hadoop.lakefs.gc.daily.driver_ranges": "128",
                                        "spark.hadoop.lakefs.gc.store.max_in_flight": "32",
                                        "spark.hadoop.lakefs.gc.range_cache.mib": "2048"}  # no folder: no copies


# --- the driver in a pod of its own (spark.deploy_mode cluster, Kubernetes only) --------------------------------

K8S = "k8s://https://kubernetes.default.svc:443"


def test_the_lease_reference_tells_both_runners_how_many_replicas_confirm_it():
    """The replica count reaches the deleters inside the lease reference: the thread runner's as the starter made
    it, the Spark job's through its settings (lakefs.gc.lease.token), so spark_jobs imports nothing of workers. A
    reference without one (an older starter) asks for none."""
    import redis  # noqa: PLC0415

    from spark_jobs.engine.runtime.redis_ack import Acknowledged  # noqa: PLC0415
    from spark_jobs.engine.sweep.lease_watch import LeaseRef  # noqa: PLC0415
    from workers.gc.history import GCRuns  # noqa: PLC0415

    runs = GCRuns(redis.Redis(), "p", "redis://127.0.0.1:1/0", lock_durability=Acknowledged(1, 2.5))
    ref = runs.lease("repo", 60).ref()
    assert (ref.replica_acks, ref.confirm_seconds) == (1, 2.5)
    props = job_properties(spark=SparkSettings(), python="python3", lease_json=ref.to_json())
    job = JobSettings.from_hadoop(lambda key: props.get(f"spark.hadoop.{key}"))
    assert LeaseRef.from_json(job.lease_json) == ref
    older = {k: v for k, v in json.loads(ref.to_json()).items() if k not in ("replica_acks", "confirm_seconds")}
    assert LeaseRef.from_json(json.dumps(older)).replica_acks == 0
    assert GCRuns(redis.Redis(), "p", lock_durability=Acknowledged(0, 3.0)).lease("r", 60).ref().replica_acks == 0


def test_cluster_mode_needs_kubernetes():
    assert SparkSettings(master=K8S, deploy_mode="cluster").deploy_mode == "cluster"
    with pytest.raises(ValueError, match="deploy_mode cluster needs a k8s:// master"):
        SparkSettings(master="spark://h:7077", deploy_mode="cluster")
    with pytest.raises(ValueError, match="deploy_mode"):
        SparkSettings(master=K8S, deploy_mode="remote")


def test_cluster_mode_runs_the_installed_job_and_ships_nothing(tmp_path: Path):
    spark = SparkSettings(master=K8S, deploy_mode="cluster")
    command = submit_command(spark=spark, home=Path("/spark"), entry="gc", args=["--repository-id", "r"],
                             py_files=tmp_path / "z", properties_file=tmp_path / "p", app_name="a")
    assert "--py-files" not in command
    assert command[-5:] == ["--deploy-mode", "cluster", f"local://{JOBS_DIR / 'gc.py'}", "--repository-id", "r"]
    client = submit_command(spark=SparkSettings(master=K8S), home=Path("/spark"), entry="gc", args=[],
                            py_files=tmp_path / "z", properties_file=tmp_path / "p", app_name="a")
    assert "--deploy-mode" not in client and client[-3:] == ["--py-files", str(tmp_path / "z"), str(JOBS_DIR / "gc.py")]


def test_cluster_mode_takes_secrets_from_the_driver_pods_environment():
    from spark_jobs.engine.stores import StorageConfig  # noqa: PLC0415
    from spark_jobs.engine.sweep.lease_watch import LeaseRef  # noqa: PLC0415

    conn = LakeFSConnection(endpoint_url="http://lakefs", access_key_id="AKIAEXAMPLE", secret_access_key="lakefs-s3cr3t")
    storage = StorageConfig("", None, json.dumps({"s3": {"key": "s3-key-id", "secret": "s3-s3cr3t",
                                                         "client_kwargs": {"region_name": "eu-west-1"}}}))
    lease = LeaseRef("redis://:redis-pw@redis:6379/0", "k", "t", lease_ms=1, stale_ms=1).to_json()
    refs = {f"spark.kubernetes.driver.secretKeyRef.{name}": f"janitor:{name.lower()}" for name in
            ("LAKEFS_JANITOR_LAKEFS__ACCESS_KEY_ID", "LAKEFS_JANITOR_LAKEFS__SECRET_ACCESS_KEY", "REDIS_URL",
             "S3_KEY", "S3_SECRET", "UNSET")}
    spark = SparkSettings(master=K8S, deploy_mode="cluster", conf=refs)
    env = {"LAKEFS_JANITOR_LAKEFS__ACCESS_KEY_ID": "AKIAEXAMPLE", "LAKEFS_JANITOR_LAKEFS__SECRET_ACCESS_KEY":
           "lakefs-s3cr3t", "REDIS_URL": "redis://:redis-pw@redis:6379/0", "S3_KEY": "s3-key-id",
           "S3_SECRET": "s3-s3cr3t"}
    props = job_properties(spark=spark, python="python3", lakefs=conn, storage=storage, lease_json=lease)
    secrets = secrets_of(lakefs=conn, storage=storage, lease_json=lease)
    assert sorted(secrets) == ["lakefs-s3cr3t", "redis-pw", "s3-key-id", "s3-s3cr3t"]
    shipped = cluster_properties(props, env=env, secrets=secrets)
    assert shipped["spark.hadoop.lakefs.api.secret_key"] == "${env.LAKEFS_JANITOR_LAKEFS__SECRET_ACCESS_KEY}"
    assert shipped["spark.hadoop.lakefs.api.access_key"] == "${env.LAKEFS_JANITOR_LAKEFS__ACCESS_KEY_ID}"
    assert json.loads(shipped["spark.hadoop.lakefs.gc.storage_options"])["s3"] == {
        "key": "${env.S3_KEY}", "secret": "${env.S3_SECRET}", "client_kwargs": {"region_name": "eu-west-1"}}
    assert json.loads(shipped["spark.hadoop.lakefs.gc.lease.token"])["url"] == "${env.REDIS_URL}"
    assert not [k for k, v in shipped.items() for s in secrets if s in v]
    assert shipped["spark.kubernetes.submission.waitAppCompletion"] == "true"
    # A secret the driver pod would not get from a Secret is refused, naming where it would have gone.
    with pytest.raises(SparkSubmitError, match=r"spark.hadoop.lakefs.gc.storage_options would carry a secret .*"
                                               r"spark.kubernetes.driver.secretKeyRef.<VARIABLE>"):
        cluster_properties(props, env={k: v for k, v in env.items() if k != "S3_SECRET"}, secrets=secrets)


def test_an_executors_lost_lease_is_told_apart_from_other_job_failures():
    """An executor's deleter that could not confirm the lease fails its Spark task with LeaseLost; on the driver
    that is a Py4J error carrying the task's traceback as text: the job reports it as lease-lost (jobs/gc.py main),
    as the thread runner does, not as Py4JJavaError."""
    from spark_jobs.jobs.gc import LeaseGuard  # noqa: PLC0415

    py4j = RuntimeError(
        "An error occurred while calling o123.collectAndServe.\n: org.apache.spark.SparkException: Job aborted due "
        "to stage failure: Task 0 in stage 4.0 failed 1 times, most recent failure: Lost task 0.0 (TID 9):\n"
        "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
        '  File "/spark_jobs/engine/sweep/lease_watch.py", line 74, in check\n'
        "spark_jobs.engine.sweep.lease_watch.LeaseLost: the run no longer holds its repository's lease (it expired)\n"
        "\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException\n")
    assert LeaseGuard.lost_in(py4j) == "the run no longer holds its repository's lease (it expired)"
    assert LeaseGuard.lost_in(RuntimeError("spark_jobs.engine.stores.base.StorageError: 503")) is None


def test_the_range_cache_setting_reaches_both_runners_and_zero_turns_it_off():
    from spark_jobs.engine.runtime.range_cache import RangeCacheSettings  # noqa: PLC0415
    from workers.gc.run import range_cache_of  # noqa: PLC0415
    from workers.shared.settings import GCSettings  # noqa: PLC0415

    assert range_cache_of(GCSettings()) == RangeCacheSettings("~/.cache/lakefs-janitor/ranges", 2048)
    assert range_cache_of(GCSettings(range_cache_mib=0)) is None
    chosen = range_cache_of(GCSettings(range_cache_folder="/var/cache/janitor", range_cache_mib=512))
    props = job_properties(spark=SparkSettings(), python="python3", range_cache=chosen)
    job = JobSettings.from_hadoop(lambda key: props.get(f"spark.hadoop.{key}"))
    assert RangeCacheSettings(job.range_cache_folder, job.range_cache_mib) == chosen
    assert "spark.hadoop.lakefs.gc.range_cache.folder" not in job_properties(spark=SparkSettings(), python="python3")
    with pytest.raises(ValueError, match="range_cache_mib"):
        GCSettings(range_cache_mib=-1)


def test_a_killed_starters_job_folder_is_removed_by_the_next_start(tmp_path: Path):
    """A starter killed with SIGKILL cannot remove its job folder (properties with credentials, the zip): the next
    start removes every such folder of a process that is gone, and nothing else."""
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    dead_pid = int(gone.stdout)
    dead = tmp_path / f"{JOB_FOLDER_PREFIX}{dead_pid}-abc"
    (dead / "sub").mkdir(parents=True)
    (dead / "job.properties").write_text("spark.hadoop.lakefs.secret=s")
    alive = tmp_path / f"{JOB_FOLDER_PREFIX}{os.getpid()}-def"  # this process: running
    alive.mkdir()
    others = [tmp_path / f"{JOB_FOLDER_PREFIX}old", tmp_path / f"{JOB_FOLDER_PREFIX}x-1", tmp_path / "elsewhere-1-2"]
    for other in others:
        other.mkdir()
    (tmp_path / f"{JOB_FOLDER_PREFIX}{dead_pid}-file").write_text("not a folder")
    (tmp_path / f"{JOB_FOLDER_PREFIX}{dead_pid}-link").symlink_to(alive)
    assert remove_left_behind(tmp_path) == [dead]
    assert not dead.exists() and alive.exists() and all(o.exists() for o in others)
    assert (tmp_path / f"{JOB_FOLDER_PREFIX}{dead_pid}-file").exists()
    assert (tmp_path / f"{JOB_FOLDER_PREFIX}{dead_pid}-link").is_symlink()
