#!/usr/bin/env bash
# Run the whole suite (unit + integration against real lakeFS, Redis and Celery).
# On PYTEST_WORKERS pytest-xdist workers (default 2; 0: in this one process), a module at a time per worker, the
# costliest first (tests/xdist_schedule.py): most of a run is waiting on servers, Spark and sleeps, which two
# workers overlap. Arguments after these override them (e.g. `scripts/run-tests.sh -n 0 tests/unit`).
# pytest exits 5 when it collected no test; that must fail the run, never pass it.
set -uo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m pytest -n "${PYTEST_WORKERS:-2}" --dist loadscope "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: failing the run" >&2
  exit 1
fi
exit "$rc"
