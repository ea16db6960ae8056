#!/usr/bin/env bash
# `make run`: runs the host with the example plugins in target/plugins/. Uses the
# configured cluster (KUBECONFIG, ~/.kube/config, or in-cluster); when there is none,
# starts the local control plane and creates a demo Node and a few Pods in it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Creates one object through the local control plane's API with the admin identity;
# an object that already exists is fine.
api_create() {
  local path="$1" body="$2" state="$3" port code
  port="$(cat "$state/apiserver.port")"
  code="$(curl -s -o /dev/null -w '%{http_code}' --cacert "$state/pki/ca.crt" \
    --cert "$state/pki/admin.crt" --key "$state/pki/admin.key" \
    -H 'Content-Type: application/json' -X POST -d "$body" "https://127.0.0.1:$port$path")"
  case "$code" in 201 | 409) ;; *) echo "run: creating $path failed with HTTP $code" >&2; return 1 ;; esac
}

create_demo_objects() {
  local state="$1"
  api_create /api/v1/nodes '{"apiVersion":"v1","kind":"Node","metadata":{"name":"demo-control-plane","labels":{"node-role.kubernetes.io/control-plane":""}}}' "$state"
  api_create /api/v1/nodes '{"apiVersion":"v1","kind":"Node","metadata":{"name":"demo-worker"}}' "$state"
  api_create /api/v1/namespaces '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"demo"}}' "$state"
  for i in 1 2 3 4 5; do
    api_create /api/v1/namespaces/demo/pods "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"web-$i\"},\"spec\":{\"containers\":[{\"name\":\"web\",\"image\":\"nginx:1.27\"}]}}" "$state"
  done
}

if [ -z "${KUBECONFIG:-}" ] && [ -z "${KUBERNETES_SERVICE_HOST:-}" ] && [ ! -f "$HOME/.kube/config" ]; then
  export_line="$(control-plane/scripts/up.sh | tail -n 1)"
  export KUBECONFIG="${export_line#export KUBECONFIG=}"
  create_demo_objects "$(dirname "$KUBECONFIG")"
  cat >&2 <<HINT

run: no cluster was configured, so the local control plane runs with a demo Node and
run: five Pods in namespace "demo". In another terminal:
run:   export KUBECONFIG=$KUBECONFIG
run:   kubectl get nodes -L pod-counter.example.com/count     # the count label
run:   kubectl get events -A --field-selector reason=Counted  # one Event per Pod
run:   kubectl -n demo delete pod web-1 --grace-period=0       # the label follows
run: Stop the host with Ctrl-C, the control plane with \`make cluster-down\`.

HINT
fi
exec target/debug/wasm-controller-manager run --plugins-dir target/plugins "$@"
