#!/usr/bin/env bash
# Build the lakeFS server from its Go module into ~/.cache/lakefs-janitor (once; later calls reuse it).
# Prints the binary's path. Override the version with LAKEFS_VERSION (must match deploy/lakefs-build/go.mod).
set -euo pipefail
version="${LAKEFS_VERSION:-v1.84.0}"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/lakefs-janitor"
bin="$cache/lakefs-$version"
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi
here="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$cache"
command -v go >/dev/null || { echo "go is not installed: lakeFS is built from its Go module" >&2; exit 1; }
# One line for the whole build; go's own output (hundreds of "go: downloading" lines) goes to a log file.
log="$cache/build-lakefs-$version.log"
printf 'building lakeFS %s from its Go module (first time only, a few minutes) ... ' "$version" >&2
start=$(date +%s)
if ! (cd "$here/deploy/lakefs-build" && go build -trimpath \
  -ldflags "-X github.com/treeverse/lakefs/pkg/version.Version=$version" \
  -o "$bin.tmp.$$" github.com/treeverse/lakefs/cmd/lakefs) >"$log" 2>&1; then
  rm -f "$bin.tmp.$$"
  echo "failed; the last lines of $log:" >&2
  tail -n 30 "$log" >&2
  exit 1
fi
mv "$bin.tmp.$$" "$bin"  # a name of its own: a concurrent build never moves this one
echo "done in $(( $(date +%s) - start ))s" >&2
echo "$bin"
