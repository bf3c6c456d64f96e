"""The Spark engine's submit side without Spark: the shipped zip, the properties file, the job configuration."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from spark_jobs.jobs.config import JobConfig, JobConfigError
from spark_jobs.jobs.protocol import EVENT_PREFIX, parse_event
from workers.gc.submit import JobOutcome, build_py_files, job_properties, submit_command, write_properties
from workers.settings import LakeFSConnection, SparkSettings


def test_zip_holds_the_whole_package_and_nothing_else(tmp_path: Path):
    names = set(zipfile.ZipFile(build_py_files(tmp_path)).namelist())
    assert {"spark_jobs/__init__.py", "spark_jobs/jobs/gc.py", "spark_jobs/jobs/protocol.py",
            "spark_jobs/core/__init__.py", "spark_jobs/core/sstable.py"} <= names
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
    config = JobConfig.from_hadoop({}.get)
    assert (config.range_num_partitions, config.address_num_partitions) == (50, 200)
    assert config.timeouts == (10, 10)
    with pytest.raises(JobConfigError, match="lakefs.gc.range.num_partitions='0' must be positive"):
        JobConfig.from_hadoop({"lakefs.gc.range.num_partitions": "0"}.get)
    with pytest.raises(JobConfigError, match="is not an integer"):
        JobConfig.from_hadoop({"lakefs.api.read.timeout_seconds": "ten"}.get)


def test_events_and_outcome():
    assert parse_event(EVENT_PREFIX + '{"event": "result", "success": true}') == {"event": "result", "success": True}
    assert parse_event("INFO something") is None
    assert parse_event(EVENT_PREFIX + "not json") is None
    failed = JobOutcome(returncode=1, stderr_tail="26/11/22 15:45:04 INFO a\nValueError: boom\n")
    assert not failed.success and failed.failure_reason() == "spark-submit exited with 1: ValueError: boom"
    assert not JobOutcome(returncode=0).success


def test_spark_master_setting_is_checked():
    with pytest.raises(ValueError, match="is not a Spark master"):
        SparkSettings(master="localhost:7077")


def test_distribution_helpers():
    from spark_jobs.jobs.distribute import _partitions, batches  # noqa: PLC0415

    assert (_partitions(0, 50), _partitions(3, 50), _partitions(500, 50)) == (1, 3, 50)
    assert batches(range(5), 2) == [[0, 1], [2, 3], [4]]
    assert batches([], 1000) == []
