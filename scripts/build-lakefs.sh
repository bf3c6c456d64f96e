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
echo "building lakeFS $version from its Go module (first time only, a few minutes)..." >&2
start=$(date +%s)
(cd "$here/deploy/lakefs-build" && go build -trimpath \
  -ldflags "-X github.com/treeverse/lakefs/pkg/version.Version=$version" \
  -o "$bin.tmp" github.com/treeverse/lakefs/cmd/lakefs) >&2
mv "$bin.tmp" "$bin"
echo "built $bin in $(( $(date +%s) - start ))s" >&2
echo "$bin"
