#!/usr/bin/env bash
# Starts the local control plane (etcd + kube-apiserver on loopback) in the background,
# or reuses the one already running. Last line of output: export KUBECONFIG=<admin>.
#
# State (certs, kubeconfigs, data, logs, pids) lives in $STATE_DIR; stop with down.sh.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$CONTROL_PLANE_DIR/process.sh"

READY_TIMEOUT_SECS="${WCM_CLUSTER_READY_TIMEOUT:-120}"

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Certificates: one CA signs the apiserver's serving cert and both client identities.
make_certs() {
  local d="$STATE_DIR/pki"
  mkdir -p "$d"
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=wcm-local-ca" \
    -keyout "$d/ca.key" -out "$d/ca.crt" 2>/dev/null
  issue_cert "$d" apiserver "/CN=kube-apiserver" \
    "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:10.0.0.1"
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

start_etcd() {
  local client_port="$1" peer_port="$2"
  spawn etcd "$ETCD_BIN_DIR/etcd" --name=wcm --data-dir="$STATE_DIR/etcd" \
    --listen-client-urls="http://127.0.0.1:$client_port" \
    --advertise-client-urls="http://127.0.0.1:$client_port" \
    --listen-peer-urls="http://127.0.0.1:$peer_port" \
    --initial-advertise-peer-urls="http://127.0.0.1:$peer_port" \
    --initial-cluster="wcm=http://127.0.0.1:$peer_port" \
    --unsafe-no-fsync --quota-backend-bytes=4294967296 --log-level=warn
}

# RBAC is on; the ServiceAccount admission plugin is off because no controller creates
# the per-namespace "default" ServiceAccount that Pods would otherwise need.
start_apiserver() {
  local port="$1" etcd_port="$2" d="$STATE_DIR/pki"
  spawn kube-apiserver "$K8S_BIN_DIR/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:$etcd_port" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$port" \
    --cert-dir="$STATE_DIR/apiserver-certs" \
    --tls-cert-file="$d/apiserver.crt" --tls-private-key-file="$d/apiserver.key" \
    --client-ca-file="$d/ca.crt" --authorization-mode=RBAC \
    --service-account-key-file="$d/sa.pub" --service-account-signing-key-file="$d/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-cluster-ip-range=10.0.0.0/24 --allow-privileged=true \
    --disable-admission-plugins=ServiceAccount --endpoint-reconciler-type=none \
    --v="${WCM_APISERVER_VERBOSITY:-1}"
}

wait_ready() {
  local port="$1" d="$STATE_DIR/pki" deadline=$((SECONDS + READY_TIMEOUT_SECS))
  until curl -sf --cacert "$d/ca.crt" --cert "$d/admin.crt" --key "$d/admin.key" \
      "https://127.0.0.1:$port/readyz" >/dev/null 2>&1; do
    for c in etcd kube-apiserver; do
      pid_alive "$c" || { show_logs; stop_all; die "$c exited during start-up (logs above)"; }
    done
    if [ $SECONDS -ge $deadline ]; then
      show_logs; stop_all; die "kube-apiserver not ready after ${READY_TIMEOUT_SECS}s (logs above)"
    fi
    sleep 0.5
  done
}

show_logs() { for f in "$STATE_DIR"/logs/*.log; do echo "--- $f" >&2; tail -n 20 "$f" >&2; done; }

start_cluster() {
  "$CONTROL_PLANE_DIR/build.sh" etcd kube-apiserver
  rm -rf "$STATE_DIR" && mkdir -p "$STATE_DIR/logs"
  local etcd_port peer_port api_port
  etcd_port="$(free_port)"; peer_port="$(free_port)"; api_port="$(free_port)"
  make_certs
  write_kubeconfig admin "$api_port"
  write_kubeconfig restricted "$api_port"
  echo "$api_port" >"$STATE_DIR/apiserver.port"
  start_etcd "$etcd_port" "$peer_port"
  start_apiserver "$api_port" "$etcd_port"
  wait_ready "$api_port"
  log "kube-apiserver ready at https://127.0.0.1:$api_port (state in $STATE_DIR)"
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
