"""The files in deploy/ parse, and agree with the code: metric and label names, settings, CLI commands and
options, the action file `hooks install` writes, the alert rules (promtool). No network."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import click
import pytest
import yaml
from celery import Celery
from celery.bin.base import CLIContext
from celery.bin.celery import celery as celery_cli
from prometheus_client import CollectorRegistry
from prometheus_client.metrics import MetricWrapperBase

from workers.cli import main
from workers.idle_clock.hooks_install import action_file
from workers.shared.metrics import Metrics
from workers.shared.settings import ENV_PREFIX, LakeFSConnection, Settings, load_settings
from workers.shared.settings_sources import CONFIG_FILE_ENV

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = ROOT / "deploy"
OWN = [p for p in sorted(DEPLOY.rglob("*")) if p.is_file() and "lakefs-build" not in p.relative_to(DEPLOY).parts]
# Helm templates are YAML only once rendered (tests/unit/deploy/test_helm_chart.py renders and validates them).
YAML_FILES = [p for p in OWN if p.suffix in (".yaml", ".yml") and "templates" not in p.relative_to(DEPLOY).parts]
DASHBOARD = DEPLOY / "grafana/dashboards/lakefs-janitor.json"
ALERTS = DEPLOY / "prometheus/alerts.yml"
PROMETHEUS_CONFIGS = [DEPLOY / "prometheus/prometheus.yml", DEPLOY / "prometheus/prometheus.compose.yml"]
EXAMPLE_ACTION = DEPLOY / "lakefs-actions/lakefs-janitor.yaml"
EXAMPLE_URL = "https://janitor.example.internal"
EXAMPLE_CONFIG = DEPLOY / "config/lakefs-janitor.example.yaml"
UNITS = {name: DEPLOY / f"systemd/lakefs-janitor-{name}.service" for name in ("receiver", "worker", "beat")}
METRIC_RE = re.compile(r"\blakefs_janitor_[A-Za-z0-9_]+")
# Labels Prometheus adds to every scraped series.
TARGET_LABELS = {"job", "instance"}


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for key in list(os.environ):
        if key.startswith((ENV_PREFIX, "LAKECTL_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", str(tmp_path))


# --- every file parses ------------------------------------------------------------------------------------------

def test_deploy_has_the_expected_files():
    names = {rel(p) for p in OWN}
    for needed in ("lakefs-actions/lakefs-janitor.yaml", "lakefs-actions/veto-protected-branches.yaml",
                   "config/lakefs-janitor.example.yaml", "config/lakefs.example.yaml", "compose.yaml", "Procfile",
                   "prometheus/prometheus.yml", "prometheus/alerts.yml", "README.md",
                   "grafana/provisioning/dashboards/dashboards.yaml",
                   "grafana/provisioning/datasources/prometheus.yaml", "grafana/dashboards/lakefs-janitor.json",
                   *(f"systemd/{p.name}" for p in UNITS.values())):
        assert f"deploy/{needed}" in names


@pytest.mark.parametrize("path", YAML_FILES, ids=rel)
def test_yaml_parses(path):
    documents = list(yaml.safe_load_all(path.read_text()))
    assert documents and all(isinstance(d, dict) for d in documents), f"{rel(path)}: expected mapping(s)"


def test_dashboard_json_parses():
    assert isinstance(json.loads(DASHBOARD.read_text()), dict)


# --- metrics: what the deploy files query is what the code registers ------------------------------------------

@pytest.fixture(scope="module")
def exposed() -> dict[str, set[str]]:
    """Sample name -> label names, as /metrics exposes them (_total, _bucket, _sum, _count, _created)."""
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    for metric in vars(metrics).values():
        labelnames = getattr(metric, "_labelnames", ()) if isinstance(metric, MetricWrapperBase) else ()
        if labelnames:  # a labelled metric exposes no samples until a child exists
            metric.labels(*("x" for _ in labelnames))
    names: dict[str, set[str]] = {}
    for family in registry.collect():
        assert family.samples, f"{family.name}: no samples; the test cannot see its exposed names"
        for sample in family.samples:
            names.setdefault(sample.name, set()).update(sample.labels)
    assert "lakefs_janitor_webhook_events_total" in names  # sanity: the fixture sees real names
    return names


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def all_panels(panels: list[dict]) -> list[dict]:
    out = []
    for panel in panels:
        out.append(panel)
        out.extend(all_panels(panel.get("panels", [])))
    return out


def dashboard_exprs() -> list[tuple[str, str]]:
    return [(p["title"], t["expr"]) for p in all_panels(dashboard()["panels"]) for t in p.get("targets", [])]


def alert_rules() -> list[dict]:
    return [rule for group in yaml.safe_load(ALERTS.read_text())["groups"] for rule in group["rules"]]


def all_exprs() -> list[tuple[str, str]]:
    return dashboard_exprs() + [(f"alert {r.get('alert', r.get('record'))}", r["expr"]) for r in alert_rules()]


def test_every_metric_the_dashboard_and_alerts_use_exists(exposed):
    missing = sorted({f"{where}: {name}" for where, expr in all_exprs() for name in METRIC_RE.findall(expr)
                      if name not in exposed})
    assert not missing, ("metrics that workers.shared.metrics.Metrics does not expose (renamed?): " + "; ".join(missing)
                         + f"\nexposed: {sorted(exposed)}")


def _labels_used(expr: str) -> tuple[list[tuple[str, str]], set[str]]:
    """(metric, label) pairs from selectors, and labels from by/without/on/ignoring clauses."""
    selectors = [(metric, label) for metric, body in re.findall(r"(lakefs_janitor_\w+)\s*\{([^}]*)\}", expr)
                 for label in re.findall(r"(\w+)\s*(?:=~|!~|!=|=)", body)]
    grouping = {label.strip() for clause in re.findall(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)", expr)
                for label in clause.split(",") if label.strip()}
    return selectors, grouping


def test_every_label_the_dashboard_and_alerts_use_exists(exposed):
    problems = []
    for where, expr in all_exprs():
        selectors, grouping = _labels_used(expr)
        for metric, label in selectors:
            if metric in exposed and label not in exposed[metric] | TARGET_LABELS:
                problems.append(f"{where}: {metric} has no label {label!r} (has {sorted(exposed[metric])})")
        available = set().union(TARGET_LABELS, *(exposed.get(m, set()) for m in METRIC_RE.findall(expr)))
        problems += [f"{where}: grouping by unknown label {label!r}" for label in grouping - available]
    assert not problems, "\n".join(problems)


def test_outcome_values_are_those_the_receiver_counts():
    source = (ROOT / "webhook/receiver.py").read_text()
    used = set()
    for _, expr in all_exprs():
        for values in re.findall(r'outcome\s*=~?\s*"([^"]*)"', expr):
            used.update(values.split("|"))
    assert used, "expected the alerts to filter on webhook outcomes"
    unknown = sorted(v for v in used if f'"{v}"' not in source)
    assert not unknown, f"outcome values not used by webhook/receiver.py: {unknown}"


# --- the Grafana dashboard ------------------------------------------------------------------------------------

def test_dashboard_structure():
    d = dashboard()
    assert d["schemaVersion"] >= 36
    assert d["uid"] and d["title"]
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    repo = variables["repository"]
    assert repo["type"] == "query" and repo["datasource"]["uid"] == "${datasource}"
    assert re.fullmatch(r"label_values\(lakefs_janitor_\w+, repository\)", repo["query"]["query"])


def test_repository_variable_uses_an_exposed_metric_with_that_label(exposed):
    variable = next(v for v in dashboard()["templating"]["list"] if v["name"] == "repository")
    metric, label = re.fullmatch(r"label_values\((\w+), (\w+)\)", variable["query"]["query"]).groups()
    assert label in exposed[metric]


def test_dashboard_panels():
    panels = all_panels(dashboard()["panels"])
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), f"duplicate panel ids: {sorted(i for i in ids if ids.count(i) > 1)}"
    for panel in panels:
        if panel["type"] == "row":
            continue
        title = panel["title"]
        assert len(panel.get("description", "")) > 40, f"panel {title!r}: say how to read it in its description"
        assert panel["datasource"]["uid"] == "${datasource}", title
        assert panel["targets"], title
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}", title
            assert METRIC_RE.search(target["expr"]), f"panel {title!r} queries no lakefs_janitor metric"
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)), title


def test_dashboard_panels_do_not_overlap():
    boxes = [(p["title"], p["gridPos"]) for p in all_panels(dashboard()["panels"])]
    for i, (a_title, a) in enumerate(boxes):
        assert a["x"] >= 0 and a["x"] + a["w"] <= 24, a_title
        for b_title, b in boxes[i + 1:]:
            apart = (a["x"] + a["w"] <= b["x"] or b["x"] + b["w"] <= a["x"]
                     or a["y"] + a["h"] <= b["y"] or b["y"] + b["h"] <= a["y"])
            assert apart, f"panels {a_title!r} and {b_title!r} overlap"


def test_dashboard_shows_what_was_asked_for():
    exprs = " ".join(e for _, e in dashboard_exprs())
    for needle in ("lakefs_janitor_webhook_events_total", "lakefs_janitor_branches_deleted_total",
                   "lakefs_janitor_branch_deletions_vetoed_total", "lakefs_janitor_branches_skipped_total",
                   "lakefs_janitor_branches_pending_deletion", "lakefs_janitor_lifecycle_run_seconds_bucket",
                   "lakefs_janitor_lifecycle_last_success_timestamp_seconds",
                   "lakefs_janitor_reconcile_writes_total", "lakefs_janitor_reconcile_run_seconds_bucket"):
        assert needle in exprs, needle
    assert "histogram_quantile(0.95" in exprs and "histogram_quantile(0.5" in exprs


def test_grafana_provisioning_points_at_the_dashboards_mount():
    provider = yaml.safe_load((DEPLOY / "grafana/provisioning/dashboards/dashboards.yaml").read_text())
    path = provider["providers"][0]["options"]["path"]
    mounts = compose()["services"]["grafana"]["volumes"]
    assert f"./grafana/dashboards:{path}:ro" in mounts
    sources = yaml.safe_load((DEPLOY / "grafana/provisioning/datasources/prometheus.yaml").read_text())
    assert sources["datasources"][0]["type"] == "prometheus"


# --- Prometheus -----------------------------------------------------------------------------------------------

def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is not installed; it comes with the Debian package `prometheus` "
                    "(apt-get install -y prometheus, which scripts/install.sh does)")
    return path


def run_promtool(*args: str) -> None:
    # the alert unit tests take ≈ 50 s of one core alone here; on a loaded 2-core host, 120 s was not enough
    result = subprocess.run([promtool(), *args], cwd=DEPLOY / "prometheus", capture_output=True, text=True,
                            timeout=600, check=False)
    assert result.returncode == 0, f"promtool {' '.join(args)}:\n{result.stdout}\n{result.stderr}"


def test_promtool_check_rules():
    run_promtool("check", "rules", ALERTS.name)


def test_promtool_alert_unit_tests():
    run_promtool("test", "rules", "alerts.test.yml")


@pytest.mark.parametrize("path", PROMETHEUS_CONFIGS, ids=rel)
def test_promtool_check_config(path):
    run_promtool("check", "config", path.name)


def test_alert_rules_are_complete():
    names = [r["alert"] for r in alert_rules()]
    assert len(names) == len(set(names))
    for rule in alert_rules():
        assert rule["labels"]["severity"] in ("critical", "warning", "info"), rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], rule["alert"]
    exprs = " ".join(r["expr"] for r in alert_rules())
    for needle in ("lakefs_janitor_lifecycle_last_success_timestamp_seconds", "lakefs_janitor_webhook_events_total",
                   "lakefs_janitor_branch_deletions_vetoed_total", "lakefs_janitor_branches_pending_deletion"):
        assert needle in exprs, needle


def test_alert_names_mentioned_in_deploy_exist():
    names = {r["alert"] for r in alert_rules()}
    for path in OWN:
        for name in re.findall(r"\bLakefsJanitor\w+", path.read_text()):
            assert name in names, f"{rel(path)} mentions alert {name}, which alerts.yml does not define"


def scrape_targets(path: Path) -> dict[str, list[str]]:
    config = yaml.safe_load(path.read_text())
    return {job["job_name"]: [t for sc in job["static_configs"] for t in sc["targets"]]
            for job in config["scrape_configs"]}


@pytest.mark.parametrize("path", PROMETHEUS_CONFIGS, ids=rel)
def test_prometheus_scrapes_receiver_and_worker(path):
    config = yaml.safe_load(path.read_text())
    assert config["rule_files"] == ["alerts.yml"]
    jobs = scrape_targets(path)
    assert set(jobs) == {"lakefs-janitor-receiver", "lakefs-janitor-worker"}
    # alerts.yml's LakefsJanitorTargetDown matches these job names.
    assert 'job=~"lakefs-janitor-(receiver|worker)"' in ALERTS.read_text()


# --- the lakeFS action files ----------------------------------------------------------------------------------

# pkg/graveler/hooks_handler.go; validation from pkg/actions/action.go (reference/lakefs-facts.md, section 1).
LAKEFS_EVENTS = {"prepare-commit", "pre-commit", "post-commit", "pre-merge", "post-merge", "pre-create-tag",
                 "post-create-tag", "pre-delete-tag", "post-delete-tag", "pre-create-branch", "post-create-branch",
                 "pre-delete-branch", "post-delete-branch", "pre-revert", "post-revert", "pre-cherry-pick",
                 "post-cherry-pick"}
GO_DURATION = re.compile(r"(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+")


def test_example_action_file_is_what_hooks_install_writes():
    text = EXAMPLE_ACTION.read_text()
    expected = action_file(EXAMPLE_URL)
    assert yaml.safe_load(text) == yaml.safe_load(expected)
    body = "".join(line for line in text.splitlines(keepends=True) if not line.lstrip().startswith("#"))
    assert body == expected, (
        f"{rel(EXAMPLE_ACTION)} differs from workers.idle_clock.hooks_install.action_file({EXAMPLE_URL!r}); regenerate its "
        "body (below the comments) from that function")


@pytest.mark.parametrize("path", sorted((DEPLOY / "lakefs-actions").glob("*.yaml")), ids=rel)
def test_action_files_pass_lakefs_validation(path):
    action = yaml.safe_load(path.read_text())
    assert re.fullmatch(r"\w[\w\-. ]+", action["name"])
    assert "on" in action, "quote the key 'on': unquoted, YAML 1.1 reads it as true"
    assert action["on"] and set(action["on"]) <= LAKEFS_EVENTS
    for event, spec in action["on"].items():
        if spec and "branches" in spec:
            assert not event.endswith("-tag"), "lakeFS rejects branches on tag events"
            assert all(isinstance(b, str) and b for b in spec["branches"])
    ids = [hook["id"] for hook in action["hooks"]]
    assert len(ids) == len(set(ids))
    for hook in action["hooks"]:
        assert re.fullmatch(r"[_a-zA-Z][\-_a-zA-Z0-9]{1,255}", hook["id"])
        assert hook["type"] == "webhook"
        props = hook["properties"]
        assert props["url"].startswith(("http://", "https://")) and "{{" not in props["url"]
        assert GO_DURATION.fullmatch(props.get("timeout", "1m"))
        for value in [*props.get("headers", {}).values(), *props.get("query_params", {}).values()]:
            for var in re.findall(r"\{\{ ?ENV\.(\w+) ?\}\}", str(value)):
                assert var.startswith("LAKEFSACTION_"), f"lakeFS substitutes {var} with an empty string"


def test_action_names_are_unique_across_files():
    names = [yaml.safe_load(p.read_text())["name"] for p in (DEPLOY / "lakefs-actions").glob("*.yaml")]
    assert len(names) == len(set(names))


def test_lakefs_example_enables_actions_and_env_substitution():
    text = (DEPLOY / "config/lakefs.example.yaml").read_text()
    config = yaml.safe_load(text)
    assert config["actions"]["enabled"] is True and config["actions"]["env"]["enabled"] is True
    assert config["actions"]["env"]["prefix"] == "LAKEFSACTION_"
    assert "LAKEFSACTION_JANITOR_SECRET" in text and "LAKEFSACTION_JANITOR_SECRET" in action_file(EXAMPLE_URL)


# --- settings -------------------------------------------------------------------------------------------------

def example_config() -> dict:
    return yaml.safe_load(EXAMPLE_CONFIG.read_text())


def test_example_config_keys_are_settings():
    data = example_config()
    assert set(data) <= set(Settings.model_fields), f"not settings: {sorted(set(data) - set(Settings.model_fields))}"
    lakefs = data.get("lakefs", {})
    assert set(lakefs) <= set(LakeFSConnection.model_fields), sorted(set(lakefs) - set(LakeFSConnection.model_fields))


def test_example_config_documents_every_setting_with_its_default():
    data = example_config()
    undocumented = sorted(set(Settings.model_fields) - set(data))
    assert not undocumented, f"add these settings (default and a comment) to {rel(EXAMPLE_CONFIG)}: {undocumented}"
    assert set(data["lakefs"]) == set(LakeFSConnection.model_fields)
    for name, field in Settings.model_fields.items():
        if not field.is_required():
            default = field.default_factory().model_dump() if field.default_factory else field.default
            assert data[name] == default, f"{name}: example says {data[name]!r}, default is {default!r}"


def test_example_config_loads_through_the_config_file_variable(monkeypatch):
    monkeypatch.setenv(CONFIG_FILE_ENV, str(EXAMPLE_CONFIG))
    settings = load_settings()
    assert settings.lakefs.endpoint_url == example_config()["lakefs"]["endpoint_url"]
    assert settings.lifecycle_schedule == Settings.model_fields["lifecycle_schedule"].default


def _setting_path_exists(env_name: str) -> bool:
    parts = env_name.removeprefix(ENV_PREFIX).lower().split("__")
    fields = Settings.model_fields
    if parts[0] not in fields:
        return False
    return len(parts) == 1 or (parts[0] == "lakefs" and len(parts) == 2 and parts[1] in LakeFSConnection.model_fields)


def environment_variables() -> list[tuple[str, str]]:
    """(where, NAME) for every variable the deploy files set for the janitor's processes."""
    found = []
    for path in [*UNITS.values(), DEPLOY / "systemd/lakefs-janitor.env.example", DEPLOY / "Procfile"]:
        found += [(rel(path), name) for name in re.findall(r"\b(LAKEFS_JANITOR_\w+)=", path.read_text())]
    for service, spec in compose()["services"].items():
        found += [(f"compose.yaml {service}", name) for name in spec.get("environment", {})]
    return found


def test_environment_variables_name_real_settings():
    # pydantic-settings silently ignores unknown LAKEFS_JANITOR_* variables: a typo would just not apply.
    names = [(where, n) for where, n in environment_variables() if n.startswith(ENV_PREFIX) and n != CONFIG_FILE_ENV]
    assert names
    bad = [f"{where}: {name}" for where, name in names if not _setting_path_exists(name)]
    assert not bad, "not settings of workers.shared.settings.Settings: " + "; ".join(bad)


# --- process definitions --------------------------------------------------------------------------------------

def compose() -> dict:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def procfile() -> dict[str, str]:
    lines = [line for line in (DEPLOY / "Procfile").read_text().splitlines() if line and not line.startswith("#")]
    entries = dict(line.split(":", 1) for line in lines)
    return {name.strip(): command.strip() for name, command in entries.items()}


def unit_settings(path: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, value = line.split("=", 1)
            out.setdefault(key, []).append(value)
    return out


def strip_env(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    """`exec env A=1 B=2 cmd ...` -> ({A: 1, B: 2}, [cmd, ...])."""
    env = {}
    argv = list(argv)
    while argv and argv[0] in ("exec", "env"):
        argv.pop(0)
    while argv and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", argv[0]):
        key, value = argv.pop(0).split("=", 1)
        env[key] = value
    return env, argv


def command_lines() -> list[tuple[str, list[str]]]:
    """(where, argv) of every janitor process in the Procfile, the units and compose."""
    found = [(f"Procfile {name}", shlex.split(cmd)) for name, cmd in procfile().items()]
    found += [(rel(path), shlex.split(unit_settings(path)["ExecStart"][0])) for path in UNITS.values()]
    found += [(f"compose.yaml {name}", spec["command"]) for name, spec in compose()["services"].items()
              if name in ("receiver", "worker", "beat")]
    return found


def is_beat(argv: list[str]) -> bool:
    _, argv = strip_env(argv)
    return bool(argv) and Path(argv[0]).name == "celery" and "beat" in argv


def test_exactly_one_beat_everywhere():
    beats = [name for name, cmd in procfile().items() if is_beat(shlex.split(cmd))]
    assert beats == ["beat"]
    assert [n for n, p in UNITS.items() if is_beat(shlex.split(unit_settings(p)["ExecStart"][0]))] == ["beat"]
    services = compose()["services"]
    assert [n for n, s in services.items() if is_beat(s.get("command", []))] == ["beat"]
    assert services["beat"].get("deploy", {}).get("replicas", 1) == 1
    for where, argv in command_lines():
        _, argv = strip_env(argv)
        assert "-B" not in argv and "--beat" not in argv, f"{where}: a worker must not embed beat"


def test_compose_services_and_mounts():
    spec = compose()
    assert {"redis", "receiver", "worker", "beat", "prometheus", "grafana"} <= set(spec["services"])
    for name, service in spec["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0] if isinstance(volume, str) else volume.get("source", "")
            if source.startswith("."):
                assert (DEPLOY / source).exists(), f"compose.yaml {name}: mounts missing {source}"
        build = service.get("build")
        if build:
            assert (DEPLOY / build["context"] / build["dockerfile"]).is_file()
    prom = spec["services"]["prometheus"]
    config = next(a.split("=", 1)[1] for a in prom["command"] if a.startswith("--config.file="))
    assert (DEPLOY / "prometheus" / Path(config).name).is_file() and "./prometheus:/etc/prometheus:ro" in prom["volumes"]


def _port(target: str) -> str:
    return target.rsplit(":", 1)[1]


def test_metrics_ports_match_the_scrape_configs():
    local = scrape_targets(DEPLOY / "prometheus/prometheus.yml")
    worker_env = dict(v.split("=", 1) for v in unit_settings(UNITS["worker"])["Environment"])
    assert local["lakefs-janitor-worker"] == [f"127.0.0.1:{worker_env['LAKEFS_JANITOR_WORKER_METRICS_PORT']}"]
    receiver = shlex.split(unit_settings(UNITS["receiver"])["ExecStart"][0])
    assert local["lakefs-janitor-receiver"] == [receiver[receiver.index("--bind") + 1]]
    procfile_worker, _ = strip_env(shlex.split(procfile()["worker"]))
    assert local["lakefs-janitor-worker"] == [f"127.0.0.1:{procfile_worker['LAKEFS_JANITOR_WORKER_METRICS_PORT']}"]

    composed = scrape_targets(DEPLOY / "prometheus/prometheus.compose.yml")
    services = compose()["services"]
    assert composed["lakefs-janitor-worker"] == [
        f"worker:{services['worker']['environment']['LAKEFS_JANITOR_WORKER_METRICS_PORT']}"]
    receiver = services["receiver"]["command"]
    assert composed["lakefs-janitor-receiver"] == [f"receiver:{_port(receiver[receiver.index('--bind') + 1])}"]


def test_worker_metrics_use_a_multiprocess_directory_of_their_own():
    worker = dict(v.split("=", 1) for v in unit_settings(UNITS["worker"])["Environment"])
    receiver = dict(v.split("=", 1) for v in unit_settings(UNITS["receiver"])["Environment"])
    assert worker["PROMETHEUS_MULTIPROC_DIR"] != receiver["PROMETHEUS_MULTIPROC_DIR"]
    runtime_dir = unit_settings(UNITS["worker"])["RuntimeDirectory"][0]
    assert worker["PROMETHEUS_MULTIPROC_DIR"] == f"%t/{runtime_dir}"  # created empty at start, removed at stop
    env, _ = strip_env(shlex.split(procfile()["worker"]))
    assert env["PROMETHEUS_MULTIPROC_DIR"] == "$(mktemp -d)"
    services = compose()["services"]
    assert services["worker"]["environment"]["PROMETHEUS_MULTIPROC_DIR"] in services["worker"]["tmpfs"][0]


def test_commands_parse_with_the_real_command_lines():
    seen = set()
    for where, argv in command_lines():
        _, argv = strip_env(argv)
        program, args = Path(argv[0]).name, argv[1:]
        if program == "lakefs-janitor":
            command: click.Command = main
            while isinstance(command, click.Group):
                name, *args = args
                assert name in command.commands, f"{where}: no command {name!r}"
                command = command.commands[name]
            command.make_context(command.name, list(args))  # raises on unknown options or bad values
            seen.add(command.name)
        elif program == "celery":
            assert args[:2] == ["-A", "workers.celery.worker"], where
            assert importlib.util.find_spec("workers.celery.worker") is not None
            name, *rest = args[2:]
            obj = CLIContext(app=Celery(set_as_current=False), no_color=True, workdir=None, quiet=True)
            celery_cli.commands[name].make_context(name, rest, obj=obj)
            seen.add(name)
        else:
            pytest.fail(f"{where}: unexpected program {program}")
    assert seen == {"serve", "worker", "beat"}


def test_receiver_command_is_the_documented_one():
    assert procfile()["receiver"] == "lakefs-janitor serve --bind 127.0.0.1:8080 --workers 2"
    assert unit_settings(UNITS["receiver"])["ExecStart"][0].endswith(
        "/lakefs-janitor serve --bind 127.0.0.1:8080 --workers 2")


# What every worker runs with, the test worker (tests/services.py CeleryWorker) included: gossip and mingle are
# broadcast channels a janitor never needs, each one more subscription to re-establish after a broker blip.
WORKER_OPTIONS = ("--without-gossip", "--without-mingle")


def test_the_worker_command_is_the_same_everywhere():
    workers = [(where, strip_env(argv)[1]) for where, argv in command_lines()
               if Path(strip_env(argv)[1][0]).name == "celery" and "worker" in argv]
    assert len(workers) == 3, workers  # Procfile, systemd, compose
    for where, argv in workers:
        assert argv[1:argv.index("worker") + 1] == ["-A", "workers.celery.worker", "worker"], where
        assert set(WORKER_OPTIONS) <= set(argv), f"{where}: {argv}"
    helm = (DEPLOY / "helm/lakefs-janitor/templates/worker.yaml").read_text()
    command = yaml.safe_load(re.search(r"^\s*command: (\[[^\]]*\])", helm, re.M).group(1).replace("{{", "").replace(
        "}}", ""))
    assert set(WORKER_OPTIONS) <= set(command), command
    for doc in (ROOT / "README.md", DEPLOY / "README.md"):
        lines = [line for line in doc.read_text().splitlines() if "celery -A workers.celery.worker worker" in line]
        assert lines and all(all(o in line for o in WORKER_OPTIONS) for line in lines), (doc, lines)
    services = (ROOT / "tests/services.py").read_text()
    assert all(f'"{o}"' in services for o in WORKER_OPTIONS)


# --- the Redis we ship ------------------------------------------------------------------------------------------

def redis_servers() -> list[tuple[str, list[str]]]:
    """(where, argv) of every redis-server the deploy files start: compose's, and the chart's bundled one (its
    template read as text: the command is one JSON-style list)."""
    found = [(f"compose.yaml {name}", spec["command"]) for name, spec in compose()["services"].items()
             if spec.get("command", [""])[0] == "redis-server"]
    for path in sorted((DEPLOY / "helm").rglob("*.yaml")):
        found += [(rel(path), json.loads(line.split("command:", 1)[1])) for line in path.read_text().splitlines()
                  if re.match(r'\s*command:\s*\["redis-server"', line)]
    return found


def test_min_replicas_to_write_goes_with_replicas_only():
    """``min-replicas-to-write`` / ``min-replicas-max-lag`` on every node of a replicated Redis (a primary cut off
    from its replicas then refuses the writes that do not wait for replicas), never on a single one, where it
    would refuse every write (docs/redis-ha.md). Every Redis we ship is single: none has them."""
    servers = redis_servers()
    assert len(servers) == 2, servers  # compose's and the chart's: a new one is checked here too
    for where, argv in servers:
        replicated = any(arg in ("--replicaof", "--slaveof") for arg in argv)
        guarded = "--min-replicas-to-write" in argv and "--min-replicas-max-lag" in argv
        assert guarded == replicated, (f"{where}: {'a replica without' if replicated else 'a single Redis with'} "
                                       "min-replicas-to-write / min-replicas-max-lag (docs/redis-ha.md)")
