#!/usr/bin/env bash
# Run the whole suite (unit + integration against real lakeFS, Redis and Celery).
# pytest exits 5 when it collected no test; that must fail the run, never pass it.
set -uo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m pytest "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: failing the run" >&2
  exit 1
fi
exit "$rc"
