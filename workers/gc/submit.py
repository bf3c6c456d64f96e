"""The GC's Spark runner from the worker's side: zip the spark_jobs package, `spark-submit` one of its entry points
(spark_jobs/jobs/<entry>.py) to the master from settings, follow the job's events as it runs, and hand back
what it reported. The caller (run/tasks) then reads the summary the job wrote to the storage namespace: the
exit status and that summary together decide success.

Credentials travel in a properties file readable only by us (never on the command line, where `ps` shows
them); Spark redacts keys matching secret/access.key in its UI and logs.
"""

from __future__ import annotations

import collections
import ctypes
import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import spark_jobs
from spark_jobs.jobs.config import JobSettings
from spark_jobs.jobs.protocol import parse_job_event
from workers.shared.settings import LakeFSConnection, SparkSettings

PACKAGE_DIR = Path(spark_jobs.__file__).resolve().parent
JOBS_DIR = PACKAGE_DIR / "jobs"
STDERR_TAIL_LINES = 200
PR_SET_PDEATHSIG = 1
JOB_FOLDER_PREFIX = "lakefs-janitor-spark-"  # + the starter's pid + "-": what a killed starter leaves is found
CLOCK_SKEW = timedelta(minutes=1)  # between this host's clock and the driver pod's node's
SPARK_LOG_LINE = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d [A-Z]+ ")


class SparkSubmitError(RuntimeError):
    """spark-submit could not be started, or the job did not finish: the message says why."""


@dataclass
class JobOutcome:
    returncode: int
    events: list[dict[str, Any]] = field(default_factory=list)
    stderr_tail: str = ""

    def last(self, kind: str) -> dict[str, Any] | None:
        return next((e for e in reversed(self.events) if e.get("event") == kind), None)

    @property
    def result(self) -> dict[str, Any] | None:
        return self.last("result")

    @property
    def error(self) -> dict[str, Any] | None:
        return self.last("error")

    @property
    def success(self) -> bool:
        result = self.result
        return self.returncode == 0 and result is not None and bool(result.get("success"))

    def failure_reason(self) -> str:
        if self.error:
            return str(self.error.get("message") or self.error)
        if self.returncode != 0:
            lines = [line for line in self.stderr_tail.splitlines() if line.strip()]
            # Spark's own log lines (yy/mm/dd hh:mm:ss LEVEL ...) rarely say why; Python's traceback does.
            own = [line for line in lines if not SPARK_LOG_LINE.match(line)]
            interesting = [line for line in own if "Error" in line or "Exception" in line] or own or lines
            return f"spark-submit exited with {self.returncode}: " + " | ".join(interesting[-5:])
        if self.result is None:
            return "the job finished without reporting a result"
        return "the job reported failure"


def build_py_files(dest_dir: Path) -> Path:
    """A zip of the spark_jobs package (Python sources only) for --py-files."""
    target = dest_dir / "spark_jobs.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(PACKAGE_DIR.rglob("*.py")):
            if "__pycache__" not in path.parts:
                archive.write(path, Path("spark_jobs") / path.relative_to(PACKAGE_DIR))
    return target


def spark_home(spark: SparkSettings) -> Path:
    if spark.spark_home:
        return Path(spark.spark_home)
    try:
        import pyspark  # noqa: PLC0415 - the Spark engine is an optional extra
    except ImportError:
        raise SparkSubmitError("the Spark engine needs pyspark: pip install 'lakefs-janitor[spark]', "
                               "or set spark.spark_home to a Spark distribution") from None
    return Path(pyspark.__file__).resolve().parent


def check_java(env: Mapping[str, str]) -> None:
    java_home = env.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return
    if shutil.which("java", path=env.get("PATH")):
        return
    raise SparkSubmitError("Spark needs Java 17 (or 8/11): install it (Debian: openjdk-17-jre-headless) "
                           "or set JAVA_HOME")


def job_properties(*, spark: SparkSettings, python: str, lakefs: LakeFSConnection | None = None, storage=None,
                   lease_json: str | None = None, range_cache=None) -> dict[str, str]:
    """Spark properties for a job: its settings (``spark_jobs.jobs.config.JobSettings``: the seed's tuning keys, the
    lakeFS connection as lakeFS's own Spark client names it, the stores' settings of ``storage``, a
    ``StorageConfig``, and the run's lease), then the user's extra conf, which wins."""
    config = JobSettings(
        read_timeout_seconds=spark.api_read_timeout_seconds,
        connection_timeout_seconds=spark.api_connection_timeout_seconds,
        range_num_partitions=spark.range_num_partitions, address_num_partitions=spark.address_num_partitions,
        daily_driver_ranges=spark.daily_driver_ranges,
        lease_json=lease_json)
    if range_cache is not None:  # a RangeCacheSettings
        config = replace(config, range_cache_folder=range_cache.folder, range_cache_mib=range_cache.max_mib)
    if lakefs is not None:
        config = replace(config, api_url=lakefs.api_url, access_key=lakefs.access_key_id,
                         secret_key=lakefs.secret_access_key.get_secret_value())
    if storage is not None:
        config = replace(config, storage_options_json=storage.options_json or None, local_root=storage.local_root,
                         max_in_flight=storage.max_in_flight)
    props = config.properties()
    props.update({
        "spark.pyspark.python": python,
        "spark.pyspark.driver.python": python,
        "spark.ui.showConsoleProgress": "false",  # the job reports its own progress as events
        "spark.ui.enabled": "false",
    })
    props.update(spark.conf)
    return props


def _escape(text: str) -> str:
    return (text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
            .replace("=", "\\=").replace(":", "\\:").replace("#", "\\#").replace("!", "\\!"))


def write_properties(path: Path, props: Mapping[str, str]) -> None:
    """A Java properties file, created 0600 before anything is written to it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        for key, value in props.items():
            out.write(f"{_escape(key)}={_escape(value)}\n")


def submit_command(*, spark: SparkSettings, home: Path, entry: str, args: Sequence[str], py_files: Path,
                   properties_file: Path, app_name: str) -> list[str]:
    script = JOBS_DIR / f"{entry}.py"
    if not script.exists():
        raise SparkSubmitError(f"no Spark job named {entry!r} (expected {script})")
    command = [str(home / "bin" / "spark-submit"), "--master", spark.master, "--name", app_name,
               "--properties-file", str(properties_file)]
    if spark.deploy_mode == "cluster":
        # The driver pod runs the image this worker runs (deploy/spark/Dockerfile): the package is installed at
        # the same path there, so nothing is uploaded (a local file would need spark.kubernetes.file.upload.path).
        return [*command, "--deploy-mode", "cluster", f"local://{script}", *args]
    return [*command, "--py-files", str(py_files), str(script), *args]


DRIVER_SECRET_ENV = "spark.kubernetes.driver.secretKeyRef."
SECRET_OPTION = re.compile(r"secret|password|token|key|connection_string|sas|credential", re.I)


def secrets_of(*, lakefs: LakeFSConnection | None = None, storage=None, lease_json: str | None = None) -> list[str]:
    """The secret strings a job's properties may carry: lakeFS's secret key, the stores' keys, the password in the
    lease's Redis URL."""
    found = [lakefs.secret_access_key.get_secret_value()] if lakefs is not None else []

    def leaves(tree: Any, name: str = "") -> None:
        if isinstance(tree, dict):
            for key, value in tree.items():
                leaves(value, str(key))
        elif isinstance(tree, str) and tree and SECRET_OPTION.search(name):
            found.append(tree)

    if storage is not None and storage.options_json:
        leaves(json.loads(storage.options_json))
    if lease_json:
        found += re.findall(r"://[^:/@;]*:([^@;]+)@", json.loads(lease_json).get("url", ""))
    return [s for s in found if s]


def cluster_properties(props: Mapping[str, str], *, env: Mapping[str, str], secrets: Sequence[str]) -> dict[str, str]:
    """Properties for a driver in its own pod. spark-submit writes every property into the driver pod's
    ConfigMap, so no secret may be among them: each value of an environment variable the driver pod gets from a
    Secret (``spark.kubernetes.driver.secretKeyRef.<VAR>=<secret>:<key>``) becomes ``${env.<VAR>}`` in the
    job's settings, which Hadoop's configuration expands in the driver when the job reads them. A secret left
    over is an error that names the property to add."""
    names = [k[len(DRIVER_SECRET_ENV):] for k in props if k.startswith(DRIVER_SECRET_ENV)]
    out = dict(props)
    for name in sorted(names, key=lambda n: -len(env.get(n, ""))):  # a longer value first: it may hold a shorter one
        value = env.get(name, "")
        if not value:
            continue
        for key in out:
            if key.startswith("spark.hadoop.") and value in out[key]:
                out[key] = out[key].replace(value, "${env." + name + "}")
    left = sorted({key for key, value in out.items() for secret in secrets if secret in value})
    if left:
        raise SparkSubmitError(
            f"spark.deploy_mode cluster: {', '.join(left)} would carry a secret into the driver pod's ConfigMap; "
            f"give the driver pod the environment variable that holds it from a Secret with "
            f"{DRIVER_SECRET_ENV}<VARIABLE>=<secret>:<key> in spark.conf (the Helm chart does this for "
            "existingSecret)")
    out.setdefault("spark.kubernetes.submission.waitAppCompletion", "true")  # the run ends when the driver does
    return out


def run_job(*, spark: SparkSettings, entry: str, args: Sequence[str] = (), lakefs: LakeFSConnection | None = None,
            storage=None, on_event: Callable[[dict[str, Any]], None] | None = None,
            env: Mapping[str, str] | None = None, app_name: str | None = None,
            lease_json: str | None = None, range_cache=None) -> JobOutcome:
    """Submit spark_jobs/jobs/<entry>.py (settings as ``job_properties``), pass each event it prints to on_event as
    it comes, and return the outcome once spark-submit exits. Killed (with its JVM and Python children) after
    submit_timeout_seconds."""
    home = spark_home(spark)
    python = spark.python or sys.executable
    run_env = dict(env if env is not None else os.environ)
    check_java(run_env)
    run_env["SPARK_HOME"] = str(home)
    run_env["PYSPARK_PYTHON"] = python
    run_env["PYSPARK_DRIVER_PYTHON"] = python
    remove_left_behind(Path(tempfile.gettempdir()))
    with tempfile.TemporaryDirectory(prefix=f"{JOB_FOLDER_PREFIX}{os.getpid()}-") as tmp:
        tmp_dir = Path(tmp)
        py_files = build_py_files(tmp_dir)
        props_file = tmp_dir / "job.properties"
        props = job_properties(spark=spark, python=python, lakefs=lakefs, storage=storage, lease_json=lease_json,
                               range_cache=range_cache)
        if spark.deploy_mode == "cluster":
            props = cluster_properties(props, env=run_env, secrets=secrets_of(lakefs=lakefs, storage=storage,
                                                                             lease_json=lease_json))
        write_properties(props_file, props)
        command = submit_command(spark=spark, home=home, entry=entry, args=args, py_files=py_files,
                                 properties_file=props_file, app_name=app_name or f"lakefs-janitor-{entry}")
        try:
            proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    errors="replace", bufsize=1, env=run_env, cwd=tmp_dir, start_new_session=True,
                                    preexec_fn=functools.partial(_die_with_parent, os.getpid()))
        except OSError as exc:
            raise SparkSubmitError(f"cannot start spark-submit ({command[0]}): {exc.strerror}") from None
        return _follow(proc, on_event, spark.submit_timeout_seconds)


def remove_left_behind(root: Path) -> list[Path]:
    """Remove (and return) the job folders under ``root`` that starters killed before they could remove them
    (SIGKILL, OOM): this user's ``JOB_FOLDER_PREFIX<pid>-*`` folders whose process is gone. They hold the job's
    properties, lakeFS's and the store's credentials among them. A folder whose pid is alive is left alone, even
    when that pid now names another process: it is removed once that one is gone too."""
    removed = []
    for path in root.glob(f"{JOB_FOLDER_PREFIX}*-*"):
        pid = path.name[len(JOB_FOLDER_PREFIX):].partition("-")[0]
        try:
            if not pid.isdigit() or path.is_symlink() or not path.is_dir() or path.lstat().st_uid != os.getuid():
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:  # the starter is gone
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
        except OSError:  # alive (another user's: PermissionError), or the folder went meanwhile
            continue
    return removed


def _die_with_parent(starter_pid: int) -> None:
    """In the child, before exec: on Linux, SIGKILL spark-submit when the thread that started it dies (SIGKILL,
    OOM), so no driver outlives the run's starter on this host. Its own session keeps our terminal's signals
    away from it. Where prctl is missing, the driver still stops through the run's lease (LeaseGuard)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != starter_pid:  # the starter died between fork and prctl
            os._exit(1)


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(20)
    except ProcessLookupError:
        return
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def _follow(proc: subprocess.Popen, on_event: Callable[[dict[str, Any]], None] | None,
            timeout: float) -> JobOutcome:
    tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
    reader = threading.Thread(target=_drain, args=(proc.stderr, tail), daemon=True)
    reader.start()
    timed_out = threading.Event()

    def expire() -> None:
        timed_out.set()
        _kill(proc)

    timer = threading.Timer(timeout, expire)
    timer.daemon = True
    timer.start()
    outcome = JobOutcome(returncode=-1)
    try:
        for line in proc.stdout:
            event = parse_job_event(line.rstrip("\n"))
            if event is None:
                continue
            outcome.events.append(event)
            if on_event is not None:
                on_event(event)
        outcome.returncode = proc.wait()
    except BaseException:
        _kill(proc)  # an interrupted caller must not leave a JVM behind
        raise
    finally:
        timer.cancel()
        reader.join(10)
    outcome.stderr_tail = "".join(tail)
    if timed_out.is_set():
        raise SparkSubmitError(f"the Spark job ran longer than {timeout:g}s and was killed")
    return outcome


def _drain(stream: Iterable[str], tail: collections.deque[str]) -> None:
    for line in stream:
        tail.append(line)


def run_gc(*, spark: SparkSettings, lakefs: LakeFSConnection, request, storage,
           on_event: Callable[[dict[str, Any]], None] | None = None, env: Mapping[str, str] | None = None):
    """A GC run (``spark_jobs.engine.request.RunRequest``) on Spark (spark_jobs/jobs/gc.py). Success needs both a
    clean exit with a result event and the run's record in the namespace (summary.json) saying so; returns that
    record as read back."""
    from spark_jobs.engine.runtime.context import GCError  # noqa: PLC0415
    from spark_jobs.engine.state import report  # noqa: PLC0415
    from spark_jobs.engine.state.report import new_run_id  # noqa: PLC0415
    from spark_jobs.engine.stores import StorageConfig, open_namespace  # noqa: PLC0415

    now = request.now or datetime.now(UTC)
    run_id = request.run_id or (new_run_id(now) if request.mode != "sweep" else None)
    args = replace(request, now=now, run_id=run_id).to_args()
    submitted = datetime.now(UTC)
    outcome = run_job(spark=spark, entry="gc", args=args, lakefs=lakefs, storage=storage, on_event=on_event, env=env,
                      app_name=f"lakefs-janitor-gc-{request.repository_id}",
                      lease_json=request.lease.to_json() if request.lease is not None else None,
                      range_cache=request.range_cache)
    if spark.deploy_mode == "cluster":
        return outcome_from_record(outcome, lakefs=lakefs, request=request, run_id=run_id or request.mark_id or "",
                            storage=storage, submitted=submitted)
    if not outcome.success:
        reason = (outcome.error or {}).get("reason") or "spark"
        raise GCError(f"GC of {request.repository_id} on Spark failed: {outcome.failure_reason()}", reason)
    reported = report.Summary.from_dict(outcome.result.get("summary") or {})
    ns = open_namespace(StorageConfig(reported.storage_namespace, storage.local_root or reported.local_root,
                                      storage.options_json))
    stored = report.read_summary(ns, reported.run_id)
    if stored.run_id != reported.run_id or not stored.success or stored.phase != reported.phase:
        raise GCError(f"GC of {request.repository_id}: the job ended but its summary.json does not report success",
                      "summary-missing")
    return stored


def outcome_from_record(outcome: JobOutcome, *, lakefs: LakeFSConnection, request, run_id: str, storage, submitted: datetime):
    """A run whose driver had its own pod: its events went to that pod's log, not to spark-submit's output, and
    spark-submit exits 0 whatever the driver did (Spark 3.5 on Kubernetes). The run's record in the namespace is
    then the only word on its outcome: it must be there, say success, and be this run's."""
    from spark_jobs.engine.run import resolve_storage  # noqa: PLC0415
    from spark_jobs.engine.runtime.context import GCError  # noqa: PLC0415
    from spark_jobs.engine.runtime.lakefs_api import LakeFSApi, LakeFSApiConfig  # noqa: PLC0415
    from spark_jobs.engine.state import report  # noqa: PLC0415
    from spark_jobs.engine.stores import open_namespace  # noqa: PLC0415

    where = f"GC of {request.repository_id} on Spark (driver pod, run {run_id})"
    if outcome.returncode != 0:
        raise GCError(f"{where} failed: {outcome.failure_reason()}", "spark")
    api = LakeFSApi(LakeFSApiConfig(lakefs.api_url, lakefs.access_key_id, lakefs.secret_access_key.get_secret_value()))
    try:
        ns = open_namespace(resolve_storage(api, request.repository_id, storage))
    finally:
        api.close()
    try:
        stored = report.read_summary(ns, run_id)
    except report.PlanError as exc:
        raise GCError(f"{where}: the driver ended without writing its record ({exc}); its pod's log says why",
                      "summary-missing") from None
    phase = "swept" if request.mode in ("full", "sweep") else "mark"
    fresh = request.mode != "sweep" or (stored.swept_at is not None and
                                        datetime.fromisoformat(stored.swept_at) >= submitted - CLOCK_SKEW)
    if not stored.success or stored.phase != phase or not fresh:
        raise GCError(f"{where} did not succeed: {stored.error or 'its record says phase ' + stored.phase}; its "
                      "pod's log says why", "spark")
    return stored
