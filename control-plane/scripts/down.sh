#!/usr/bin/env bash
# Stops the local control plane started by up.sh and removes its state. Safe to repeat.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$CONTROL_PLANE_DIR/process.sh"
source "$CONTROL_PLANE_DIR/node.sh"

if [ -d "$STATE_DIR" ]; then
  mkdir -p "$(dirname "$STATE_DIR")"
  exec 9>"$STATE_DIR.lock"
  flock 9
  stop_all
  rm -rf "$STATE_DIR"
  log "stopped; removed $STATE_DIR"
else
  log "no control plane running (nothing at $STATE_DIR)"
fi
