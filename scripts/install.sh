#!/usr/bin/env bash
# Install everything lakefs-janitor needs on a fresh Debian machine with Python 3.11, Java 17 and Go:
# Debian packages (redis-server, wrk), a virtualenv in .venv with the project, PySpark and its test tools,
# the lakeFS server built from its Go module, and the object-store servers of the GC tests (scripts/build-stores.sh).
# Downloads and builds are cached under ~/.cache.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3.11}"
command -v "$python" >/dev/null || python=python3

need_apt=()
command -v redis-server >/dev/null || need_apt+=(redis-server)
command -v wrk >/dev/null || need_apt+=(wrk)
command -v promtool >/dev/null || need_apt+=(prometheus)  # promtool checks the alert rules and scrape configs
command -v java >/dev/null || need_apt+=(openjdk-17-jre-headless)  # Spark's JVM (the GC's Spark engine)
# The compiled range walk (native/rangewalk.c) needs a C compiler and the interpreter's headers.
command -v gcc >/dev/null || need_apt+=(gcc)
"$python" -c 'import os, sysconfig, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
  || need_apt+=("$("$python" -c 'import sys; print("python%d.%d-dev" % sys.version_info[:2])')")
if [ ${#need_apt[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing Debian packages: ${need_apt[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

export PIP_CACHE_DIR="${PIP_CACHE_DIR:-$HOME/.cache/pip}"
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
# setuptools' editable build prints a layout notice (BuildBackendWarning) that is noise for an install.
PYTHONWARNINGS=ignore .venv/bin/python -m pip install -q -e '.[test,spark,docs]'  # pip caches the wheel it builds from pyspark's sdist
# The build of the compiled range walk is optional for pip (a plain `pip install` without a compiler still works, on
# the careful decoder); here it must be there.
.venv/bin/python -c 'import lakefs_rangewalk' || { echo "lakefs_rangewalk (native/rangewalk.c) did not build" >&2; exit 1; }

# The cached builds are shared by every checkout on the machine: two installs at once (two clones, a CI run
# beside a working copy) wait for each other here instead of writing the same temporary files.
cache="${XDG_CACHE_HOME:-$HOME/.cache}/lakefs-janitor"
mkdir -p "$cache"
exec 9>"$cache/install.lock"
flock 9
scripts/build-lakefs.sh >/dev/null
# The object-store servers the GC is tested on (versitygw for S3, Azurite, fake-gcs-server), cached like lakeFS.
scripts/build-stores.sh >/dev/null
scripts/build-k8s-tools.sh >/dev/null  # helm, kubernetes-validate and the CRDs the Helm chart is tested with, cached
flock -u 9
