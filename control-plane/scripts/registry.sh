#!/usr/bin/env bash
# The local registry: the CNCF Distribution registry (built by build.sh from pinned
# modules), with TLS (a serving certificate from the cluster's CA) and basic auth,
# storing under $STATE_DIR/registry. Sourced by up.sh after common.sh, process.sh,
# components.sh and node.sh.
#
# It listens on every interface, as the API server does: the host and tests reach it
# on loopback, Pods (an in-cluster host pulling WasmPlugins) through the node's bridge;
# every request needs the password. Its address, CA and credentials are written to
# $STATE_DIR/registry.env, where tests, `make run` and users find them.

REGISTRY_USER=wcm

# start_registry PORT: starts it and waits until it answers an authenticated request.
start_registry() {
  local port="$1" d="$STATE_DIR/registry" pki="$STATE_DIR/pki" password
  mkdir -p "$d/data"
  issue_cert "$pki" registry "/CN=wcm-local-registry" \
    "subjectAltName=IP:127.0.0.1,IP:$(node_gateway),DNS:localhost"
  password="$(openssl rand -hex 16)"
  printf '%s\n' "$password" | "$REGISTRY_BIN_DIR/wcm-htpasswd" "$REGISTRY_USER" >"$d/htpasswd"
  cat >"$d/config.yml" <<YAML
version: 0.1
log: {level: warn, accesslog: {disabled: true}}
storage:
  filesystem: {rootdirectory: $d/data}
  delete: {enabled: true}
http:
  addr: ":$port"
  tls: {certificate: $pki/registry.crt, key: $pki/registry.key}
auth:
  htpasswd: {realm: wcm-local, path: $d/htpasswd}
YAML
  spawn registry "$REGISTRY_BIN_DIR/registry" serve "$d/config.yml"
  local deadline=$((SECONDS + 30))
  until curl -sf --cacert "$pki/ca.crt" -u "$REGISTRY_USER:$password" \
      "https://127.0.0.1:$port/v2/" >/dev/null 2>&1; do
    pid_alive registry || { show_logs; die "the registry exited during start-up (logs above)"; }
    [ $SECONDS -lt $deadline ] || die "the registry did not answer within 30 s"
    sleep 0.2
  done
  cat >"$STATE_DIR/registry.env" <<ENV
WCM_REGISTRY=127.0.0.1:$port
WCM_REGISTRY_FROM_PODS=$(node_gateway):$port
WCM_REGISTRY_CA=$pki/ca.crt
WCM_REGISTRY_USER=$REGISTRY_USER
WCM_REGISTRY_PASSWORD=$password
ENV
  log "registry ready at 127.0.0.1:$port (from Pods $(node_gateway):$port; credentials in $STATE_DIR/registry.env)"
}
