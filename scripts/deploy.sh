#!/usr/bin/env bash
# `make deploy`: the host in the current cluster, as `kubectl apply -k deploy/` does,
# with plugins from this checkout: builds the image (without a container engine) and
# imports it into the local node, writes an overlay of deploy/ that puts each plugin
# file into a ConfigMap of its own, applies it, and waits until the host's Pods are
# ready. With no KUBECONFIG it uses the local control plane (`make cluster-up`).
# With --plugin-image (repeatable; see scripts/plugin-image.sh) the plugins come from
# plugin images instead: one init container per image copies its plugins into an
# emptyDir that is the host's plugins folder.
# The overlay also installs the WasmPlugin CRD; on the local cluster it trusts the
# local registry's CA and holds its credentials as the pull Secret `wcm-registry`.
# Each plugin acts as its own ServiceAccount: the overlay carries the RBAC that
# `wasm-controller-manager rbac` prints for the plugin files deployed; for plugin
# images, whose files are not here, give it with --rbac FILE (that command's output
# for the plugins in the images).
#
# On any other cluster, --image names the host's image in a registry that cluster pulls
# from (plugin images likewise), best pinned to its digest (REPOSITORY@sha256:...);
# without it the script stops, saying so. On the local node the image built here is
# pinned to its digest, so a rebuilt host is rolled out by the next deploy.
#
# --component DIR (repeatable) adds a kustomize component of deploy/components, such as
# every-replica (three replicas, a Lease per plugin).
#
# Usage: scripts/deploy.sh [--image REF | --binary PATH] [--overlay DIR] [--component DIR ...]
#                          [PLUGIN.wasm ... | --plugin-image REF ... --rbac FILE]
#   (default plugins: every target/plugins/*.wasm that fits a ConfigMap, under 1 MiB)
# Prints the overlay directory on its last line (`kubectl delete -k DIR -l
# '!wasm-controller-manager.io/crd'` undoes it, keeping the CRD other installs share).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source control-plane/scripts/common.sh
source control-plane/scripts/node.sh

image="" binary="" overlay="target/deploy" rbac="" plugins=() plugin_images=() components=()
while [ $# -gt 0 ]; do
  case "$1" in
    --image) image="$2"; shift 2 ;;
    --plugin-image) plugin_images+=("$2"); shift 2 ;;
    --binary) binary="$2"; shift 2 ;;
    --rbac) rbac="$2"; shift 2 ;;
    --overlay) overlay="$2"; shift 2 ;;
    --component) components+=("$(realpath "$2")"); shift 2 ;;
    *) plugins+=("$1"); shift ;;
  esac
done
KUBECTL="$K8S_BIN_DIR/kubectl"
[ -x "$KUBECTL" ] || control-plane/scripts/build.sh kubectl
local_cluster=false
if [ -z "${KUBECONFIG:-}" ] && [ ! -f "$HOME/.kube/config" ]; then
  export KUBECONFIG="$STATE_DIR/admin.kubeconfig"
fi
[ "${KUBECONFIG:-}" = "$STATE_DIR/admin.kubeconfig" ] && local_cluster=true

# Only the local node gets images imported; any other cluster pulls them from a
# registry, so it must be told which reference to pull.
if ! $local_cluster; then
  if [ -z "$image" ]; then
    echo "deploy: ${KUBECONFIG:-$HOME/.kube/config} is not the local control plane, whose node alone gets the image" \
      "imported: push the host's image (make image; target/wasm-controller-manager-image.tar)" \
      "to a registry the cluster pulls from and pass it: make deploy IMAGE=REGISTRY/wasm-controller-manager:TAG" >&2
    exit 2
  fi
  for ref in "${plugin_images[@]}"; do
    case "$ref" in wcm.local/*)
      echo "deploy: plugin image $ref exists only on the local node; push it to a registry" \
        "the cluster pulls from (scripts/plugin-image.sh --tag REGISTRY/NAME:TAG --out FILE)" \
        "and pass that reference" >&2
      exit 2 ;;
    esac
  done
fi

if [ -z "$image" ]; then
  if [ -n "$binary" ]; then image="$(scripts/image.sh --binary "$binary" | tail -n1)"
  else image="$(scripts/image.sh --profile release | tail -n1)"; fi
fi

if [ ${#plugins[@]} -gt 0 ] && [ ${#plugin_images[@]} -gt 0 ]; then
  echo "deploy: plugins come from ConfigMaps (PLUGIN.wasm) or from plugin images, not both" >&2
  exit 2
fi
if [ ${#plugin_images[@]} -gt 0 ] && [ -z "$rbac" ]; then
  echo "deploy: with --plugin-image, give the plugins' RBAC with --rbac FILE" \
    "(wasm-controller-manager rbac PLUGIN.wasm... > FILE)" >&2
  exit 2
fi
if [ ${#plugins[@]} -eq 0 ] && [ ${#plugin_images[@]} -eq 0 ]; then
  for f in target/plugins/*.wasm; do
    if [ "$(stat -c %s "$f")" -lt $((1 << 20)) ]; then plugins+=("$f")
    else echo "deploy: $f is over 1 MiB, too large for a ConfigMap; left out" >&2; fi
  done
fi

# The patch of the Deployment that fills the plugins volume from the ConfigMaps.
plugins_from_config_maps() {
  echo "      - op: replace"
  echo "        path: /spec/template/spec/volumes/0/projected/sources"
  echo "        value:"
  for f in "${plugins[@]}"; do
    name="$(basename "$f")"
    echo "          - configMap: {name: wcm-plugin-${name%.wasm}}"
  done
}

# The patch that makes the plugins volume an emptyDir filled by one init container per
# plugin image (restricted like the host's container).
# Each plugin image installs into a volume of its own (its init container runs the
# image author's entrypoint, so it may write nothing else); then the host's own image
# gathers them into the plugins volume, refusing a file name two images both ship.
plugins_from_images() {
  local i=0 ref from=""
  echo "      - op: replace"
  echo "        path: /spec/template/spec/volumes/0"
  echo "        value: {name: plugins, emptyDir: {sizeLimit: 512Mi}}"
  echo "      - op: add"
  echo "        path: /spec/template/spec/initContainers"
  echo "        value:"
  for ref in "${plugin_images[@]}"; do
    echo "          - name: plugins-$i"
    echo "            image: \"$ref\""
    echo "            imagePullPolicy: IfNotPresent"
    echo "            args: [-from, /wcm-plugins, -to, /plugins]"
    echo "            volumeMounts: [{name: plugin-image-$i, mountPath: /plugins}]"
    echo "            resources: {requests: {cpu: 10m, memory: 16Mi}, limits: {memory: 64Mi}}"
    echo "            securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}"
    from="$from, --from=/images/$i"
    i=$((i + 1))
  done
  echo "          - name: gather-plugins"
  echo "            image: wasm-controller-manager"
  echo "            imagePullPolicy: IfNotPresent"
  echo "            args: [gather-plugins, --to=/plugins${from}]"
  echo "            volumeMounts:"
  echo "              - {name: plugins, mountPath: /plugins}"
  for ((j = 0; j < i; j++)); do
    echo "              - {name: plugin-image-$j, mountPath: /images/$j, readOnly: true}"
  done
  echo "            resources: {requests: {cpu: 10m, memory: 16Mi}, limits: {memory: 64Mi}}"
  echo "            securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}"
  for ((j = 0; j < i; j++)); do
    echo "      - op: add"
    echo "        path: /spec/template/spec/volumes/-"
    echo "        value: {name: plugin-image-$j, emptyDir: {sizeLimit: 512Mi}}"
  done
}

# The local registry (registry.env): its CA for the host (--registry-ca-file) and its
# credentials as the pull Secret `wcm-registry`, so WasmPlugins can name
# $WCM_REGISTRY_FROM_PODS/... with `pullSecret: wcm-registry`.
registry_env="$STATE_DIR/registry.env"
with_registry=false
if $local_cluster && [ -f "$registry_env" ]; then with_registry=true; fi

# The patch that trusts the local registry's CA.
trust_registry() {
  echo "      - op: add"
  echo "        path: /spec/template/spec/volumes/-"
  echo "        value: {name: registry-ca, configMap: {name: wcm-registry-ca}}"
  echo "      - op: add"
  echo "        path: /spec/template/spec/containers/0/volumeMounts/-"
  echo "        value: {name: registry-ca, mountPath: /etc/wcm-registry, readOnly: true}"
  echo "      - op: add"
  echo "        path: /spec/template/spec/containers/0/args/-"
  echo "        value: --registry-ca-file=/etc/wcm-registry/ca.crt"
}

# The kustomize images entries of the host's reference REF: REPOSITORY[:TAG][@DIGEST]
# (a registry's port is no tag); a digest, when given, is what the Pods run. Two
# entries: deploy/host has already renamed its image to wcm.local/..., and this
# overlay's patches add containers named `wasm-controller-manager`.
image_entry() {
  local ref="$1" digest="" tag="" to name
  case "$ref" in *@*) digest="${ref#*@}"; ref="${ref%%@*}" ;; esac
  case "${ref##*/}" in *:*) tag="${ref##*:}"; ref="${ref%:*}" ;; esac
  to="newName: $ref"
  if [ -n "$digest" ]; then to="$to, digest: $digest"
  elif [ -n "$tag" ]; then to="$to, newTag: \"$tag\""; fi
  for name in wcm.local/wasm-controller-manager wasm-controller-manager; do
    echo "  - {name: $name, $to}"
  done
}
case "$image" in
  *@sha256:*) ;;
  *) echo "deploy: $image names no digest: the Pods keep an image they already have under" \
    "that tag (imagePullPolicy IfNotPresent), so a tag pushed again is not rolled out;" \
    "pin it: IMAGE=REPOSITORY@sha256:... (the digest docker push prints)" >&2 ;;
esac

rm -rf "$overlay" && mkdir -p "$overlay"
base="$(realpath --relative-to="$overlay" deploy/host)"
# The WasmPlugin CRD, beside the host (kustomize loads files inside the overlay only).
cp deploy/crds/wasmplugins.yaml "$overlay/wasmplugins-crd.yaml"
if $with_registry; then
  # shellcheck disable=SC1090
  source "$registry_env"
  cp "$WCM_REGISTRY_CA" "$overlay/ca.crt"
  auth="$(printf '%s:%s' "$WCM_REGISTRY_USER" "$WCM_REGISTRY_PASSWORD" | base64 -w0)"
  printf '{"auths": {"%s": {"auth": "%s"}}}\n' "$WCM_REGISTRY_FROM_PODS" "$auth" \
    >"$overlay/.dockerconfigjson"
fi
if [ -n "$rbac" ]; then
  cp "$rbac" "$overlay/rbac.yaml"
else
  # The host binary prints the RBAC; any build of it will do.
  tool="${binary:-target/release/wasm-controller-manager}"
  if [ ! -x "$tool" ]; then
    cargo build -q -p wasm-controller-manager
    tool=target/debug/wasm-controller-manager
  fi
  "$tool" rbac "${plugins[@]}" >"$overlay/rbac.yaml"
fi
{
  echo "# Generated by scripts/deploy.sh: deploy/host with this checkout's plugins, their"
  echo "# RBAC and image."
  echo "apiVersion: kustomize.config.k8s.io/v1beta1"
  echo "kind: Kustomization"
  echo "resources: [wasmplugins-crd.yaml, $base, rbac.yaml]"
  if [ ${#components[@]} -gt 0 ]; then
    echo "components:"
    for c in "${components[@]}"; do echo "  - $(realpath --relative-to="$overlay" "$c")"; done
  fi
  echo "images:"
  image_entry "$image"
  echo "generatorOptions: {disableNameSuffixHash: true}"
  if [ ${#plugins[@]} -gt 0 ] || $with_registry; then echo "configMapGenerator:"; fi
  if $with_registry; then
    echo "  - {name: wcm-registry-ca, namespace: wcm-system, files: [ca.crt]}"
  fi
  for f in "${plugins[@]}"; do
    name="$(basename "$f")"
    cp "$f" "$overlay/$name"
    files="$name"
    # The plugin's settings, if there are any beside it, go into its ConfigMap too.
    for suffix in .settings.json .settings.yaml; do
      settings="${f%.wasm}$suffix"
      if [ -f "$settings" ]; then
        cp "$settings" "$overlay/$(basename "$settings")"
        files="$files, $(basename "$settings")"
      fi
    done
    echo "  - {name: wcm-plugin-${name%.wasm}, namespace: wcm-system, files: [$files]}"
  done
  if $with_registry; then
    echo "secretGenerator:"
    echo "  - {name: wcm-registry, namespace: wcm-system, type: kubernetes.io/dockerconfigjson, files: [.dockerconfigjson]}"
  fi
  echo "patches:"
  echo "  - target: {kind: Deployment, name: wasm-controller-manager}"
  echo "    patch: |-"
  if [ ${#plugin_images[@]} -gt 0 ]; then plugins_from_images; else plugins_from_config_maps; fi
  if $with_registry; then trust_registry; fi
  if $local_cluster; then
    # No kube-proxy on the local node: Pods reach the API server on the bridge.
    echo "      - op: add"
    echo "        path: /spec/template/spec/containers/0/env/-"
    echo "        value: {name: KUBERNETES_SERVICE_HOST, value: \"$(node_gateway)\"}"
    echo "      - op: add"
    echo "        path: /spec/template/spec/containers/0/env/-"
    echo "        value: {name: KUBERNETES_SERVICE_PORT, value: \"$(cat "$STATE_DIR/apiserver.port")\"}"
  fi
} >"$overlay/kustomization.yaml"

# Server-side: a client-side apply would copy every plugin into an annotation.
"$KUBECTL" apply --server-side --force-conflicts -k "$overlay" >&2
# A debug host compiles its plugins at start, slowly on a busy 2-core machine.
if ! "$KUBECTL" -n wcm-system rollout status deployment/wasm-controller-manager \
  --timeout="${WCM_ROLLOUT_TIMEOUT:-300s}" >&2; then
  # Say why, so a failed rollout (here or in CI) can be understood from its output.
  echo "deploy: the host's Pods did not become ready; their state, events and logs:" >&2
  "$KUBECTL" -n wcm-system get pods -o wide >&2 || true
  "$KUBECTL" -n wcm-system get events --sort-by=.lastTimestamp >&2 || true
  for pod in $("$KUBECTL" -n wcm-system get pods -o name 2>/dev/null); do
    echo "--- $pod" >&2
    "$KUBECTL" -n wcm-system describe "$pod" | sed -n '/^Containers:/,/^Volumes:/p' >&2 || true
    "$KUBECTL" -n wcm-system logs "$pod" --all-containers --tail=40 >&2 || true
    "$KUBECTL" -n wcm-system logs "$pod" --previous --tail=20 >&2 2>/dev/null || true
  done
  exit 1
fi
echo "deploy: wasm-controller-manager is ready in namespace wcm-system (image $image)" >&2
echo "$overlay"
