#!/usr/bin/env bash
# Starting and probing the control-plane components, shared by up.sh and
# restart-apiserver.sh. Expects common.sh and process.sh to be sourced.

READY_TIMEOUT_SECS="${WCM_CLUSTER_READY_TIMEOUT:-120}"

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

# It listens on every interface (Pods on the node reach it through the bridge; every
# request must carry a client certificate or token: anonymous access is off). RBAC is
# on, and the Node authorizer for the local node's kubelet. The ServiceAccount
# admission plugin is off because no controller creates the per-namespace "default"
# ServiceAccount that Pods would otherwise need (a Pod that wants a token names its
# ServiceAccount and mounts a projected token itself). PodTolerationRestriction is on,
# so a namespace annotated `scheduler.alpha.kubernetes.io/defaultTolerations` lets its
# Pods (a WebApp's, say) run on the local node despite its control-plane taint, which
# keeps the tests' thousands of Pods off it. Every write is audited (user agent, verb, object, timestamps) to $STATE_DIR/audit/audit.log.
start_apiserver() {
  local port="$1" etcd_port="$2" d="$STATE_DIR/pki"
  mkdir -p "$STATE_DIR/audit"
  spawn kube-apiserver "$K8S_BIN_DIR/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:$etcd_port" \
    --bind-address=0.0.0.0 --advertise-address=127.0.0.1 --secure-port="$port" \
    --anonymous-auth=false \
    --cert-dir="$STATE_DIR/apiserver-certs" \
    --tls-cert-file="$d/apiserver.crt" --tls-private-key-file="$d/apiserver.key" \
    --client-ca-file="$d/ca.crt" --authorization-mode=Node,RBAC \
    --kubelet-client-certificate="$d/admin.crt" --kubelet-client-key="$d/admin.key" \
    --kubelet-preferred-address-types=InternalIP \
    --service-account-key-file="$d/sa.pub" --service-account-signing-key-file="$d/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-cluster-ip-range=10.0.0.0/24 --allow-privileged=true \
    --disable-admission-plugins=ServiceAccount --enable-admission-plugins=PodTolerationRestriction \
    --endpoint-reconciler-type=none \
    --audit-policy-file="$CONTROL_PLANE_DIR/audit-policy.yaml" \
    --audit-log-path="$STATE_DIR/audit/audit.log" --audit-log-maxsize=200 --audit-log-maxbackup=1 \
    --v="${WCM_APISERVER_VERBOSITY:-1}"
}

# The garbage collector (owner references cascade), the Deployment and ReplicaSet
# controllers (Deployments get ReplicaSets, Pods and a real status), the namespace
# controller (deleted namespaces are emptied and go away), the node lifecycle
# controller (a Ready node loses its not-ready taint; a silent one gets it back) and
# the root CA publisher (the kube-root-ca.crt ConfigMap in-cluster clients trust). Pods run on the local node
# when it is there (node.sh). It talks to the apiserver as the admin identity and
# serves nothing itself.
start_controller_manager() {
  spawn kube-controller-manager "$K8S_BIN_DIR/kube-controller-manager" \
    --kubeconfig="$STATE_DIR/admin.kubeconfig" \
    --controllers=garbagecollector,deployment,replicaset,namespace,nodelifecycle,root-ca-cert-publisher \
    --root-ca-file="$STATE_DIR/pki/ca.crt" \
    --leader-elect=false --use-service-account-credentials=false --secure-port=0 \
    --concurrent-gc-syncs=5 --v="${WCM_CONTROLLER_MANAGER_VERBOSITY:-1}"
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
