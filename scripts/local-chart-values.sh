#!/usr/bin/env bash
# Chart values the local control plane's node needs (`helm install -f`): it runs no
# kube-proxy, so the `kubernetes` Service's address does not route and Pods reach the
# API server on the node's bridge, whose address its certificate names. Any other
# cluster needs none of this. The control plane is the one whose admin kubeconfig
# KUBECONFIG names, else the one `make cluster-up` starts.
#
# Usage: scripts/local-chart-values.sh > local-values.yaml
set -euo pipefail
if [ -n "${KUBECONFIG:-}" ] && [ -f "$(dirname "$KUBECONFIG")/apiserver.port" ]; then
  export WCM_CLUSTER_DIR="$(dirname "$KUBECONFIG")"
fi
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source control-plane/scripts/common.sh
source control-plane/scripts/node.sh
[ -f "$STATE_DIR/apiserver.port" ] || die "no local control plane in $STATE_DIR (make cluster-up)"
echo "# The local control plane's node (no kube-proxy): the API server on the node's bridge."
echo "extraEnv:"
echo "  - {name: KUBERNETES_SERVICE_HOST, value: \"$(node_gateway)\"}"
echo "  - {name: KUBERNETES_SERVICE_PORT, value: \"$(cat "$STATE_DIR/apiserver.port")\"}"
