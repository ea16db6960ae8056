#!/usr/bin/env bash
# `make run`: runs the host with the example plugins in target/plugins/. Uses the
# configured cluster (KUBECONFIG, ~/.kube/config, or in-cluster); when there is none,
# starts the local control plane (with its node when this machine can run containers)
# and creates a few demo Pods and a WebApp in namespace demo.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source control-plane/scripts/common.sh
host=target/debug/wasm-controller-manager

# Creates one object through the local control plane's API with the admin identity;
# an object that already exists is fine. The body is JSON, or YAML if a fourth
# argument says `yaml` (the API server reads both).
api_create() {
  local path="$1" body="$2" state="$3" type="application/${4:-json}" port code
  port="$(cat "$state/apiserver.port")"
  code="$(curl -s -o /dev/null -w '%{http_code}' --cacert "$state/pki/ca.crt" \
    --cert "$state/pki/admin.crt" --key "$state/pki/admin.key" \
    -H "Content-Type: $type" -X POST --data-binary "$body" "https://127.0.0.1:$port$path")"
  case "$code" in 201 | 409) ;; *) echo "run: creating $path failed with HTTP $code" >&2; return 1 ;; esac
}

# The WebApp CRD of deployment-reconcile and one WebApp, once the CRD is served.
create_demo_webapp() {
  local state="$1" i
  api_create /apis/apiextensions.k8s.io/v1/customresourcedefinitions \
    "$(cat plugins/deployment-reconcile/webapp-crd.yaml)" "$state" yaml
  for i in $(seq 1 20); do
    api_create /apis/demo.wasm-controller-manager.io/v1alpha1/namespaces/demo/webapps \
      '{"apiVersion":"demo.wasm-controller-manager.io/v1alpha1","kind":"WebApp","metadata":{"name":"shop"},"spec":{"image":"wcm.local/web:1","replicas":2,"port":8080,"env":[{"name":"MESSAGE","value":"the demo shop is open"}]}}' \
      "$state" 2>/dev/null && return
    sleep 0.5
  done
  echo "run: the WebApp CRD was not served within 10 s" >&2
  return 1
}

# A namespace whose Pods tolerate the node's control-plane taint, with demo Pods running
# the node's example web server and opted-in objects for the Python and JavaScript
# plugins. Without a node (a machine that cannot run containers), the Pods stay Pending
# and a Node object stands in, so pod-counter has a control-plane node to label.
create_demo_objects() {
  local state="$1"
  [ -f "$state/node.enabled" ] ||
    api_create /api/v1/nodes '{"apiVersion":"v1","kind":"Node","metadata":{"name":"demo-control-plane","labels":{"node-role.kubernetes.io/control-plane":""}}}' "$state"
  api_create /api/v1/namespaces '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"demo","annotations":{"scheduler.alpha.kubernetes.io/defaultTolerations":"[{\"key\":\"node-role.kubernetes.io/control-plane\",\"operator\":\"Exists\",\"effect\":\"NoSchedule\"}]"}}}' "$state"
  for i in 1 2 3 4 5; do
    api_create /api/v1/namespaces/demo/pods "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"web-$i\"},\"spec\":{\"containers\":[{\"name\":\"web\",\"image\":\"wcm.local/web:1\"}]}}" "$state"
  done
  # Opted in to data-hash (plugins/javascript/data-hash).
  api_create /api/v1/namespaces/demo/configmaps '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings","labels":{"example.com/hash-data":""}},"data":{"mode":"demo"}}' "$state"
  # Opted in to phase-labeller (plugins/python/phase-labeller).
  api_create /api/v1/namespaces/demo/pods '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"tracked","labels":{"example.com/track-phase":""}},"spec":{"containers":[{"name":"web","image":"wcm.local/web:1"}]}}' "$state"
}

# Each plugin acts as its own ServiceAccount in wcm-system: the RBAC `rbac` derives
# from the example plugins' registrations (the namespace included), applied as an
# operator would, to whichever cluster is configured; said, not hidden.
grant_example_plugins() {
  local kubectl=kubectl
  [ -x "$K8S_BIN_DIR/kubectl" ] && kubectl="$K8S_BIN_DIR/kubectl"
  echo "run: granting the example plugins their RBAC: $host rbac target/plugins | kubectl apply -f -" >&2
  echo "run: and installing the WasmPlugin CRD (WasmPlugins of wcm-system are followed): kubectl apply -f deploy/crds/wasmplugins.yaml" >&2
  if ! "$host" rbac target/plugins | "$kubectl" apply -f - >/dev/null ||
    ! "$kubectl" apply -f deploy/crds/wasmplugins.yaml >/dev/null; then
    echo "run: applying the RBAC failed (above); apply it as a user who may grant RBAC, or run" \
      "the host without impersonation: $host run --plugins-dir target/plugins --impersonate-plugins=false" >&2
    exit 1
  fi
}

if [ -z "${KUBECONFIG:-}" ] && [ -z "${KUBERNETES_SERVICE_HOST:-}" ] && [ ! -f "$HOME/.kube/config" ]; then
  export_line="$(control-plane/scripts/up.sh | tail -n 1)"
  export KUBECONFIG="${export_line#export KUBECONFIG=}"
  create_demo_objects "$(dirname "$KUBECONFIG")"
  create_demo_webapp "$(dirname "$KUBECONFIG")"
  grant_example_plugins
  cat >&2 <<HINT

run: no cluster was configured, so the local control plane runs with six demo Pods and a
run: WebApp "shop" in namespace "demo". In another terminal:
run:   export KUBECONFIG=$KUBECONFIG
run:   kubectl get nodes -L pod-counter.example.com/count     # the count label
run:   kubectl get events -A --field-selector reason=Counted  # one Event per Pod
run:   kubectl -n demo delete pod web-1 --grace-period=0       # the label follows
run:   kubectl -n demo get pod tracked -L example.com/phase   # labelled by a Python plugin
run:   kubectl -n demo get cm settings -L example.com/data-hash # labelled by a JavaScript plugin
run:   kubectl -n demo get webapps,deployments,pods           # shop, its Deployment, its Pods
run:   kubectl -n demo patch webapp shop --type merge -p '{"spec":{"replicas":3}}'
run: Each plugin acts as its ServiceAccount wcm-system/wcm-plugin-<name>, with the RBAC
run: \`$host rbac target/plugins\` printed. A plugin you drop in needs its own:
run:   $host rbac NEW.wasm | kubectl apply -f -
run:   $host plugins                                  # declared vs granted rules
run: Stop the host with Ctrl-C, the control plane with \`make cluster-down\`.

HINT
else
  # A configured cluster is used as kubebuilder's `make run` uses it (the current
  # context); said before anything is applied to it.
  kubectl=kubectl
  [ -x "$K8S_BIN_DIR/kubectl" ] && kubectl="$K8S_BIN_DIR/kubectl"
  context="$("$kubectl" config current-context 2>/dev/null || echo "in-cluster")"
  server="$("$kubectl" config view --minify -o 'jsonpath={.clusters[0].cluster.server}' 2>/dev/null || true)"
  cat >&2 <<SAY
run: using the configured cluster: context "$context"${server:+ ($server)}, from ${KUBECONFIG:-$HOME/.kube/config}.
run: applying there the example plugins' RBAC (namespace wcm-system, a ServiceAccount,
run: roles and bindings per plugin: \`$host rbac target/plugins\`) and the WasmPlugin
run: CRD (deploy/crds/wasmplugins.yaml; wcm-system's WasmPlugins are followed), then running the
run: examples, which label control-plane Nodes, record an Event on every Pod and act
run: on opted-in objects (docs/writing-a-plugin.md). Ctrl-C now to stop; remove the
run: examples' RBAC afterwards with:
run:   $host rbac target/plugins | kubectl delete -l wasm-controller-manager.io/plugin -f -
SAY
  grant_example_plugins
  echo "run: a plugin you drop in needs its own: $host rbac NEW.wasm | kubectl apply -f -" >&2
fi
exec "$host" run --plugins-dir target/plugins "$@"
