"""The Spark plumbing on its own: spark-submit of a shipped job, locally and on a real standalone cluster."""

from __future__ import annotations

from pathlib import Path

from tests.spark.cluster import SparkMaster, SparkWorker
from workers.gc.submit import SparkSubmitError, run_job
from workers.shared.settings import SparkSettings


def test_local_job_reports_events_and_receives_the_seed_keys(local_spark, submit_env):
    seen: list[str] = []
    spark = local_spark.model_copy(update={"range_num_partitions": 50, "address_num_partitions": 200,
                                           "api_read_timeout_seconds": 7, "api_connection_timeout_seconds": 3})
    outcome = run_job(spark=spark, entry="ping", args=["--partitions", "3"], env=submit_env,
                      on_event=lambda e: seen.append(e["event"]))
    assert outcome.success, outcome.failure_reason()
    assert seen == ["progress", "result"]  # followed as they came
    result = outcome.result
    assert result["master"] == "local[2]"
    assert sorted(t["partition"] for t in result["tasks"]) == [0, 1, 2]
    assert result["config"] == {"api_url": None, "range_num_partitions": 50, "address_num_partitions": 200,
                                "daily_driver_ranges": 128, "read_timeout_seconds": 7,
                                "connection_timeout_seconds": 3, "range_cache_folder": None,
                                "range_cache_mib": 2048}


def test_a_job_setting_can_name_the_drivers_environment(local_spark, submit_env):
    """What a driver in its own pod relies on (workers.gc.submit.cluster_properties): a job setting written as
    ${env.VAR} reads as that variable of the driver's environment (Hadoop's configuration expands it), so that
    secrets travel as the pod's environment from a Secret, never in the properties."""
    spark = local_spark.model_copy(update={"conf": {"spark.hadoop.lakefs.api.url": "${env.JANITOR_TEST_API_URL}/v1"}})
    outcome = run_job(spark=spark, entry="ping", args=["--partitions", "1"],
                      env={**submit_env, "JANITOR_TEST_API_URL": "http://lakefs.example.internal/api"})
    assert outcome.success, outcome.failure_reason()
    assert outcome.result["config"]["api_url"] == "http://lakefs.example.internal/api/v1"


def test_job_runs_on_the_standalone_cluster(spark_cluster: tuple[SparkMaster, SparkWorker], cluster_spark,
                                            submit_env):
    master, worker = spark_cluster
    outcome = run_job(spark=cluster_spark, entry="ping", args=["--partitions", "2"], env=submit_env,
                      app_name="janitor-cluster-ping")
    assert outcome.success, outcome.failure_reason() + outcome.stderr_tail
    result = outcome.result
    assert result["master"] == master.url
    # Every task ran in a Python worker of the standalone worker's executor, inside its work directory
    # (<work-dir>/<app-id>/<executor-id>), not in the driver.
    for task in result["tasks"]:
        assert Path(task["cwd"]).resolve().is_relative_to(worker.work_dir.resolve()), task
        assert task["pid"] != result["driver_pid"]
    assert (worker.work_dir / result["app_id"]).is_dir()
    assert len(result["block_managers"]) == 2  # the driver and the worker's one executor
    completed = {app["id"]: app for app in master.state()["completedapps"]}
    assert completed[result["app_id"]]["name"] == "janitor-cluster-ping"


def test_failing_job_gives_a_clear_reason(local_spark, submit_env):
    outcome = run_job(spark=local_spark, entry="ping", args=["--partitions", "not-a-number"], env=submit_env)
    assert not outcome.success
    assert "invalid int value" in outcome.failure_reason()


def test_unknown_entry_and_missing_java_are_clear_errors(local_spark, submit_env):
    import pytest  # noqa: PLC0415

    with pytest.raises(SparkSubmitError, match="no Spark job named 'nope'"):
        run_job(spark=local_spark, entry="nope", env=submit_env)
    no_java = {**submit_env, "PATH": "/nonexistent"}
    no_java.pop("JAVA_HOME", None)
    with pytest.raises(SparkSubmitError, match="Spark needs Java"):
        run_job(spark=SparkSettings(master="local[1]"), entry="ping", env=no_java)
