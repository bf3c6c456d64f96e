"""The Helm chart (deploy/helm/lakefs-janitor): helm lint and helm template with the minimal values and with every
option on, the rendered manifests validated offline against the Kubernetes API's schemas (strict: unknown fields
and wrong types are errors), and the properties the chart promises: one beat, probes, non-root pods, requests,
secrets only from the existing Secret, settings the code accepts, Spark on Kubernetes wired through.

helm, kubernetes-validate and the prometheus-operator CRDs come from scripts/build-k8s-tools.sh (make install)."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from workers.cli import main as cli_main
from workers.shared.settings import ENV_PREFIX, load_settings
from workers.shared.settings_sources import CONFIG_FILE_ENV

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "deploy/helm/lakefs-janitor"
MINIMAL = CHART / "ci/minimal-values.yaml"
ALL_ON = CHART / "ci/all-on-values.yaml"
VALUES_FILES = {"minimal": MINIMAL, "all-on": ALL_ON}
VALIDATOR = Path(__file__).with_name("k8s_schemas.py")
# The oldest release the chart supports (Chart.yaml kubeVersion) and the newest the validator knows.
KUBE_VERSIONS = ("1.25", "1.37")
SECRET_SETTINGS = ("LAKEFS_JANITOR_WEBHOOK_SECRET", "LAKEFS_JANITOR_LAKEFS__SECRET_ACCESS_KEY",
                   "LAKEFS_JANITOR_LAKEFS__ACCESS_KEY_ID", "LAKEFS_JANITOR_GC__S3_SECRET_ACCESS_KEY",
                   "LAKEFS_JANITOR_GC__S3_ACCESS_KEY_ID")
WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "ReplicaSet", "Pod")


@pytest.fixture(scope="session")
def tools() -> dict[str, str]:
    out = subprocess.run([str(ROOT / "scripts/build-k8s-tools.sh")], capture_output=True, text=True, check=False,
                         timeout=1800)
    assert out.returncode == 0, f"scripts/build-k8s-tools.sh failed:\n{out.stderr}"
    return dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)


def helm(tools: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HELM_")}
    env["HOME"] = os.environ.get("HOME", "/tmp")
    result = subprocess.run([tools["helm"], *args], capture_output=True, text=True, timeout=120, env=env,
                            check=False)
    if check:
        assert result.returncode == 0, f"helm {' '.join(args)}:\n{result.stdout}\n{result.stderr}"
    return result


def render_text(tools, *values: Path, sets: tuple[str, ...] = (), chart: Path = CHART, kube: str = "1.30.0",
                check: bool = True) -> subprocess.CompletedProcess:
    args = ["template", "janitor", str(chart), "--namespace", "lakefs", "--kube-version", kube]
    for path in values:
        args += ["-f", str(path)]
    for item in sets:
        args += ["--set", item]
    return helm(tools, *args, check=check)


def render(tools, *values: Path, sets: tuple[str, ...] = ()) -> list[dict]:
    return [d for d in yaml.safe_load_all(render_text(tools, *values, sets=sets).stdout) if d]


@pytest.fixture(scope="module", params=sorted(VALUES_FILES))
def rendered(request, tools) -> tuple[str, list[dict]]:
    return request.param, render(tools, VALUES_FILES[request.param])


@pytest.fixture(scope="module")
def all_on(tools) -> list[dict]:
    return render(tools, ALL_ON)


def by_kind(docs: list[dict], kind: str) -> list[dict]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[dict], kind: str, suffix: str) -> dict:
    found = [d for d in by_kind(docs, kind) if d["metadata"]["name"].endswith(suffix)]
    assert len(found) == 1, f"{kind} *{suffix}: {[d['metadata']['name'] for d in by_kind(docs, kind)]}"
    return found[0]


def pod_specs(docs: list[dict]) -> list[tuple[str, dict]]:
    """(name, pod spec) of every workload, plus the Spark executors' pod template when there is one."""
    specs = [(f"{d['kind']}/{d['metadata']['name']}", d["spec"]["template"]["spec"]) for d in docs
             if d["kind"] in WORKLOADS and d["kind"] != "Pod"]
    return specs + [("executor pod template", p["spec"]) for p in executor_templates(docs)]


def executor_templates(docs: list[dict]) -> list[dict]:
    return [yaml.safe_load(cm["data"]["executor-pod.yaml"]) for cm in by_kind(docs, "ConfigMap")
            if "executor-pod.yaml" in cm.get("data", {})]


def containers(docs: list[dict]) -> list[tuple[str, dict]]:
    return [(f"{name}/{c['name']}", c) for name, spec in pod_specs(docs)
            for c in spec.get("containers", []) + spec.get("initContainers", [])]


def validate(tools, tmp_path: Path, docs: list[dict], kube: str) -> list[dict]:
    path = tmp_path / "manifests.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    python = Path(tools["kubernetes-validate"]).with_name("python")
    out = subprocess.run([str(python), str(VALIDATOR), "--kube-version", kube, "--crds",
                          tools["prometheus-operator-crds"], str(path)], capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode in (0, 1), out.stderr
    return json.loads(out.stdout)


# --- lint and schemas -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("values", sorted(VALUES_FILES))
def test_helm_lint(tools, values):
    result = helm(tools, "lint", str(CHART), "--strict", "--kube-version", "1.30.0", "-f", str(VALUES_FILES[values]))
    assert "0 chart(s) failed" in result.stdout


@pytest.mark.parametrize("kube", KUBE_VERSIONS)
def test_rendered_manifests_match_the_kubernetes_schemas(tools, tmp_path, rendered, kube):
    name, docs = rendered
    problems = validate(tools, tmp_path, docs + executor_templates(docs), kube)
    assert not problems, f"{name} values, Kubernetes {kube}:\n" + json.dumps(problems, indent=1)


def test_the_validator_rejects_unknown_fields_and_wrong_types(tools, tmp_path, all_on):
    """The validation above means something: each of these changes is caught."""
    def broken(kind: str, suffix: str, change) -> list[dict]:
        docs = copy.deepcopy(all_on)
        change(one(docs, kind, suffix))
        return validate(tools, tmp_path, docs, "1.30")

    cases = {
        "unknown container field": ("Deployment", "-worker",
                                    lambda d: d["spec"]["template"]["spec"]["containers"][0].update(comand=["x"])),
        "replicas as a string": ("Deployment", "-receiver", lambda d: d["spec"].update(replicas="two")),
        "port as a list": ("Service", "-receiver", lambda d: d["spec"]["ports"][0].update(port=[8080])),
        "unknown ServiceMonitor field": ("ServiceMonitor", "janitor-lakefs-janitor",
                                         lambda d: d["spec"]["endpoints"][0].update(scrapeIntervall="1m")),
        "unknown PrometheusRule field": ("PrometheusRule", "janitor-lakefs-janitor",
                                         lambda d: d["spec"]["groups"][0]["rules"][0].update(severity="x")),
    }
    for what, (kind, suffix, change) in cases.items():
        assert broken(kind, suffix, change), f"the validator accepted: {what}"
    unknown_kind = copy.deepcopy(all_on) + [{"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {}}]
    assert validate(tools, tmp_path, unknown_kind, "1.30"), "a kind without a schema must be an error"


def test_the_ci_values_turn_every_option_on(tools):
    """all-on-values.yaml switches on every optional resource; a new option must be added there."""
    values = yaml.safe_load(ALL_ON.read_text())
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())

    def switches(tree: dict, path: str = "") -> list[str]:
        found = []
        for key, value in tree.items():
            if key in ("enabled", "create") and isinstance(value, bool):
                found.append(path + key)
            elif isinstance(value, dict):
                found += switches(value, f"{path}{key}.")
        return found

    def get(tree: dict, dotted: str):
        for part in dotted.split("."):
            tree = tree.get(part, {}) if isinstance(tree, dict) else {}
        return tree

    for switch in switches(defaults):
        assert get(values, switch) is True or get(defaults, switch) is True, f"{switch} is off in all-on-values.yaml"
    assert values["spark"]["master"].startswith("k8s://")
    kinds = {d["kind"] for d in render(tools, ALL_ON)}
    assert kinds >= {"Deployment", "StatefulSet", "Service", "Ingress", "ConfigMap", "ServiceAccount", "Role",
                     "RoleBinding", "PodDisruptionBudget", "ServiceMonitor", "PrometheusRule"}


def test_required_values_fail_with_a_message(tools):
    bare = render_text(tools, check=False)
    assert bare.returncode != 0 and "lakefs.endpointUrl" in bare.stderr
    no_secret = render_text(tools, sets=("lakefs.endpointUrl=http://lakefs",), check=False)
    assert no_secret.returncode != 0 and "existingSecret" in no_secret.stderr
    no_redis = render_text(tools, sets=("lakefs.endpointUrl=http://lakefs", "existingSecret=s"), check=False)
    assert no_redis.returncode != 0 and "redis.url" in no_redis.stderr


# --- the properties the chart promises -----------------------------------------------------------------------

def command_of(container: dict) -> list[str]:
    return container.get("command", []) + container.get("args", [])


def test_exactly_one_beat_that_never_becomes_two(tools, rendered):
    _, docs = rendered
    beats = [(name, c) for name, c in containers(docs) if "beat" in command_of(c)]
    assert len(beats) == 1, beats
    assert all("-B" not in command_of(c) and "--beat" not in command_of(c) for _, c in containers(docs))
    beat = one(docs, "StatefulSet", "-beat")
    # A StatefulSet of one: a rollout deletes the old pod before creating the new one, and a lost node's pod is
    # not replaced until it is known to be gone. No Deployment runs beat (its rollout would overlap two).
    assert beat["spec"]["replicas"] == 1
    assert beat["spec"]["updateStrategy"]["type"] == "RollingUpdate"
    assert beat["spec"]["podManagementPolicy"] == "OrderedReady"
    governing = one(docs, "Service", "-beat")
    assert beat["spec"]["serviceName"] == governing["metadata"]["name"] and governing["spec"]["clusterIP"] == "None"
    # No value can scale it.
    scaled = render(tools, VALUES_FILES["minimal"], sets=("beat.replicas=3", "beat.replicaCount=3"))
    assert one(scaled, "StatefulSet", "-beat")["spec"]["replicas"] == 1


def test_receiver_probes_use_healthz(rendered):
    _, docs = rendered
    receiver = one(docs, "Deployment", "-receiver")["spec"]["template"]["spec"]["containers"][0]
    for probe in ("startupProbe", "readinessProbe"):
        assert receiver[probe]["httpGet"] == {"path": "/healthz", "port": "http"}, probe
    # Liveness does not depend on Redis (/healthz does): a Redis outage must not restart every receiver.
    assert receiver["livenessProbe"]["httpGet"]["path"] == "/metrics"
    assert {p["name"]: p["containerPort"] for p in receiver["ports"]} == {"http": 8080}
    worker = one(docs, "Deployment", "-worker")["spec"]["template"]["spec"]["containers"][0]
    assert worker["livenessProbe"]["httpGet"] == {"path": "/metrics", "port": "metrics"}


def test_every_pod_runs_as_non_root_with_a_read_only_root(rendered):
    _, docs = rendered
    specs = pod_specs(docs)
    assert specs
    for name, spec in specs:
        pod = spec.get("securityContext", {})
        assert pod.get("runAsNonRoot") is True and pod.get("runAsUser", 0) != 0, name
        assert pod.get("seccompProfile", {}).get("type") == "RuntimeDefault", name
        if name != "executor pod template":  # Spark executors are not ours to lock down further
            assert spec["automountServiceAccountToken"] in (True, False), name
    for name, container in containers(docs):
        sc = container.get("securityContext", {})
        assert sc.get("allowPrivilegeEscalation") is False, name
        assert sc.get("capabilities", {}).get("drop") == ["ALL"], name
        if not name.startswith("executor pod template"):
            assert sc.get("readOnlyRootFilesystem") is True, name
    # With a read-only root, every janitor container writes only to its volumes: /tmp at least.
    for name, container in containers(docs):
        if "/redis" in name or name.startswith("executor"):
            continue
        mounts = {m["mountPath"] for m in container["volumeMounts"]}
        assert "/tmp" in mounts, name


def test_only_the_worker_that_drives_spark_on_kubernetes_gets_an_api_token(rendered):
    name, docs = rendered
    for pod_name, spec in pod_specs(docs):
        if pod_name == "executor pod template":
            assert spec["automountServiceAccountToken"] is False
            continue
        wants = name == "all-on" and pod_name.endswith("-worker")
        assert spec["automountServiceAccountToken"] is wants, pod_name


def test_every_container_requests_cpu_and_memory(rendered):
    _, docs = rendered
    for name, container in containers(docs):
        if name.startswith("executor"):
            continue  # Spark sets the executors' own from spark.executor.cores / memory
        requests = container.get("resources", {}).get("requests", {})
        assert requests.get("cpu") and requests.get("memory"), name
        assert container["resources"].get("limits", {}).get("memory"), name


def env_of(container: dict) -> dict[str, dict]:
    return {e["name"]: e for e in container.get("env", [])}


def test_secrets_come_only_from_the_existing_secret(rendered):
    name, docs = rendered
    assert not by_kind(docs, "Secret"), "the chart never creates a Secret"
    for name, container in containers(docs):
        env = env_of(container)
        for key in SECRET_SETTINGS:
            if key in env:
                assert "value" not in env[key], f"{name}: {key} inline"
                assert env[key]["valueFrom"]["secretKeyRef"]["name"] == "lakefs-janitor", name
    settings = yaml.safe_load(one(docs, "ConfigMap", "janitor-lakefs-janitor")["data"]["config.yaml"])

    def keys(tree: dict, prefix: str = "") -> set[str]:
        return set().union(*([{prefix + k} | (keys(v, f"{prefix}{k}.") if isinstance(v, dict) else set())
                              for k, v in tree.items()] or [set()]))

    secret_keys = {"webhook_secret", "lakefs", "lakefs.secret_access_key", "lakefs.access_key_id",
                   "gc.s3_secret_access_key", "gc.s3_access_key_id", "redis_url", "broker_url"}
    assert not keys(settings) & secret_keys, sorted(keys(settings) & secret_keys)
    if name == "all-on":  # extraSecretEnv: more settings from the Secret
        worker = one(docs, "Deployment", "-worker")["spec"]["template"]["spec"]["containers"][0]
        assert env_of(worker)["LAKEFS_JANITOR_LIFECYCLE_NOTIFY_URL"]["valueFrom"]["secretKeyRef"] == {
            "name": "lakefs-janitor", "key": "lifecycle-notify-url"}


@pytest.mark.parametrize("setting", ["config.webhook_secret=hunter2", "config.lakefs.secret_access_key=hunter2",
                                     "config.gc.s3_secret_access_key=hunter2",
                                     "config.gc.azure_account_key=hunter2", "config.lakefs.access_key_id=hunter2",
                                     "config.redis_url=redis://:hunter2@redis:6379/0",
                                     "config.broker_url=redis://user:hunter2@redis:6379/1"])
def test_a_secret_in_config_is_refused(tools, setting):
    result = render_text(tools, MINIMAL, sets=(setting,), check=False)
    assert result.returncode != 0 and "existingSecret" in result.stderr, result.stderr
    assert "hunter2" not in result.stdout


def test_a_redis_url_with_a_password_comes_from_the_secret(tools):
    docs = render(tools, MINIMAL, sets=("secretKeys.redisUrl=redis-url", "redis.url="))
    for name, container in containers(docs):
        ref = env_of(container)["LAKEFS_JANITOR_REDIS_URL"]["valueFrom"]["secretKeyRef"]
        assert ref == {"name": "lakefs-janitor", "key": "redis-url"}, name


def test_a_redis_with_sentinel(tools, tmp_path, monkeypatch):
    """The Sentinels in redis.url, the master name in config, the Sentinels' password from the Secret."""
    url = "sentinel://s1.redis:26379/0;sentinel://s2.redis:26379"
    docs = render(tools, MINIMAL, sets=(f"redis.url={url}", "config.redis_sentinel_master=mymaster",
                                        "extraSecretEnv.LAKEFS_JANITOR_REDIS_SENTINEL_PASSWORD=sentinel-password"))
    worker = one(docs, "Deployment", "-worker")["spec"]["template"]["spec"]["containers"][0]
    settings = settings_of(tmp_path, docs, worker, monkeypatch)
    assert (settings.redis_url, settings.redis_sentinel_master) == (url, "mymaster")
    assert settings.redis_sentinel_password is not None
    refused = render_text(tools, MINIMAL, sets=("config.redis_sentinel_password=hunter2",), check=False)
    assert refused.returncode != 0 and "extraSecretEnv" in refused.stderr and "hunter2" not in refused.stdout


def placeholder(name: str) -> str:
    """A value of the right form for a setting that comes from the Secret."""
    if name.endswith("REDIS_URL"):
        return "redis://:placeholder@redis.example.internal:6379/0"
    if name.endswith("_URL"):
        return "https://hooks.example.internal/placeholder"
    return f"placeholder-{name.lower()}"


def settings_of(tmp_path: Path, docs: list[dict], container: dict, monkeypatch):
    """The Settings the code builds in this container: its env (secrets as placeholders) and the config file."""
    config = one(docs, "ConfigMap", "janitor-lakefs-janitor")["data"]["config.yaml"]
    path = tmp_path / "config.yaml"
    path.write_text(config)
    for key in list(os.environ):
        if key.startswith((ENV_PREFIX, "LAKECTL_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", str(tmp_path))
    for name, entry in env_of(container).items():
        if name.startswith((ENV_PREFIX, "LAKECTL_")):
            monkeypatch.setenv(name, entry.get("value") or placeholder(name))
    monkeypatch.setenv(CONFIG_FILE_ENV, str(path))
    return load_settings()


def test_the_settings_file_is_one_the_code_accepts(rendered, tmp_path, monkeypatch):
    name, docs = rendered
    worker = one(docs, "Deployment", "-worker")["spec"]["template"]["spec"]["containers"][0]
    settings = settings_of(tmp_path, docs, worker, monkeypatch)  # unknown or misspelt keys raise
    assert settings.lakefs.endpoint_url == "http://lakefs.lakefs.svc.cluster.local"
    assert settings.worker_metrics_port == 9540 and settings.worker_metrics_addr == "0.0.0.0"
    if name == "all-on":
        assert settings.gc.trigger_commits == 100 and settings.lifecycle_max_deletions == 50
        assert settings.redis_url == "redis://janitor-lakefs-janitor-redis:6379/0"
        assert one(docs, "Service", "-redis")["metadata"]["name"] == "janitor-lakefs-janitor-redis"


def test_commands_exist(rendered):
    """The containers run commands this version has: `lakefs-janitor serve`, celery worker and beat."""
    _, docs = rendered
    for name, container in containers(docs):
        command = command_of(container)
        if command[:1] == ["lakefs-janitor"]:
            assert command[1] in cli_main.commands, name
            options = {o for p in cli_main.commands[command[1]].params for o in p.opts}
            assert {a for a in command[2:] if a.startswith("--")} <= options, name
        elif command[:1] == ["celery"]:
            assert command[1:4] in (["-A", "workers.celery.worker", "worker"], ["-A", "workers.celery.worker", "beat"])


def test_monitoring_resources(all_on):
    monitor = one(all_on, "ServiceMonitor", "janitor-lakefs-janitor")
    services = {s["metadata"]["name"]: s for s in by_kind(all_on, "Service")}
    selected = [s for s in services.values()
                if all(s["metadata"]["labels"].get(k) == v for k, v in monitor["spec"]["selector"]["matchLabels"].items())
                and s["metadata"]["labels"]["app.kubernetes.io/component"] in ("receiver", "worker")]
    # The job names come from the Services' label, and are the ones the alerts match.
    jobs = {s["metadata"]["labels"][monitor["spec"]["jobLabel"]] for s in selected}
    assert jobs == {"lakefs-janitor-receiver", "lakefs-janitor-worker"}
    alerts = yaml.safe_load((ROOT / "deploy/prometheus/alerts.yml").read_text())
    assert 'job=~"lakefs-janitor-(receiver|worker)"' in json.dumps(alerts).replace('\\"', '"')
    ports = {p["name"] for s in selected for p in s["spec"]["ports"]}
    assert {e["port"] for e in monitor["spec"]["endpoints"]} == ports == {"http", "metrics"}
    rule = one(all_on, "PrometheusRule", "janitor-lakefs-janitor")
    assert rule["spec"]["groups"] == alerts["groups"]
    dashboard = one(all_on, "ConfigMap", "-dashboard")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["lakefs-janitor.json"]) == json.loads(
        (ROOT / "deploy/grafana/dashboards/lakefs-janitor.json").read_text())


def test_the_chart_copies_of_the_dashboard_and_alerts_are_identical():
    for chart_file, source in (("files/lakefs-janitor.json", "deploy/grafana/dashboards/lakefs-janitor.json"),
                               ("files/alerts.yml", "deploy/prometheus/alerts.yml")):
        assert (CHART / chart_file).read_text() == (ROOT / source).read_text(), (
            f"copy {source} to {CHART.relative_to(ROOT)}/{chart_file}")


def test_optional_resources_are_off_by_default(tools):
    docs = render(tools, MINIMAL)
    kinds = {d["kind"] for d in docs}
    assert not kinds & {"Ingress", "ServiceMonitor", "PrometheusRule", "Role", "RoleBinding", "Secret"}
    assert [d["metadata"]["name"] for d in by_kind(docs, "ConfigMap")] == ["janitor-lakefs-janitor"]
    assert not [d for d in by_kind(docs, "Deployment") if d["metadata"]["name"].endswith("-redis")]


# --- Spark on Kubernetes -------------------------------------------------------------------------------------

def test_spark_on_kubernetes_is_wired_through(all_on, tmp_path, monkeypatch):
    from workers.gc.submit import job_properties  # noqa: PLC0415 - the worker side of spark-submit

    worker = one(all_on, "Deployment", "-worker")["spec"]["template"]["spec"]
    container = worker["containers"][0]
    settings = settings_of(tmp_path, all_on, container, monkeypatch)
    assert settings.spark.master == "k8s://https://kubernetes.default.svc:443"
    props = job_properties(spark=settings.spark, python="/usr/local/bin/python3")
    assert props["spark.kubernetes.container.image"] == "registry.example.internal/lakefs-janitor-spark:0.1.0"
    assert props["spark.kubernetes.namespace"] == "spark-jobs"
    assert props["spark.submit.deployMode"] == "client"
    assert props["spark.executor.instances"] == "4" and props["spark.executor.memoryOverhead"] == "1g"
    executor_sa = props["spark.kubernetes.authenticate.executor.serviceAccountName"]
    assert one(all_on, "ServiceAccount", "-spark-executor")["metadata"] == {
        **one(all_on, "ServiceAccount", "-spark-executor")["metadata"], "name": executor_sa, "namespace": "spark-jobs"}
    # The worker is the driver: executors reach it at its pod IP on fixed ports.
    env = env_of(container)
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert env["SPARK_LOCAL_IP"]["value"] == "$(POD_IP)"
    # Executors in another namespace than the worker's: the worker pod cannot own them.
    assert env["SPARK_SUBMIT_OPTS"]["value"].split() == ["-Dspark.driver.host=$(POD_IP)"]
    assert list(env).index("POD_IP") < list(env).index("SPARK_SUBMIT_OPTS")  # $(POD_IP) expands only then
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["spark-driver"] == int(props["spark.driver.port"])
    assert ports["spark-blockmgr"] == int(props["spark.blockManager.port"])
    # The executors' pod template is mounted where the property says.
    template_path = Path(props["spark.kubernetes.executor.podTemplateFile"])
    mount = next(m for m in container["volumeMounts"] if m["name"] == "config")
    volume = next(v for v in worker["volumes"] if v["name"] == "config")
    assert str(template_path.relative_to(mount["mountPath"])) in {i["path"] for i in volume["configMap"]["items"]}
    # The worker's service account may manage pods in the executors' namespace, and nothing else there.
    binding = one(all_on, "RoleBinding", "-spark-driver")
    assert binding["metadata"]["namespace"] == "spark-jobs"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": worker["serviceAccountName"],
                                    "namespace": "lakefs"}]
    role = one(all_on, "Role", "-spark-driver")
    assert {r for rule in role["rules"] for r in rule["resources"]} == {"pods", "configmaps", "persistentvolumeclaims"}


def test_executors_in_the_release_namespace_are_owned_by_the_worker_pod(tools):
    docs = render(tools, ALL_ON, sets=("spark.kubernetes.namespace=",))
    container = one(docs, "Deployment", "-worker")["spec"]["template"]["spec"]["containers"][0]
    assert env_of(container)["SPARK_SUBMIT_OPTS"]["value"].split() == [
        "-Dspark.driver.host=$(POD_IP)", "-Dspark.kubernetes.driver.pod.name=$(POD_NAME)"]
    assert env_of(container)["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert {d["metadata"].get("namespace") for d in by_kind(docs, "Role") + by_kind(docs, "RoleBinding")} == {"lakefs"}


def test_the_worker_is_the_driver_by_default(all_on, tmp_path, monkeypatch):
    """Client mode (the default): no driver pod, its account, template or Role; no secret references."""
    assert not [d for d in by_kind(all_on, "Role") if d["metadata"]["name"].endswith("-spark-submit")]
    assert not [d for d in by_kind(all_on, "ServiceAccount") if d["metadata"]["name"].endswith("-spark-driver")]
    assert not driver_templates(all_on)
    container = one(all_on, "Deployment", "-worker")["spec"]["template"]["spec"]["containers"][0]
    spark = settings_of(tmp_path, all_on, container, monkeypatch).spark
    assert spark.deploy_mode == "client"
    assert not [k for k in spark.conf if k.startswith(("spark.kubernetes.driver.", "spark.driver.memory"))]


# --- the Spark driver in a pod of its own (spark.kubernetes.deployMode cluster) ------------------------------

CLUSTER_MODE = ("spark.kubernetes.deployMode=cluster",)


@pytest.fixture(scope="module")
def cluster_mode(tools) -> list[dict]:
    return render(tools, ALL_ON, sets=CLUSTER_MODE)


def driver_templates(docs: list[dict]) -> list[dict]:
    return [yaml.safe_load(cm["data"]["driver-pod.yaml"]) for cm in by_kind(docs, "ConfigMap")
            if "driver-pod.yaml" in cm.get("data", {})]


@pytest.mark.parametrize("kube", KUBE_VERSIONS)
def test_cluster_mode_manifests_match_the_kubernetes_schemas(tools, tmp_path, cluster_mode, kube):
    docs = cluster_mode + executor_templates(cluster_mode) + driver_templates(cluster_mode)
    problems = validate(tools, tmp_path, docs, kube)
    assert not problems, f"cluster mode, Kubernetes {kube}:\n" + json.dumps(problems, indent=1)


def test_cluster_mode_lint(tools, tmp_path):
    values = tmp_path / "cluster.yaml"
    values.write_text(yaml.safe_dump({"spark": {"kubernetes": {"deployMode": "cluster"}}}))
    result = helm(tools, "lint", str(CHART), "--strict", "--kube-version", "1.30.0", "-f", str(ALL_ON), "-f", str(values))
    assert "0 chart(s) failed" in result.stdout


def test_spark_driver_in_its_own_pod_is_wired_through(cluster_mode, tmp_path, monkeypatch):
    from workers.gc.run import storage_config  # noqa: PLC0415
    from workers.gc.submit import cluster_properties, job_properties, secrets_of  # noqa: PLC0415

    worker = one(cluster_mode, "Deployment", "-worker")["spec"]["template"]["spec"]
    container = worker["containers"][0]
    settings = settings_of(tmp_path, cluster_mode, container, monkeypatch)
    assert settings.spark.deploy_mode == "cluster"
    props = job_properties(spark=settings.spark, python="/usr/local/bin/python3", lakefs=settings.lakefs,
                           storage=storage_config(settings.gc))
    assert props["spark.submit.deployMode"] == "cluster"
    assert (props["spark.driver.cores"], props["spark.driver.memory"], props["spark.driver.memoryOverhead"]) == (
        "1", "2g", "1g")
    # The driver pods' own account, in the executors' namespace, with the Role that manages executors.
    account = one(cluster_mode, "ServiceAccount", "-spark-driver")["metadata"]
    assert (account["name"], account["namespace"]) == (
        props["spark.kubernetes.authenticate.driver.serviceAccountName"], "spark-jobs")
    assert one(cluster_mode, "RoleBinding", "-spark-driver")["subjects"] == [
        {"kind": "ServiceAccount", "name": account["name"], "namespace": "spark-jobs"}]
    # The worker may start, watch and delete driver pods (with their Service and ConfigMaps) there, nothing more.
    submit = one(cluster_mode, "RoleBinding", "-spark-submit")
    assert submit["metadata"]["namespace"] == "spark-jobs"
    assert submit["subjects"] == [{"kind": "ServiceAccount", "name": worker["serviceAccountName"], "namespace": "lakefs"}]
    rules = one(cluster_mode, "Role", "-spark-submit")["rules"]
    assert {r for rule in rules for r in rule["resources"]} == {"pods", "services", "configmaps"}
    assert worker["automountServiceAccountToken"] is True
    # Every credential the worker has from the Secret reaches the driver pod from the Secret too, by the same name.
    from_secret = {name: e["valueFrom"]["secretKeyRef"] for name, e in env_of(container).items()
                   if "valueFrom" in e and "secretKeyRef" in e["valueFrom"] and name != "LAKEFS_JANITOR_WEBHOOK_SECRET"}
    assert len(from_secret) >= 5
    refs = {k.removeprefix("spark.kubernetes.driver.secretKeyRef."): v for k, v in props.items()
            if k.startswith("spark.kubernetes.driver.secretKeyRef.")}
    assert refs == {name: f"{ref['name']}:{ref['key']}" for name, ref in from_secret.items()}
    # ... so that what spark-submit writes into the driver's ConfigMap carries none of them.
    storage = storage_config(settings.gc)
    secrets = secrets_of(lakefs=settings.lakefs, storage=storage)
    assert len(secrets) >= 3  # lakeFS's secret key, the S3 keys
    shipped = cluster_properties(props, env=os.environ, secrets=secrets)
    assert shipped["spark.hadoop.lakefs.api.secret_key"] == "${env.LAKEFS_JANITOR_LAKEFS__SECRET_ACCESS_KEY}"
    assert not [k for k, v in shipped.items() for secret in secrets if secret in v]
    # The worker only submits: it is not the driver any more.
    env = env_of(container)
    assert not {"POD_IP", "SPARK_LOCAL_IP", "SPARK_SUBMIT_OPTS"} & set(env)
    assert {p["name"] for p in container["ports"]} == {"metrics"}
    # The driver pod template, mounted where the property says: the chart's security settings, its own token.
    template_path = Path(props["spark.kubernetes.driver.podTemplateFile"])
    mount = next(m for m in container["volumeMounts"] if m["name"] == "config")
    volume = next(v for v in worker["volumes"] if v["name"] == "config")
    assert str(template_path.relative_to(mount["mountPath"])) in {i["path"] for i in volume["configMap"]["items"]}
    (driver,) = driver_templates(cluster_mode)
    assert driver["spec"]["automountServiceAccountToken"] is True
    assert driver["spec"]["securityContext"]["runAsNonRoot"] is True
    assert driver["spec"]["containers"][0]["securityContext"]["capabilities"]["drop"] == ["ALL"]
    # The executors keep their template and account.
    assert executor_templates(cluster_mode) and one(cluster_mode, "ServiceAccount", "-spark-executor")


def test_cluster_mode_is_checked(tools):
    bogus = render_text(tools, ALL_ON, sets=("spark.kubernetes.deployMode=remote",), check=False)
    assert bogus.returncode != 0 and "client (the driver in the worker pod) or cluster" in bogus.stderr
    no_k8s = render_text(tools, MINIMAL, sets=CLUSTER_MODE, check=False)
    assert no_k8s.returncode != 0 and "set spark.master to k8s://" in no_k8s.stderr


def test_an_existing_spark_cluster_needs_no_kubernetes_wiring(tools, tmp_path, monkeypatch):
    docs = render(tools, MINIMAL, sets=("spark.master=spark://spark-master.spark:7077",
                                        "spark.conf.spark\\.executor\\.memory=4g"))
    assert not by_kind(docs, "Role") and not executor_templates(docs)
    worker = one(docs, "Deployment", "-worker")["spec"]["template"]["spec"]
    assert worker["automountServiceAccountToken"] is False
    settings = settings_of(tmp_path, docs, worker["containers"][0], monkeypatch)
    assert settings.spark.master == "spark://spark-master.spark:7077"
    assert settings.spark.conf == {"spark.executor.memory": "4g"}


# --- NOTES.txt and the chart's README ----------------------------------------------------------------------

def rendered_notes(tools, tmp_path: Path, *values: Path) -> str:
    """NOTES.txt as `helm install` prints it (helm template leaves it out): rendered through tpl in a copy."""
    chart = tmp_path / "chart"
    shutil.copytree(CHART, chart)
    (chart / "notes-source.txt").write_text((chart / "templates/NOTES.txt").read_text())
    (chart / "templates/notes-probe.yaml").write_text(
        'kind: NotesProbe\ntext: {{ tpl (.Files.Get "notes-source.txt") . | toJson }}\n')
    out = render_text(tools, *values, chart=chart)
    probe = next(d for d in yaml.safe_load_all(out.stdout) if d and d["kind"] == "NotesProbe")
    return probe["text"]


def test_notes_print_the_hooks_install_command_with_the_in_cluster_url(tools, tmp_path, all_on):
    notes = rendered_notes(tools, tmp_path, ALL_ON)
    service = one(all_on, "Service", "-receiver")
    url = f"http://{service['metadata']['name']}.lakefs.svc.cluster.local:{service['spec']['ports'][0]['port']}"
    command = re.search(r"lakefs-janitor hooks install lakefs://REPOSITORY --url (\S+)", notes)
    assert command and command.group(1) == url, notes
    assert "deploy/janitor-lakefs-janitor-receiver" in notes and "--namespace lakefs" in notes
    assert "LAKEFSACTION_JANITOR_SECRET" in notes and "https://janitor.example.internal" in notes
    hooks = cli_main.commands["hooks"]
    assert "--url" in {o for p in hooks.commands["install"].params for o in p.opts}


def flatten(tree: dict, prefix: str = "") -> list[str]:
    keys = []
    for key, value in tree.items():
        if isinstance(value, dict) and value and key not in ("config", "conf", "resources", "requests", "limits",
                                                              "annotations", "labels", "nodeSelector", "affinity",
                                                              "podSecurityContext", "securityContext",
                                                              "podAnnotations", "podLabels", "executorResources"):
            keys += flatten(value, f"{prefix}{key}.")
        else:
            keys.append(prefix + key)
    return keys


def test_the_readme_documents_every_value():
    readme = (CHART / "README.md").read_text()
    documented = set(re.findall(r"^\| `([^`]+)` \|", readme, flags=re.M))
    values = set(flatten(yaml.safe_load((CHART / "values.yaml").read_text())))
    assert values <= documented, f"values missing from the README's table: {sorted(values - documented)}"
    assert documented <= values, f"the README documents values that do not exist: {sorted(documented - values)}"


# --- the images the chart runs -------------------------------------------------------------------------------

def test_the_images_run_as_the_user_the_chart_expects():
    user = yaml.safe_load((CHART / "values.yaml").read_text())["podSecurityContext"]["runAsUser"]
    for dockerfile in (ROOT / "deploy/Dockerfile", ROOT / "deploy/spark/Dockerfile"):
        text = dockerfile.read_text()
        assert re.search(rf"^USER {user}:{user}$", text, flags=re.M), f"{dockerfile.name}: USER {user}"
        assert f"--uid {user}" in text, dockerfile


def test_the_images_build_the_compiled_range_walk():
    """The GC decodes ranges with native/rangewalk.c (module lakefs_rangewalk): both images copy it, build it and
    check that it imports (without it every range goes through the careful decoder, ten times slower)."""
    for dockerfile in (ROOT / "deploy/Dockerfile", ROOT / "deploy/spark/Dockerfile"):
        text = dockerfile.read_text()
        assert "COPY native ./native" in text and 'python -c "import lakefs_rangewalk"' in text, dockerfile


def test_the_spark_image_takes_the_entrypoint_of_the_spark_line_pyspark_is_pinned_to():
    import tomllib  # noqa: PLC0415

    text = (ROOT / "deploy/spark/Dockerfile").read_text()
    scripts = re.search(r"^ARG SPARK_SCRIPTS_IMAGE=apache/spark:(\d+)\.(\d+)\.\d+$", text, flags=re.M)
    assert scripts, "deploy/spark/Dockerfile: ARG SPARK_SCRIPTS_IMAGE=apache/spark:X.Y.Z"
    spark = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["spark"]
    low = re.search(r"pyspark>=(\d+)\.(\d+)", spark[0])
    assert low and low.groups() == scripts.groups(), (spark, scripts.group(0))
    assert 'pip install ".[spark]"' in text and "ENTRYPOINT [\"/opt/entrypoint.sh\"]" in text
