#!/usr/bin/env bash
# The tools the Helm chart (deploy/helm/lakefs-janitor) is tested with, first time only, cached in
# ~/.cache/lakefs-janitor like lakeFS:
#   helm                  built from its Go module helm.sh/helm/v3
#   kubernetes-validate   the Python package, in a virtualenv of its own: a validator that carries the Kubernetes
#                         API's JSON schemas (one per release, strict variants reject unknown fields)
#   prometheus-operator   its Go module, for the CustomResourceDefinitions of ServiceMonitor and PrometheusRule
#                         (the schemas of the two optional resources the chart renders)
# Prints one line per tool: <name> <path>.
set -euo pipefail
cache="${XDG_CACHE_HOME:-$HOME/.cache}/lakefs-janitor"
mkdir -p "$cache"
HELM_VERSION="${HELM_VERSION:-v3.21.4}"
KUBERNETES_VALIDATE_VERSION="${KUBERNETES_VALIDATE_VERSION:-1.37.0}"
PROMETHEUS_OPERATOR_VERSION="${PROMETHEUS_OPERATOR_VERSION:-v0.85.0}"
python="${PYTHON:-python3.11}"
command -v "$python" >/dev/null || python=python3

need_go() { command -v go >/dev/null || { echo "go is not installed: $1 comes from its Go module" >&2; exit 1; }; }

failed() {  # log
  echo "failed; the last lines of $1:" >&2
  tail -n 30 "$1" >&2
  exit 1
}

helm_bin="$cache/helm-$HELM_VERSION"
if [ ! -x "$helm_bin" ]; then
  need_go helm
  printf 'building helm %s from its Go module (first time only, a few minutes) ... ' "$HELM_VERSION" >&2
  start=$(date +%s)
  gobin="$(mktemp -d)"
  log="$cache/build-helm-$HELM_VERSION.log"
  # As helm's own Makefile: the default Kubernetes version (`helm template` without --kube-version) is the one
  # of the client-go helm is built with, else helm assumes 1.20.
  gomod="$(go mod download -json "helm.sh/helm/v3@$HELM_VERSION" 2>"$log" \
    | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')" || failed "$log"
  k8s_minor="$(sed -n 's/^[[:space:]]*k8s.io\/client-go v0\.\([0-9]*\)\..*/\1/p' "$gomod")"
  [ -n "$k8s_minor" ] || { echo "no k8s.io/client-go in $gomod" >>"$log"; failed "$log"; }
  ldflags="-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
    ldflags="$ldflags -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
  done
  GOBIN="$gobin" CGO_ENABLED=0 go install -trimpath -ldflags "$ldflags" \
    "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >>"$log" 2>&1 || failed "$log"
  mv "$gobin/helm" "$helm_bin"; rm -rf "$gobin"
  echo "done in $(( $(date +%s) - start ))s" >&2
fi
echo "helm $helm_bin"

validate_dir="$cache/kubernetes-validate-$KUBERNETES_VALIDATE_VERSION"
if [ ! -x "$validate_dir/bin/kubernetes-validate" ]; then
  printf 'installing kubernetes-validate %s with pip (first time only) ... ' "$KUBERNETES_VALIDATE_VERSION" >&2
  log="$cache/install-kubernetes-validate.log"
  rm -rf "$validate_dir"
  { "$python" -m venv "$validate_dir" \
    && PIP_CACHE_DIR="${PIP_CACHE_DIR:-$HOME/.cache/pip}" "$validate_dir/bin/python" -m pip install -q \
      --disable-pip-version-check "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION"; } >"$log" 2>&1 \
    || { rm -rf "$validate_dir"; failed "$log"; }
  echo done >&2
fi
echo "kubernetes-validate $validate_dir/bin/kubernetes-validate"

crd_dir="$cache/prometheus-operator-crds-$PROMETHEUS_OPERATOR_VERSION"
if [ ! -f "$crd_dir/monitoring.coreos.com_servicemonitors.yaml" ]; then
  need_go prometheus-operator
  printf 'downloading the prometheus-operator %s Go module for its CRDs (first time only) ... ' \
    "$PROMETHEUS_OPERATOR_VERSION" >&2
  log="$cache/download-prometheus-operator.log"
  module_dir="$(cd "$cache" && GOFLAGS=-mod=mod go mod download -json \
    "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION" 2>"$log" \
    | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')" || failed "$log"
  [ -n "$module_dir" ] || failed "$log"
  tmp="$(mktemp -d "$crd_dir.tmp.XXXXXX")"
  for kind in servicemonitors prometheusrules; do
    cp "$module_dir/example/prometheus-operator-crd/monitoring.coreos.com_$kind.yaml" "$tmp/"
  done
  rm -rf "$crd_dir"; mv "$tmp" "$crd_dir"
  echo done >&2
fi
echo "prometheus-operator-crds $crd_dir"
