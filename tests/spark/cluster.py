"""A real Spark standalone cluster on 127.0.0.1: one master and one small worker, started from the pyspark
distribution's own `spark-class`, each with its logs and work directory in a temporary directory.

The master's web UI cannot be switched off (it is also where `/json/` reports workers and applications, which
the tests read to prove that an application really ran on the cluster); it listens on loopback only.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import requests

from tests.services import Service, free_port, wait_until


def spark_home() -> Path:
    import pyspark  # noqa: PLC0415 - only the Spark tests need it

    return Path(pyspark.__file__).resolve().parent


def spark_env(base: dict[str, str] | None = None, **extra: str) -> dict[str, str]:
    """Environment for Spark processes bound to loopback, with no user Spark configuration leaking in."""
    env = {k: v for k, v in (base or os.environ).items() if not k.startswith(("SPARK_", "PYSPARK_"))}
    env.update({
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_HOSTNAME": "127.0.0.1",
    })
    env.update(extra)
    return env


class SparkMaster(Service):
    name = "spark-master"

    def __init__(self) -> None:
        super().__init__()
        self.ui_port = free_port()
        (self.dir / "conf").mkdir()

    def start(self) -> SparkMaster:
        if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
            raise RuntimeError("Spark needs Java 17 (Debian package openjdk-17-jre-headless); run scripts/install.sh")
        env = spark_env(SPARK_CONF_DIR=str(self.dir / "conf"), SPARK_LOG_DIR=str(self.dir),
                        SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false -Dspark.ui.reverseProxy=false")
        self._spawn([str(spark_home() / "bin" / "spark-class"), "org.apache.spark.deploy.master.Master",
                     "--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(self.ui_port)], env)
        wait_until(lambda: requests.get(f"{self.ui_url}/json/", timeout=2).json().get("status") == "ALIVE",
                   90, "Spark master", self.proc, self.log)
        return self

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    @property
    def ui_url(self) -> str:
        return f"http://127.0.0.1:{self.ui_port}"

    def state(self) -> dict:
        """The master's view: workers, active and completed applications."""
        return requests.get(f"{self.ui_url}/json/", timeout=5).json()


class SparkWorker(Service):
    name = "spark-worker"

    def __init__(self, master: SparkMaster, *, cores: int = 1, memory: str = "1g") -> None:
        super().__init__()
        self.master = master
        self.cores = cores
        self.memory = memory
        self.ui_port = free_port()
        self.work_dir = self.dir / "work"
        (self.dir / "conf").mkdir()

    def start(self) -> SparkWorker:
        env = spark_env(SPARK_CONF_DIR=str(self.dir / "conf"), SPARK_LOG_DIR=str(self.dir),
                        SPARK_WORKER_DIR=str(self.work_dir))
        self._spawn([str(spark_home() / "bin" / "spark-class"), "org.apache.spark.deploy.worker.Worker",
                     self.master.url, "--host", "127.0.0.1", "--port", str(self.port),
                     "--webui-port", str(self.ui_port), "--cores", str(self.cores), "--memory", self.memory,
                     "--work-dir", str(self.work_dir)], env)
        wait_until(self._registered, 90, "Spark worker", self.proc, self.log)
        return self

    def _registered(self) -> bool:
        workers = self.master.state().get("workers", [])
        return any(w.get("state") == "ALIVE" and w.get("port") == self.port for w in workers)
