#!/usr/bin/env bash
# Builds the native peers `make bench` measures the host against (peers/): the
# kube-rs pod-counter (a workspace member, release) into target/release/, and the
# controller-runtime pod-counter (its own Go module, pinned in its go.mod) into
# target/peers/. Not part of `make test`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo build --release -p kube-rs-pod-counter
mkdir -p target/peers
(cd peers/controller-runtime-pod-counter && go build -trimpath -o ../../target/peers/controller-runtime-pod-counter .)
echo "peers: target/release/kube-rs-pod-counter target/peers/controller-runtime-pod-counter" >&2
