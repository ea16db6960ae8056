#!/usr/bin/env bash
# The local node: containerd (runc, CNI bridge), a kubelet and kube-scheduler, all with
# their state under $STATE_DIR/node, so Pods really run. Sourced by up.sh and down.sh
# after common.sh and process.sh.
#
# Everything machine-wide is named after the state directory (bridge, subnet, cgroup
# root, ports), so the test cluster and `make cluster-up`'s can run side by side.
# On a machine that cannot run containers the control plane starts without a node and
# says why.

NODE_NAME=wcm-control-plane
NODE_DIR="$STATE_DIR/node"
CONTAINERD_SOCK="$NODE_DIR/containerd.sock"
NODE_READY_TIMEOUT_SECS="${WCM_NODE_READY_TIMEOUT:-90}"

# A short id of this state directory, for machine-wide names.
node_id() { printf '%s' "$STATE_DIR" | sha256sum | cut -c1-6; }
node_bridge() { echo "wcm$(node_id)"; }
node_subnet() { echo "10.88.$(( 0x$(node_id | cut -c1-2) % 250 + 1 )).0/24"; }
# The bridge's own address: how Pods reach the host, and so the API server.
node_gateway() { local subnet; subnet="$(node_subnet)"; echo "${subnet%.0/24}.1"; }
ctr_k8s() { ctr -a "$CONTAINERD_SOCK" -n k8s.io "$@"; }

# Why this machine cannot run the node, or nothing if it can.
node_unsupported() {
  [ "${WCM_NO_NODE:-}" = 1 ] && { echo "turned off by WCM_NO_NODE=1"; return; }
  [ "$(id -u)" = 0 ] || { echo "the kubelet and containerd need root"; return; }
  local tool missing=()
  for tool in containerd containerd-shim-runc-v2 runc ctr ip; do
    command -v "$tool" >/dev/null || missing+=("$tool")
  done
  [ -x /usr/lib/cni/bridge ] || missing+=("CNI plugins in /usr/lib/cni")
  [ ${#missing[@]} -eq 0 ] || { echo "missing ${missing[*]} (scripts/setup.sh installs them)"; return; }
  [ -d /sys/fs/cgroup/memory ] || [ -f /sys/fs/cgroup/cgroup.controllers ] ||
    echo "no cgroup filesystem at /sys/fs/cgroup"
}

write_containerd_config() {
  cat >"$NODE_DIR/containerd.toml" <<TOML
version = 2
root = "$NODE_DIR/containerd/root"
state = "$NODE_DIR/containerd/state"
[grpc]
  address = "$CONTAINERD_SOCK"
[plugins."io.containerd.internal.v1.opt"]
  path = "$NODE_DIR/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # Without it every sandbox fails: this VM's root may not lower oom_score_adj.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$NODE_DIR/cni"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$NODE_DIR/certs.d"
TOML
  write_registry_trust
}

# The local registry's CA, trusted by this node's containerd at both of its addresses
# (registry.sh), so images can come from it too.
write_registry_trust() {
  [ -f "$STATE_DIR/registry.env" ] || return 0
  local address
  for address in $(sed -n 's/^WCM_REGISTRY\(_FROM_PODS\)\{0,1\}=//p' "$STATE_DIR/registry.env"); do
    mkdir -p "$NODE_DIR/certs.d/$address"
    printf 'server = "https://%s"\n\n[host."https://%s"]\n  ca = "%s"\n' \
      "$address" "$address" "$STATE_DIR/pki/ca.crt" >"$NODE_DIR/certs.d/$address/hosts.toml"
  done
}

# A bridge of this node's own, no masquerade and no port maps: no iptables rules.
write_cni_config() {
  mkdir -p "$NODE_DIR/cni"
  cat >"$NODE_DIR/cni/10-wcm.conflist" <<JSON
{"cniVersion": "1.0.0", "name": "wcm", "plugins": [
  {"type": "bridge", "bridge": "$(node_bridge)", "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "dataDir": "$NODE_DIR/cni-ipam",
            "ranges": [[{"subnet": "$(node_subnet)"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "loopback"}
]}
JSON
}

write_kubelet_config() {
  local port="$1" healthz="$2"
  cat >"$NODE_DIR/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This VM has cgroup v1; kubelet 1.35 refuses it unless told (the last release that can).
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /wcm-$(node_id)
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
podLogsDir: $NODE_DIR/pod-logs
port: $port
healthzBindAddress: 127.0.0.1
healthzPort: $healthz
readOnlyPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $STATE_DIR/pki/ca.crt}
authorization: {mode: AlwaysAllow}
makeIPTablesUtilChains: false
failSwapOn: false
registerNode: true
resolvConf: ""
# Absolute floors, not the defaults' percentages: a test node shares a large, busy
# disk, and 1 % of 252 GB (2.5 GB) free was reached by CI's own build, which tainted the
# node disk-pressure and evicted or refused every Pod. Every signal is named: one left
# out would keep its default.
evictionHard:
  memory.available: 100Mi
  nodefs.available: 256Mi
  nodefs.inodesFree: "1000"
  imagefs.available: 256Mi
  imagefs.inodesFree: "1000"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# ConfigMap and Secret volume updates reach Pods within this (1 min by default).
syncFrequency: 10s
YAML
}

# The Node object, created before the kubelet registers: the control-plane role label
# (the kubelet may not set it itself) and the taint every control-plane node carries.
create_node_object() {
  local port="$1" d="$STATE_DIR/pki" code
  code="$(curl -s -o /dev/null -w '%{http_code}' --cacert "$d/ca.crt" --cert "$d/admin.crt" \
    --key "$d/admin.key" -H 'Content-Type: application/json' -X POST \
    "https://127.0.0.1:$port/api/v1/nodes" --data-binary @- <<JSON
{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "$NODE_NAME",
  "labels": {"node-role.kubernetes.io/control-plane": ""}},
 "spec": {"taints": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]}}
JSON
)"
  case "$code" in 201 | 409) ;; *) die "creating the Node object failed with HTTP $code" ;; esac
}

start_containerd() {
  mkdir -p "$NODE_DIR"
  write_containerd_config
  spawn containerd containerd --config "$NODE_DIR/containerd.toml"
  local deadline=$((SECONDS + 30))
  until ctr -a "$CONTAINERD_SOCK" version >/dev/null 2>&1; do
    pid_alive containerd || die "containerd exited during start-up: $(tail -n 5 "$STATE_DIR/logs/containerd.log")"
    [ $SECONDS -lt $deadline ] || die "containerd did not answer within 30 s"
    sleep 0.2
  done
  ctr_k8s images import "$("$CONTROL_PLANE_DIR/images.sh" path pause)" >/dev/null
  ctr_k8s images import "$("$CONTROL_PLANE_DIR/images.sh" path web)" >/dev/null
}

# The kubelet's cgroup root, in every v1 hierarchy (it refuses to start otherwise); a
# cpuset child gets its parent's CPUs and memory nodes, or nothing could run in it.
make_cgroup_root() {
  local hierarchy root
  for hierarchy in /sys/fs/cgroup/*/; do
    [ -f "$hierarchy/cgroup.procs" ] || continue
    root="$hierarchy/wcm-$(node_id)"
    mkdir -p "$root"
    if [ -f "$hierarchy/cpuset.cpus" ]; then
      cat "$hierarchy/cpuset.cpus" >"$root/cpuset.cpus"
      cat "$hierarchy/cpuset.mems" >"$root/cpuset.mems"
    fi
  done
}

start_kubelet() {
  local api_port="$1" port healthz
  read -r port healthz < <(free_ports 2)
  make_cgroup_root
  issue_cert "$STATE_DIR/pki" kubelet "/O=system:nodes/CN=system:node:$NODE_NAME" ""
  write_kubeconfig kubelet "$api_port"
  write_kubelet_config "$port" "$healthz"
  write_cni_config
  create_node_object "$api_port"
  spawn kubelet "$K8S_BIN_DIR/kubelet" --config="$NODE_DIR/kubelet.yaml" \
    --kubeconfig="$STATE_DIR/kubelet.kubeconfig" --root-dir="$NODE_DIR/kubelet" \
    --cert-dir="$NODE_DIR/kubelet/pki" --hostname-override="$NODE_NAME" \
    --v="${WCM_KUBELET_VERBOSITY:-1}"
  local deadline=$((SECONDS + 30))
  until curl -sf "http://127.0.0.1:$healthz/healthz" >/dev/null 2>&1; do
    pid_alive kubelet || { show_logs; stop_all; die "the kubelet exited during start-up (logs above)"; }
    [ $SECONDS -lt $deadline ] || { show_logs; stop_all; die "the kubelet was not healthy within 30 s"; }
    sleep 0.2
  done
}

start_scheduler() {
  spawn kube-scheduler "$K8S_BIN_DIR/kube-scheduler" --kubeconfig="$STATE_DIR/admin.kubeconfig" \
    --leader-elect=false --secure-port=0 --v="${WCM_SCHEDULER_VERBOSITY:-1}"
}

# Starts the node unless the machine cannot run it; does not wait for it to be Ready
# (tests that need it wait for it themselves).
start_node() {
  local api_port="$1" reason
  reason="$(node_unsupported)"
  if [ -n "$reason" ]; then
    log "no node: $reason; Pods will stay Pending"
    return
  fi
  touch "$STATE_DIR/node.enabled"
  "$CONTROL_PLANE_DIR/images.sh" build
  start_containerd
  start_kubelet "$api_port"
  start_scheduler
  sleep 0.5
  pid_alive kube-scheduler || { show_logs; stop_all; die "kube-scheduler exited during start-up (logs above)"; }
  log "node $NODE_NAME starting (containerd, kubelet, kube-scheduler; bridge $(node_bridge), Pods in $(node_subnet))"
}

node_enabled() { [ -f "$STATE_DIR/node.enabled" ]; }

# Deletes every Pod bound to the node and waits (up to 30 s) until no container of
# theirs runs, so the kubelet stops their sandboxes and tears their networks down
# itself (stopped sandboxes are removed with the rest of the state).
drain_node() {
  local port d="$STATE_DIR/pki" names name
  port="$(cat "$STATE_DIR/apiserver.port" 2>/dev/null)" || return 0
  pid_alive kube-apiserver && pid_alive kubelet || return 0
  local api=(curl -s --cacert "$d/ca.crt" --cert "$d/admin.crt" --key "$d/admin.key")
  names="$("${api[@]}" "https://127.0.0.1:$port/api/v1/pods?fieldSelector=spec.nodeName=$NODE_NAME" |
    jq -r '.items[]? | "\(.metadata.namespace)/\(.metadata.name)"')"
  for name in $names; do
    "${api[@]}" -o /dev/null -X DELETE \
      "https://127.0.0.1:$port/api/v1/namespaces/${name%%/*}/pods/${name#*/}?gracePeriodSeconds=0"
  done
  local deadline=$((SECONDS + 30))
  while [ -n "$(ctr_k8s tasks ls -q 2>/dev/null)" ] && [ $SECONDS -lt $deadline ]; do
    sleep 0.5
  done
}

# Whatever the kubelet left: tasks, containers, the bridge, mounts under the state
# directory, and shims of this node's containerd.
clean_node() {
  local id
  if pid_alive containerd; then
    for id in $(ctr_k8s tasks ls -q 2>/dev/null); do
      ctr_k8s tasks kill -s KILL "$id" >/dev/null 2>&1 || true
      ctr_k8s tasks delete -f "$id" >/dev/null 2>&1 || true
    done
    for id in $(ctr_k8s containers ls -q 2>/dev/null); do
      ctr_k8s containers delete "$id" >/dev/null 2>&1 || true
    done
  fi
  stop_component containerd
  pkill -KILL -f "containerd-shim-runc-v2 .*$CONTAINERD_SOCK" 2>/dev/null || true
  ip link del "$(node_bridge)" 2>/dev/null || true
  # Mounts under the state directory (container root filesystems, Pod volumes),
  # deepest first, so the directory can be removed.
  awk -v dir="$STATE_DIR/" 'index($2, dir) == 1 {print $2}' /proc/mounts | sort -r |
    while read -r mount; do umount -l "$mount" 2>/dev/null || true; done
  local cgroup
  for cgroup in /sys/fs/cgroup/*/wcm-"$(node_id)"; do
    [ -d "$cgroup" ] && find "$cgroup" -depth -type d -exec rmdir {} \; 2>/dev/null
  done
  return 0
}

stop_node() {
  node_enabled || return 0
  stop_component kube-scheduler
  drain_node
  stop_component kubelet
  clean_node
}
