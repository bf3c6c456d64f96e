"""Imports run one way, `webhook → workers → spark_jobs`, and the receiver stays light.

Read from the source (no imports executed), so a module that breaks the rule fails here even if nothing imports it.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("webhook", "workers", "spark_jobs")
# What every domain shares (settings, Services, Redis, lakeFS, metrics, locks...) lives in one package; it imports no
# domain. What one hook changes spans domains (the idle clock, GC's commit count): it is the receiver's, in
# webhook/hook_record.py, which workers never import.
SHARED = ("workers.shared",)
DOMAINS = ("workers.idle_clock", "workers.branch_lifecycle", "workers.gc", "workers.object_lifecycle")
# The wiring puts the domains together (the Celery app, the click group): it imports them, never the reverse.
WIRING = ("workers.celery", "workers.cli")
# A domain may build on another only in this direction (a lifecycle run looks at a branch as the reconciler does).
DOMAIN_MAY_IMPORT = {"workers.branch_lifecycle": ("workers.idle_clock", "workers.gc"),
                     "workers.gc": ("workers.idle_clock",),
                     # An object lifecycle preview says when the GC frees what it expires (the GC's retention).
                     "workers.object_lifecycle": ("workers.gc",)}


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            found[name] = path
    return found


def imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def violations() -> list[str]:
    found = []
    for name, path in modules().items():
        for target in imported(path):
            top = target.split(".")[0]
            if top == "spark_jobs" or top not in PACKAGES:
                if under(name, "spark_jobs") and top in ("workers", "webhook"):
                    found.append(f"{name} imports {target}: spark_jobs ships alone to Spark")
                continue
            if under(name, "spark_jobs"):
                found.append(f"{name} imports {target}: spark_jobs ships alone to Spark")
            elif under(name, "workers") and top == "webhook":
                found.append(f"{name} imports {target}: workers never import webhook")
            elif any(under(name, s) for s in SHARED) and any(under(target, d) for d in DOMAINS):
                found.append(f"{name} imports {target}: shared modules import no domain")
            elif any(under(name, p) for p in (*SHARED, *DOMAINS)) and any(under(target, w) for w in WIRING):
                found.append(f"{name} imports {target}: the wiring imports the domains, never the reverse")
            else:
                for domain in DOMAINS:
                    if under(name, domain):
                        others = [d for d in DOMAINS if d != domain and under(target, d)]
                        allowed = DOMAIN_MAY_IMPORT.get(domain, ())
                        found += [f"{name} imports {target}: {domain} may not import {o}" for o in others
                                  if o not in allowed]
    return found


def test_imports_run_one_way():
    assert violations() == []


def test_the_rule_catches_a_breaking_import():
    # The check itself must be able to fail: a spark_jobs module importing workers is reported.
    bad = ROOT / "spark_jobs" / "_import_rule_probe.py"
    bad.write_text("import workers.shared.settings\n")
    try:
        assert any("_import_rule_probe" in v for v in violations())
    finally:
        bad.unlink()


def test_the_rule_catches_a_domain_importing_the_wiring():
    # A domain's module importing the Celery app or the click group is reported, whichever domain and form it takes.
    for line in ("from workers.celery.app import create_celery\n", "import workers.cli.main\n"):
        bad = ROOT / "workers" / "gc" / "_import_rule_probe.py"
        bad.write_text(line)
        try:
            assert any(v.startswith("workers.gc._import_rule_probe") and "wiring" in v for v in violations()), line
        finally:
            bad.unlink()


def test_every_workers_module_has_a_place():
    # A module outside the domains and the wiring belongs in the shared package, so that the rules above apply to it
    # (a shared module loose at the top of workers/ once escaped them).
    placeless = [name for name in modules() if under(name, "workers") and name != "workers"
                 and not any(under(name, p) for p in (*SHARED, *DOMAINS, *WIRING))]
    assert placeless == []


def test_receiver_loads_neither_celery_nor_the_lakefs_sdk():
    env = {**os.environ, "LAKECTL_SERVER_ENDPOINT_URL": "http://127.0.0.1:9", "LAKECTL_CREDENTIALS_ACCESS_KEY_ID": "a",
           "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY": "b", "LAKEFS_JANITOR_WEBHOOK_SECRET": "s",
           "LAKEFS_JANITOR_CONFIG": "", "HOME": str(ROOT / "tests")}
    code = ("import sys, webhook.wsgi; "
            "print(sorted(m for m in ('celery', 'kombu', 'lakefs_sdk', 'pyspark') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stderr


def test_only_stores_spell_redis_keys_or_reach_into_a_store_client():
    # Keys are built from the prefix; reaching into another object's Redis client means spelling its keys.
    offenders = []
    for name, path in modules().items():
        # webhook.health only pings the Redis client: no key.
        # gc's Redis persistence is its run history (gc/history.py): its repository documents live in lakefs/documents
        if name.endswith(".store") or name in ("workers.gc.history", "workers.shared.locks",
                                                "workers.shared.services", "webhook.health"):
            continue
        text = path.read_text()
        for needle in ("prefix}:", ".redis.", "clock.redis", "clock.prefix"):
            if needle in text:
                offenders.append(f"{name}: {needle}")
    assert offenders == []


def test_functions_with_more_than_three_parameters_take_the_rest_by_keyword():
    # Click callbacks are called by click with keywords; private helpers are exempt; everything else spells
    # its arguments out beyond the third, so a call cannot silently shift them (as run_repository's once did).
    offenders = []
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_") and not node.decorator_list:
                positional = [a.arg for a in node.args.posonlyargs + node.args.args if a.arg not in ("self", "cls")]
                if len(positional) > 3:
                    offenders.append(f"{name}.{node.name}({', '.join(positional)})")
    assert offenders == []


# What spark_jobs/core may import: the standard library's pure parts, its own modules, and the libraries its
# pure functions are built on (Snappy and CRC32C for SSTable blocks, pyarrow for the report's parquet bytes, numpy
# for the blocks scanned as arrays and the kept index's binary searches).
CORE_MAY_IMPORT = {"__future__", "collections", "dataclasses", "datetime", "typing", "re", "fnmatch", "hashlib",
                   "json", "math", "struct", "array", "io", "zlib", "gzip", "base64", "enum", "functools", "itertools", "operator", "bisect",
                   "cramjam", "google_crc32c", "pyarrow", "numpy", "spark_jobs",
                   "logging", "lakefs_rangewalk"}


def test_spark_jobs_core_does_no_io():
    """Pure domain functions take data and `now`: no sockets, files, clients or clocks are reached from core."""
    found = []
    for name, path in modules().items():
        if under(name, "spark_jobs.core"):
            for target in imported(path):
                if target.split(".")[0] not in CORE_MAY_IMPORT:
                    found.append(f"{name} imports {target}")
    assert found == []


def test_every_spark_jobs_folder_is_a_package():
    """setuptools installs the packages it finds (``__init__.py``), and the engine's steps are folders
    (engine/reach/, engine/listing/, ...): a new folder of modules without one would be missing where the package
    is installed, on the workers and the Spark executors' images alike."""
    folders = {path.parent for path in (ROOT / "spark_jobs").rglob("*.py") if "__pycache__" not in path.parts}
    assert sorted(str(f.relative_to(ROOT)) for f in folders if not (f / "__init__.py").is_file()) == []


def test_pyspark_is_imported_only_by_the_spark_halves_and_the_jobs():
    """Each engine step's Spark half (engine/<step>/spark.py, over engine/backends/spark_base.py) and the jobs import
    pyspark; the thread runner's code never does (it runs where pyspark is not installed)."""
    found = []
    for name, path in modules().items():
        spark_half = name.endswith(".spark") or name == "spark_jobs.engine.backends.spark_base"
        if under(name, "spark_jobs") and not under(name, "spark_jobs.jobs") and not spark_half:
            found += [f"{name} imports {t}" for t in imported(path) if t.split(".")[0] == "pyspark"]
    assert found == []
