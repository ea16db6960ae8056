#!/usr/bin/env bash
# Starts the local control plane (etcd + kube-apiserver on loopback, a node, a registry)
# in the background, or reuses the one already running. Last line of output: export KUBECONFIG=<admin>.
#
# State (certs, kubeconfigs, data, logs, pids) lives in $STATE_DIR; stop with down.sh.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$CONTROL_PLANE_DIR/process.sh"
source "$CONTROL_PLANE_DIR/components.sh"
source "$CONTROL_PLANE_DIR/node.sh"
source "$CONTROL_PLANE_DIR/registry.sh"

# free_ports N: N distinct free loopback ports (all held open until each is known, so
# two calls in a row cannot hand out the same port).
free_ports() {
  python3 -c 'import socket, sys
held = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in held: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in held))' "$1"
}

# Certificates: one CA signs the apiserver's serving cert and the client identities.
# The serving cert also names the node bridge's address, where Pods reach the apiserver.
make_certs() {
  local d="$STATE_DIR/pki"
  mkdir -p "$d"
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=wcm-local-ca" \
    -keyout "$d/ca.key" -out "$d/ca.crt" 2>/dev/null
  issue_cert "$d" apiserver "/CN=kube-apiserver" \
    "subjectAltName=IP:127.0.0.1,IP:$(node_gateway),DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:10.0.0.1"
  issue_cert "$d" admin "/O=system:masters/CN=wcm-admin" ""
  issue_cert "$d" restricted "/CN=wcm-restricted" ""
  openssl genrsa -out "$d/sa.key" 2048 2>/dev/null
  openssl rsa -in "$d/sa.key" -pubout -out "$d/sa.pub" 2>/dev/null
}

issue_cert() {
  local d="$1" name="$2" subj="$3" san="$4" ext
  ext="$(mktemp)"
  if [ -n "$san" ]; then printf '%s\nextendedKeyUsage=serverAuth\n' "$san" >"$ext"
  else printf 'extendedKeyUsage=clientAuth\n' >"$ext"; fi
  openssl req -newkey rsa:2048 -nodes -subj "$subj" -keyout "$d/$name.key" -out "$d/$name.csr" 2>/dev/null
  openssl x509 -req -in "$d/$name.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
    -days 3650 -extfile "$ext" -out "$d/$name.crt" 2>/dev/null
  rm -f "$ext" "$d/$name.csr"
}

write_kubeconfig() {
  local user="$1" port="$2" d="$STATE_DIR/pki"
  cat >"$STATE_DIR/$user.kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: wcm-local
  cluster:
    server: https://127.0.0.1:$port
    certificate-authority: $d/ca.crt
users:
- name: $user
  user:
    client-certificate: $d/$user.crt
    client-key: $d/$user.key
contexts:
- name: $user@wcm-local
  context: {cluster: wcm-local, user: $user, namespace: default}
current-context: $user@wcm-local
KUBECONFIG
}

start_cluster() {
  "$CONTROL_PLANE_DIR/build.sh"
  rm -rf "$STATE_DIR" && mkdir -p "$STATE_DIR/logs"
  local etcd_port peer_port api_port registry_port
  read -r etcd_port peer_port api_port registry_port < <(free_ports 4)
  make_certs
  write_kubeconfig admin "$api_port"
  write_kubeconfig restricted "$api_port"
  echo "$api_port" >"$STATE_DIR/apiserver.port"
  echo "$etcd_port" >"$STATE_DIR/etcd.port"
  start_etcd "$etcd_port" "$peer_port"
  start_apiserver "$api_port" "$etcd_port"
  wait_ready "$api_port"
  start_controller_manager
  sleep 1
  pid_alive kube-controller-manager || { show_logs; stop_all; die "kube-controller-manager exited during start-up (logs above)"; }
  start_registry "$registry_port"
  start_node "$api_port"
  log "kube-apiserver ready at https://127.0.0.1:$api_port, kube-controller-manager running (state in $STATE_DIR)"
}

main() {
  mkdir -p "$(dirname "$STATE_DIR")"
  # One start-up at a time per state directory: a concurrent caller waits, then reuses.
  exec 9>"$STATE_DIR.lock"
  flock 9
  if cluster_running && curl -sf --cacert "$STATE_DIR/pki/ca.crt" --cert "$STATE_DIR/pki/admin.crt" \
      --key "$STATE_DIR/pki/admin.key" "https://127.0.0.1:$(cat "$STATE_DIR/apiserver.port")/readyz" >/dev/null 2>&1; then
    log "reusing the control plane already running (state in $STATE_DIR)"
  else
    stop_all # a half-dead earlier run: clear it before starting afresh
    start_cluster
  fi
  echo "export KUBECONFIG=$STATE_DIR/admin.kubeconfig"
}

main "$@"
