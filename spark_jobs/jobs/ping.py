"""The smallest job: run one task per partition and report where each ran and what configuration arrived.
Proves a cluster's executors run the shipped package with the configuration given (tests/spark/test_cluster.py
submits it) and lets tests see executors really ran."""

from __future__ import annotations

import os
import socket
import sys


def _where(index: int, _rows):
    yield {"partition": index, "pid": os.getpid(), "cwd": os.getcwd(), "host": socket.gethostname()}


def main(argv: list[str]) -> int:
    from spark_jobs.jobs.config import hadoop_config, spark_context  # noqa: PLC0415 - after --py-files is set up
    from spark_jobs.jobs.protocol import JobArgumentParser, emit  # noqa: PLC0415

    parser = JobArgumentParser(prog="ping")
    parser.add_argument("--partitions", type=int, default=2)
    args = parser.parse_args(argv)
    sc = spark_context()
    try:
        config = hadoop_config(sc)
        emit("progress", phase="start", app_id=sc.applicationId, master=sc.master)
        tasks = sc.parallelize(range(args.partitions), args.partitions).mapPartitionsWithIndex(_where).collect()
        infos = sc._jsc.sc().statusTracker().getExecutorInfos()  # noqa: SLF001 - driver included
        executors = sorted(f"{info.host()}:{info.port()}" for info in infos)
        emit("result", success=True, app_id=sc.applicationId, master=sc.master, tasks=tasks,
             block_managers=executors, driver_pid=os.getpid(), config=config.public())
    finally:
        sc.stop()
    return 0


if __name__ == "__main__":
    from spark_jobs.jobs.protocol import run_main

    sys.exit(run_main(main, sys.argv[1:]))
