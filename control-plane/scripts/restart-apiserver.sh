#!/usr/bin/env bash
# Restarts the kube-apiserver of the local control plane on the same port, leaving etcd
# running: every open watch breaks and clients must resume or relist. Tests use it to
# force watch expiry; it also applies new apiserver flags without losing cluster state.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$CONTROL_PLANE_DIR/process.sh"
source "$CONTROL_PLANE_DIR/components.sh"

exec 9>"$STATE_DIR.lock"
flock 9
cluster_running || die "no control plane running in $STATE_DIR (run up.sh first)"
stop_component kube-apiserver
start_apiserver "$(cat "$STATE_DIR/apiserver.port")" "$(cat "$STATE_DIR/etcd.port")"
wait_ready "$(cat "$STATE_DIR/apiserver.port")"
log "kube-apiserver restarted"
