#!/usr/bin/env bash
# `--run`: only what `make run` needs (the control plane and node, the plugin tools),
# not the tools only the tests use (cosign, promtool, helm, the OpenTelemetry
# Collector).
# Installs what a fresh machine lacks for building and testing: Debian tools the
# control-plane scripts use, containerd, runc and the CNI plugins for the local node,
# the wasm32-wasip2 Rust target, componentize-py and
# componentize-js for Python and JavaScript plugins (pinned, in the cache), and the
# pinned control plane (built once into the cache). Idempotent and quick when everything is there.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

missing=()
for tool in openssl curl jq python3 flock setsid objcopy; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages for: ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq openssl curl jq python3 util-linux binutils >/dev/null
fi

# The local node's container runtime: containerd 1.6, runc and the CNI plugins from
# Debian (Kubernetes 1.35 is the last release that supports containerd 1.x).
if ! command -v containerd >/dev/null || ! command -v runc >/dev/null ||
    [ ! -x /usr/lib/cni/bridge ] || ! command -v ip >/dev/null; then
  echo "setup: installing containerd, runc, the CNI plugins and iproute2 for the local node" >&2
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq containerd runc containernetworking-plugins iproute2 >/dev/null
fi

command -v go >/dev/null || { echo "setup: Go is required (go.dev/doc/install)" >&2; exit 1; }
command -v rustup >/dev/null || { echo "setup: rustup is required (rustup.rs)" >&2; exit 1; }
rustup target list --installed | grep -qx wasm32-wasip2 || rustup target add wasm32-wasip2

# componentize-py builds Python plugins (plugins/python/*) into components.
source scripts/tools.env
if ! "$PYTHON_TOOLS/bin/componentize-py" --version 2>/dev/null | grep -qx "componentize-py $COMPONENTIZE_PY_VERSION"; then
  echo "setup: installing componentize-py $COMPONENTIZE_PY_VERSION into $PYTHON_TOOLS" >&2
  if ! python3 -m venv "$PYTHON_TOOLS" 2>/dev/null; then
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq python3-venv >/dev/null
    rm -rf "$PYTHON_TOOLS" && python3 -m venv "$PYTHON_TOOLS"
  fi
  "$PYTHON_TOOLS/bin/pip" install -q "componentize-py==$COMPONENTIZE_PY_VERSION"
fi

# componentize-js builds JavaScript plugins (plugins/javascript/*) into components.
if [ ! -x "$JS_TOOLS/node_modules/.bin/componentize-js" ]; then
  command -v npm >/dev/null || { echo "setup: Node.js with npm is required (nodejs.org)" >&2; exit 1; }
  echo "setup: installing componentize-js $COMPONENTIZE_JS_VERSION into $JS_TOOLS" >&2
  mkdir -p "$JS_TOOLS"
  npm install --silent --no-audit --no-fund --prefix "$JS_TOOLS" \
    "@bytecodealliance/componentize-js@$COMPONENTIZE_JS_VERSION"
fi

if [ "${1:-}" = --run ]; then
  control-plane/scripts/build.sh etcd kube-apiserver kube-controller-manager kube-scheduler \
    kubelet kubectl registry
else
  control-plane/scripts/build.sh
fi
