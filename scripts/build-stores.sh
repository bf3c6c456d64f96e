#!/usr/bin/env bash
# The object-store servers the tests run lakeFS and the GC against, on loopback (first time only; cached):
#   versitygw        (S3, Go module github.com/versity/versitygw, posix backend)
#   fake-gcs-server  (GCS, Go module github.com/fsouza/fake-gcs-server)
#   azurite          (Azure Blob Storage, the npm package)
# Prints one line per server: <name> <path of its executable>.
set -euo pipefail
cache="${XDG_CACHE_HOME:-$HOME/.cache}/lakefs-janitor"
mkdir -p "$cache"
VERSITYGW_VERSION="${VERSITYGW_VERSION:-v1.8.0}"
FAKE_GCS_VERSION="${FAKE_GCS_VERSION:-v1.56.1}"
AZURITE_VERSION="${AZURITE_VERSION:-3.37.0}"

go_tool() {  # name module version
  local name="$1" module="$2" version="$3" bin="$cache/$1-$3"
  if [ ! -x "$bin" ]; then
    command -v go >/dev/null || { echo "go is not installed: $name is built from its Go module" >&2; exit 1; }
    printf 'building %s %s from its Go module (first time only) ... ' "$name" "$version" >&2
    local gobin; gobin="$(mktemp -d)"
    if ! GOBIN="$gobin" go install "$module@$version" >"$cache/build-$name-$version.log" 2>&1; then
      echo "failed; the last lines of $cache/build-$name-$version.log:" >&2
      tail -n 30 "$cache/build-$name-$version.log" >&2
      exit 1
    fi
    mv "$gobin/$name" "$bin"; rm -rf "$gobin"
    echo done >&2
  fi
  echo "$name $bin"
}

go_tool versitygw github.com/versity/versitygw/cmd/versitygw "$VERSITYGW_VERSION"
go_tool fake-gcs-server github.com/fsouza/fake-gcs-server "$FAKE_GCS_VERSION"

azurite_dir="$cache/azurite-$AZURITE_VERSION"
if [ ! -x "$azurite_dir/node_modules/.bin/azurite-blob" ]; then
  command -v npm >/dev/null || { echo "npm is not installed: Azurite comes from the npm registry" >&2; exit 1; }
  printf 'installing azurite %s with npm (first time only) ... ' "$AZURITE_VERSION" >&2
  mkdir -p "$azurite_dir"
  if ! npm install --prefix "$azurite_dir" --no-audit --no-fund --loglevel=error \
      --cache "${XDG_CACHE_HOME:-$HOME/.cache}/npm" "azurite@$AZURITE_VERSION" >"$cache/install-azurite.log" 2>&1; then
    echo "failed; the last lines of $cache/install-azurite.log:" >&2
    tail -n 30 "$cache/install-azurite.log" >&2
    exit 1
  fi
  echo done >&2
fi
echo "azurite-blob $azurite_dir/node_modules/.bin/azurite-blob"
