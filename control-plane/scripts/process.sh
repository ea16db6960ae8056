#!/usr/bin/env bash
# Process bookkeeping for the control-plane scripts: spawn, check and stop by pid file.
# A pid is only trusted while its command line still names our state directory, so a
# recycled pid never leads to killing an unrelated process.

pid_file() { echo "$STATE_DIR/$1.pid"; }

# spawn NAME BINARY ARGS...: start in its own session, detached from this shell.
# Returns once the child runs BINARY: until its exec, the child's command line is this
# script's, which does not name the state directory, so a check right after the spawn
# took a daemon that was still starting for one that had died (a kubelet "exited
# during start-up" with an empty log, on a machine busy tearing down another node).
spawn() {
  local name="$1"; shift
  # fd 9 is the state lock: the daemon must not keep holding it.
  setsid "$@" </dev/null >>"$STATE_DIR/logs/$name.log" 2>&1 9>&- &
  local pid=$!
  echo "$pid" >"$(pid_file "$name")"
  for _ in $(seq 1 250); do
    [ -r "/proc/$pid/cmdline" ] || return 0 # exited: the caller's check says so
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF "$STATE_DIR" && return 0
    sleep 0.02
  done
}

# Prints the pid of component NAME if it is alive and ours.
owned_pid() {
  local f; f="$(pid_file "$1")"
  [ -f "$f" ] || return 1
  local pid; pid="$(cat "$f")"
  [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF "$STATE_DIR" || return 1
  echo "$pid"
}

pid_alive() { owned_pid "$1" >/dev/null; }

cluster_running() {
  pid_alive etcd && pid_alive kube-apiserver && pid_alive kube-controller-manager &&
    pid_alive registry || return 1
  # A node that was started must still be there (node.sh).
  [ -f "$STATE_DIR/node.enabled" ] || return 0
  pid_alive containerd && pid_alive kubelet && pid_alive kube-scheduler
}

# stop_component NAME: TERM, then KILL after 10 s; a no-op if it is not running.
stop_component() {
  local pid
  pid="$(owned_pid "$1")" || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$(pid_file "$1")"
}

# Stops dependants first: the controller manager, the node (its Pods drained through
# the apiserver while it still runs; node.sh), the apiserver, then etcd.
stop_all() {
  local name
  stop_component kube-controller-manager
  if declare -F stop_node >/dev/null; then stop_node; fi
  for name in kube-scheduler kubelet containerd registry kube-apiserver etcd; do
    stop_component "$name"
  done
}
