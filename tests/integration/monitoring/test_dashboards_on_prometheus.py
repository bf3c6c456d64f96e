"""The Grafana dashboard and the alert rules, proven on a real Prometheus.

A Prometheus server (Debian's `prometheus`, the package that brings promtool) scrapes a real receiver and a real
Celery worker every second, with deploy/prometheus/prometheus.yml's job names and alerts.yml loaded as its rule
file, while lakeFS calls the receiver's hooks, the lifecycle deletes a branch (and a pre-delete hook vetoes
another), the reconciler finds a write no hook reported, the commit trigger starts a GC and skips one, GC runs
delete objects, and GC runs fail. Then every panel query and every alert expression is evaluated through
Prometheus's HTTP API: a renamed metric or label leaves a query without data, or without the label its legend or
annotations name, and the test fails.

Grafana's variables are substituted as Grafana would: $repository -> .* (All), $__rate_interval -> 2m,
$__interval -> 15s, $__range -> 1h. Alert expressions are evaluated as written (they must be valid and evaluate
without error) and then with their thresholds taken out (`> 3 * 3600` -> `>= -Inf`), their offsets removed
(this Prometheus has a minute of history) and absent(x) read as x: what is left is the series each alert
watches, which must exist.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import lakefs_sdk
import pytest
import redis
import requests
import yaml
from click.testing import CliRunner

from tests.integration.conftest import commit, create_branch, eventually, upload
from tests.services import (
    WEBHOOK_SECRET,
    CeleryWorker,
    ReceiverServer,
    RedisServer,
    Service,
    free_port,
    janitor_env,
    wait_until,
)

ROOT = Path(__file__).resolve().parents[3]
DASHBOARD = ROOT / "deploy/grafana/dashboards/lakefs-janitor.json"
ALERTS = ROOT / "deploy/prometheus/alerts.yml"
PROMETHEUS_CONFIG = ROOT / "deploy/prometheus/prometheus.yml"
GRAFANA_VARIABLES = {"$repository": ".*", "${repository}": ".*", "$__rate_interval": "2m", "$__interval": "15s",
                     "$__range": "1h"}
SCRAPE_SECONDS = 1


class PrometheusServer(Service):
    """The real Prometheus server, on 127.0.0.1, its TSDB in a temporary directory."""

    name = "prometheus"

    def __init__(self, targets: dict[str, str]) -> None:
        super().__init__()
        self.targets = targets  # job name -> host:port

    def start(self) -> PrometheusServer:
        binary = shutil.which("prometheus")
        if not binary:
            raise RuntimeError("prometheus is not installed (Debian package prometheus); run scripts/install.sh")
        config = yaml.safe_load(PROMETHEUS_CONFIG.read_text())  # the shipped config, pointed at these processes
        config["global"].update(scrape_interval=f"{SCRAPE_SECONDS}s", evaluation_interval=f"{SCRAPE_SECONDS}s",
                                scrape_timeout=f"{SCRAPE_SECONDS}s")
        for job in config["scrape_configs"]:
            job["static_configs"] = [{"targets": [self.targets[job["job_name"]]]}]
        shutil.copy(ALERTS, self.dir / ALERTS.name)
        (self.dir / "prometheus.yml").write_text(yaml.safe_dump(config))
        self._spawn([binary, f"--config.file={self.dir / 'prometheus.yml'}",
                     f"--storage.tsdb.path={self.dir / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}",
                     "--storage.tsdb.retention.time=1h", "--log.level=warn"])
        wait_until(lambda: requests.get(f"{self.url}/-/ready", timeout=1).status_code == 200, 30, "prometheus",
                   self.proc, self.log)
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def api(self, path: str, **params) -> dict:
        response = requests.get(f"{self.url}/api/v1/{path}", params=params, timeout=10)
        body = response.json()
        assert response.status_code == 200 and body["status"] == "success", f"{path} {params}: {body}"
        return body["data"]

    def query(self, expr: str) -> list[dict]:
        data = self.api("query", query=expr)
        assert data["resultType"] == "vector", f"{expr}: {data['resultType']}"
        return data["result"]


# --- the scenario --------------------------------------------------------------------------------------------

def cli(env: dict[str, str], *args: str) -> str:
    from workers.cli import main  # noqa: PLC0415

    result = CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)
    assert result.exit_code == 0, f"lakefs-janitor {' '.join(args)}: exit {result.exit_code}: {result.output}"
    return result.output


def new_repository(lakefs) -> str:
    name = f"mon-{uuid.uuid4().hex[:10]}"
    lakefs.call("create repository", lakefs.repositories.create_repository,
                lakefs_sdk.RepositoryCreation(name=name, storage_namespace=f"local://{name}", default_branch="main"))
    return name


def policies(env: dict[str, str], tmp: Path, repository: str, document: dict) -> None:
    path = tmp / f"{repository}-policies.yaml"
    path.write_text(yaml.safe_dump(document))
    cli(env, "branch-lifecycle", "set", f"lakefs://{repository}", "-f", str(path), "--force")


def worker_metric(worker: CeleryWorker, needle: str) -> bool:
    return needle in requests.get(worker.metrics_url, timeout=5).text


def scraped_since(prometheus: PrometheusServer, moment: float) -> bool:
    """Every target scraped successfully after `moment` (twice over, so that the rules saw it too)."""
    targets = prometheus.api("targets")["activeTargets"]
    return bool(targets) and all(
        t["health"] == "up" and _epoch(t["lastScrape"]) > moment + 2 * SCRAPE_SECONDS for t in targets)


def fewest_samples(prometheus: PrometheusServer, name_pattern: str) -> int:
    """The fewest samples Prometheus holds of any one series whose name matches (0 when there is none)."""
    data = prometheus.api("query", query=f'{{__name__=~"{name_pattern}"}}[15m]')  # the samples themselves
    return min((len(series["values"]) for series in data["result"]), default=0)


def _epoch(rfc3339: str) -> float:
    return datetime.fromisoformat(re.sub(r"(\.\d{6})\d*", r"\1", rfc3339.replace("Z", "+00:00"))).timestamp()


@pytest.fixture(scope="module")
def observed(lakefs_server, lakefs, tmp_path_factory) -> Iterator[PrometheusServer]:
    """Run the scenario against real services scraped by a real Prometheus; yields the Prometheus."""
    from workers.celery.app import create_celery  # noqa: PLC0415
    from workers.gc.history import GCRuns  # noqa: PLC0415
    from workers.idle_clock.store import ClockStore  # noqa: PLC0415
    from workers.shared.settings import load_settings  # noqa: PLC0415

    tmp = tmp_path_factory.mktemp("monitoring")
    started: list[Service] = []
    repositories: list[str] = []
    try:
        redis_server = RedisServer().start()
        started.append(redis_server)
        # Objects are collected as soon as nothing reaches them (no 24 h cutoff), in process; a hooked commit
        # makes a repository due for the commit trigger.
        env = janitor_env(lakefs_server, redis_server.url, LAKEFS_JANITOR_GC__MIN_AGE="0s",
                          LAKEFS_JANITOR_GC__RUNNER="threads", LAKEFS_JANITOR_GC__TRIGGER_COMMITS="1",
                          LAKEFS_JANITOR_GC__FULL_LISTING_EVERY="0s")
        receiver = ReceiverServer(env).start()
        started.append(receiver)
        metrics_port = free_port()
        worker = CeleryWorker({**env, "LAKEFS_JANITOR_WORKER_METRICS_PORT": str(metrics_port)}).start()
        worker.metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
        started.append(worker)
        prometheus = PrometheusServer({"lakefs-janitor-receiver": f"127.0.0.1:{receiver.port}",
                                       "lakefs-janitor-worker": f"127.0.0.1:{metrics_port}"}).start()
        started.append(prometheus)
        # Prometheus applies new targets a few seconds after it starts: what happens before its first scrape
        # would show up as series that never change.
        ready = time.time() - 2 * SCRAPE_SECONDS
        eventually(lambda: scraped_since(prometheus, ready), timeout=30)

        with pytest.MonkeyPatch.context() as mp:
            for key, value in env.items():
                mp.setenv(key, value)
            app = create_celery(load_settings())
        client = redis.Redis.from_url(redis_server.url)
        clock = ClockStore(client, "lakefs-janitor")

        def task(name: str, *args: str) -> object:
            return app.send_task(f"workers.{name}", args=args).get(timeout=120)

        lake, vetoing = new_repository(lakefs), new_repository(lakefs)
        repositories += [lake, vetoing]
        for repository in (lake, vetoing):
            cli(env, "hooks", "install", f"lakefs://{repository}", "--url", receiver.url)

        # lake: GC rules, a lifecycle policy that deletes tmp-* branches after a second, a branch to delete.
        lakefs.call("rules", lakefs.repositories.set_gc_rules, lake,
                    lakefs_sdk.GarbageCollectionRules(default_retention_days=1, branches=[]))
        policies(env, tmp, lake, {"policies": [{"id": "tmp-branches", "patterns": ["tmp-*"], "max_age": "1s"}]})
        create_branch(lakefs, lake, "tmp-1")
        # vetoing: a pre-delete-branch hook that refuses (the receiver has no such endpoint), no GC rules.
        veto = ("name: veto\non:\n  pre-delete-branch:\nhooks:\n  - id: refuse\n    type: webhook\n"
                f"    properties:\n      url: {receiver.url}/no-such-endpoint\n")
        upload(lakefs, vetoing, "main", "_lakefs_actions/veto.yaml", veto.encode())
        commit(lakefs, vetoing, "main", "veto deletions")
        policies(env, tmp, vetoing, {"policies": [{"id": "protected", "patterns": ["v-*"], "max_age": "1s"}]})
        create_branch(lakefs, vetoing, "v-1")

        # Garbage: an object overwritten before it was ever committed is reachable from nothing.
        upload(lakefs, lake, "main", "data/x", b"x1")
        upload(lakefs, lake, "main", "data/x", b"x2")
        commit(lakefs, lake, "main", "x")
        eventually(lambda: clock.get(lake, "tmp-1").created_at and clock.get(vetoing, "v-1").created_at)
        runs = GCRuns(client, "lakefs-janitor")
        eventually(lambda: runs.commits_since_run().get(lake, 0) >= 1)
        task("idle_clock.tasks.reconcile_repository", lake)  # the reconciler's first look

        # The commit trigger starts a GC of lake, which deletes x1.
        assert lake in task("gc.tasks.trigger_due")["started"]
        first = eventually(lambda: [e for e in runs.history(lake) if e.get("mode") == "run"], timeout=60)
        assert [(e.get("success"), e.get("swept")) for e in first] == [(True, 1)], first
        # More garbage and a commit; while a GC of lake holds its lock, the trigger skips it.
        upload(lakefs, lake, "main", "data/y", b"y1")
        upload(lakefs, lake, "main", "data/y", b"y2")
        commit(lakefs, lake, "main", "y")
        eventually(lambda: runs.commits_since_run().get(lake, 0) >= 1)
        lease = runs.lease(lake, 60)
        lease.acquire()
        try:
            assert task("gc.tasks.trigger_due")["skipped"] == [lake]
        finally:
            lease.release()
        # Prometheus sees the deletions counter before it grows again (increase() needs two samples).
        seen = time.time()
        eventually(lambda: scraped_since(prometheus, seen), timeout=30)
        swept = task("gc.tasks.run_repository", lake)
        assert swept["success"] and swept["deleted"] == 1, (swept, runs.history(lake))
        # GC__FULL_LISTING_EVERY=0s: a full run after one that left its state counts what incremental runs missed
        assert task("gc.tasks.run_repository", lake)["success"]
        assert worker_metric(worker, f'lakefs_janitor_gc_missed_by_incremental_objects{{repository="{lake}"}}')
        # GC failures: a repository without GC rules (skipped, reason no-rules), one lakeFS does not have.
        assert "skipped" in task("gc.tasks.run_repository", vetoing)
        missing = f"gone-{uuid.uuid4().hex[:8]}"
        gone = app.send_task("workers.gc.tasks.run_repository", args=(missing,))
        value = gone.get(timeout=120, propagate=False)
        assert gone.failed() or value.get("success") is False, value
        assert worker_metric(worker, f'lakefs_janitor_gc_failures_total{{reason="lakefs",repository="{missing}"}}')

        # The lifecycle deletes tmp-1 in lake; in vetoing, the pre-delete hook keeps v-1 (pending deletion).
        outcomes = task("branch_lifecycle.tasks.run_repository", lake)["outcomes"]
        assert [(o["branch_id"], o["result"]) for o in outcomes] == [("tmp-1", "deleted")], outcomes
        outcomes = task("branch_lifecycle.tasks.run_repository", vetoing)["outcomes"]
        assert [(o["branch_id"], o["result"]) for o in outcomes] == [("v-1", "vetoed")], outcomes

        # Object lifecycle: a rule expires lake's scratch/ after a second; a run commits its removal, and runs of a
        # repository lakeFS does not have fail (the failed-runs gauge the alert watches).
        rules = tmp / "object-lifecycle.yaml"
        rules.write_text(yaml.safe_dump({"rules": [{"id": "scratch", "branches": ["main"], "paths": ["scratch/**"],
                                                    "max_age": "1s"}]}))
        cli(env, "object-lifecycle", "rules", "set", f"lakefs://{lake}", "-f", str(rules))
        upload(lakefs, lake, "main", "scratch/old", b"old")
        commit(lakefs, lake, "main", "scratch")
        time.sleep(1.1)
        expired = task("object_lifecycle.tasks.run_repository", lake)
        assert [(b["branch_id"], b["result"], b["objects"]) for b in expired["branches"]] == [("main", "expired", 1)]
        failing = app.send_task("workers.object_lifecycle.tasks.run_repository", args=(missing,))
        failing.get(timeout=120, propagate=False)
        assert failing.failed()
        assert worker_metric(worker, f'lakefs_janitor_object_lifecycle_consecutive_failures{{branch="(run)",'
                                     f'repository="{missing}"}}')

        # A write no hook reports (an uncommitted upload), found by the reconciler's second look.
        time.sleep(1.1)
        upload(lakefs, lake, "main", "staged/z", b"z")
        assert task("idle_clock.tasks.reconcile_repository", lake)["writes"] >= 1

        # Hook calls the receiver refuses: no secret, and a body that is not a lakeFS event.
        hooks_url = f"{receiver.url}/webhooks/lakefs"
        assert requests.post(hooks_url, json={}, timeout=5).status_code == 401
        assert requests.post(hooks_url, json={"event_type": "nope"}, timeout=5,
                             headers={"X-Lakefs-Janitor-Secret": WEBHOOK_SECRET}).status_code == 422
        # A valid event the receiver cannot record: Redis refuses writes (out of memory) for a moment.
        event = {"event_type": "post-commit", "event_time": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
                 "action_name": "lakefs-janitor", "hook_id": "h", "repository_id": lake, "branch_id": "main",
                 "source_ref": "main", "commit_id": uuid.uuid4().hex}
        client.config_set("maxmemory", "1")
        try:
            refused = requests.post(hooks_url, json=event, timeout=30,
                                    headers={"X-Lakefs-Janitor-Secret": WEBHOOK_SECRET})
        finally:
            client.config_set("maxmemory", "0")
        assert refused.status_code >= 500, refused.text

        done = time.time()
        eventually(lambda: scraped_since(prometheus, done), timeout=30)
        # rate() and increase() need two samples of a series: the counters the last events created (the refused
        # hooks' outcomes) have them only after two successful scrapes (a scrape can time out on a loaded machine)
        eventually(lambda: fewest_samples(prometheus, r"lakefs_janitor_.+_total") >= 2, timeout=30)
        # Then one more hook the receiver records: the rates the webhook alerts divide by must be seen moving.
        # A counter Prometheus has only ever seen at one value has a rate of 0, and 0 / 0 is no data at all.
        recorded = requests.post(hooks_url, timeout=30, headers={"X-Lakefs-Janitor-Secret": WEBHOOK_SECRET}, json={
            **event, "event_time": datetime.now(UTC).isoformat().replace("+00:00", "Z"), "commit_id": uuid.uuid4().hex})
        assert recorded.status_code == 200, recorded.text
        done = time.time()
        eventually(lambda: scraped_since(prometheus, done), timeout=30)
        yield prometheus
    finally:
        for service in reversed(started):
            service.cleanup()
        for repository in repositories:
            try:
                lakefs.call("delete repository", lakefs.repositories.delete_repository, repository, force=True)
            except Exception:  # noqa: BLE001 - cleanup only
                pass


# --- what is evaluated ---------------------------------------------------------------------------------------

def panels() -> list[dict]:
    def walk(items: list[dict]) -> list[dict]:
        return [p for item in items for p in [item, *walk(item.get("panels", []))]]
    return [p for p in walk(json.loads(DASHBOARD.read_text())["panels"]) if p["type"] != "row"]


def panel_targets() -> list[tuple[str, dict]]:
    return [(f"{p['title']} [{t['refId']}]", t) for p in panels() for t in p["targets"]]


def grafana(expr: str) -> str:
    for variable, value in sorted(GRAFANA_VARIABLES.items(), key=lambda kv: -len(kv[0])):
        expr = expr.replace(variable, value)
    assert "$" not in expr, f"a Grafana variable the test does not know: {expr}"
    return expr


def alert_rules() -> list[dict]:
    return [rule for group in yaml.safe_load(ALERTS.read_text())["groups"] for rule in group["rules"]]


THRESHOLD = re.compile(r"(?:==|!=|>=|<=|>|<)\s*(?:bool\s+)?-?\d+(?:\.\d+)?(?:\s*[*/]\s*\d+(?:\.\d+)?)*"
                       r"(?=\s*(?:$|\)|\band\b|\bor\b|\bunless\b))", re.M)
OFFSET = re.compile(r"\s+offset\s+\d+[smhdwy]")
ABSENT = re.compile(r"\babsent\((?P<inner>[^()]*(?:\{[^{}]*\})?[^()]*)\)")


def watched(expr: str) -> str:
    """The alert's expression with thresholds, offsets and absent() taken out: the series it watches."""
    expr = ABSENT.sub(lambda m: m.group("inner"), expr)
    expr = OFFSET.sub("", expr)
    return THRESHOLD.sub(">= -Inf", expr)


def labels_named(text: str, pattern: str) -> set[str]:
    return set(re.findall(pattern, text))


def finite(result: list[dict]) -> bool:
    return any(not math.isnan(float(r["value"][1])) for r in result)


# --- the tests -----------------------------------------------------------------------------------------------

def test_the_neutraliser_keeps_what_an_alert_watches():
    assert watched("time() - max by (r) (m) > 3 * 3600") == "time() - max by (r) (m) >= -Inf"
    assert watched("up{job=~\"a\"} == 0") == "up{job=~\"a\"} >= -Inf"
    assert watched("absent(m{a=\"b\"})") == "m{a=\"b\"}"
    assert watched("x > 10 * y / 14\nand\nx > 1000") == "x > 10 * y / 14\nand\nx >= -Inf"
    assert watched("(a) > 0.05\nand\nb >= 3") == "(a) >= -Inf\nand\nb >= -Inf"
    assert watched("m unless m offset 2h") == "m unless m"


def test_prometheus_loaded_every_rule_and_evaluates_it_without_error(observed):
    groups = observed.api("rules")["groups"]
    loaded = {r["name"]: r for g in groups for r in g["rules"]}
    assert set(loaded) == {r["alert"] for r in alert_rules()}
    for name, rule in loaded.items():
        assert rule["health"] == "ok", f"{name}: {rule.get('lastError')}"


def test_every_target_is_up_under_the_shipped_job_names(observed):
    result = observed.query('up{job=~"lakefs-janitor-(receiver|worker)"}')
    assert {r["metric"]["job"]: r["value"][1] for r in result} == {"lakefs-janitor-receiver": "1",
                                                                     "lakefs-janitor-worker": "1"}


@pytest.mark.parametrize(("where", "target"), panel_targets(), ids=[w for w, _ in panel_targets()])
def test_every_panel_query_returns_data(observed, where, target):
    expr = grafana(target["expr"])
    result = observed.query(expr)
    assert result, f"panel {where}: no data for\n{expr}"
    assert finite(result), f"panel {where}: only NaN for\n{expr}\n{result}"
    for label in labels_named(target.get("legendFormat", ""), r"\{\{\s*(\w+)\s*\}\}"):
        missing = [r["metric"] for r in result if label not in r["metric"]]
        assert not missing, f"panel {where}: legend names {label!r}, missing from {missing}"


def test_the_repository_variable_lists_repositories(observed):
    variable = next(v for v in json.loads(DASHBOARD.read_text())["templating"]["list"] if v["name"] == "repository")
    metric, label = re.fullmatch(r"label_values\((\w+), (\w+)\)", variable["query"]["query"]).groups()
    assert observed.api(f"label/{label}/values", **{"match[]": metric})


@pytest.mark.parametrize("rule", alert_rules(), ids=[r["alert"] for r in alert_rules()])
def test_every_alert_expression_returns_data(observed, rule):
    observed.query(rule["expr"])  # valid, and evaluates without error as written
    expr = watched(rule["expr"])
    result = observed.query(expr)
    assert result, f"{rule['alert']}: the series it watches have no data:\n{expr}"
    annotations = " ".join(rule["annotations"].values())
    for label in labels_named(annotations, r"\$labels\.(\w+)"):
        missing = [r["metric"] for r in result if label not in r["metric"]]
        assert not missing, f"{rule['alert']}: annotations name {label!r}, missing from {missing}"


def test_prometheus_stored_the_janitors_series(observed):
    """The scenario produced most of what the code registers, from both processes."""
    series = observed.api("series", **{"match[]": '{__name__=~"lakefs_janitor_.+"}'})
    assert {s["job"] for s in series} == {"lakefs-janitor-receiver", "lakefs-janitor-worker"}
    assert len({s["__name__"] for s in series}) >= 20
