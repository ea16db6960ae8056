#!/usr/bin/env bash
# Shared paths and helpers for the control-plane scripts.
set -euo pipefail

CONTROL_PLANE_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$CONTROL_PLANE_DIR/versions.env"

# Built binaries live outside the repository, keyed by version, so every clone and
# every CI run on the same machine reuses them.
CACHE_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/wasm-controller-manager/control-plane"
K8S_BIN_DIR="$CACHE_ROOT/kubernetes-$KUBERNETES_VERSION"
ETCD_BIN_DIR="$CACHE_ROOT/etcd-$ETCD_VERSION"
REGISTRY_BIN_DIR="$CACHE_ROOT/registry-$REGISTRY_VERSION"
COSIGN_BIN_DIR="$CACHE_ROOT/cosign-$COSIGN_VERSION"
PROMTOOL_BIN_DIR="$CACHE_ROOT/promtool-$PROMETHEUS_VERSION"
HELM_BIN_DIR="$CACHE_ROOT/helm-$HELM_VERSION"
HELM3_BIN_DIR="$CACHE_ROOT/helm-$HELM3_VERSION"
OTELCOL_BIN_DIR="$CACHE_ROOT/otelcol-$OTELCOL_VERSION"

# The sandbox image of the local node's Pods, built by images.sh from control-plane/images.
PAUSE_IMAGE=wcm.local/pause:1
# The example web server's image (control-plane/images/cmd/web), which WebApps run.
WEB_IMAGE=wcm.local/web:1

# Runtime state (certs, kubeconfigs, etcd data, logs, pids) of the one local control
# plane this user runs. Override with WCM_CLUSTER_DIR to run an isolated one.
STATE_DIR="${WCM_CLUSTER_DIR:-${XDG_STATE_HOME:-$HOME/.local/state}/wasm-controller-manager/cluster}"

log() { echo "control-plane: $*" >&2; }
die() { echo "control-plane: error: $*" >&2; exit 1; }
