# wasm-controller-manager: the two commands a new user runs are `make run` and `make test`.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
CARGO ?= cargo
# The control plane `make test` starts for itself, apart from the one `make cluster-up` runs.
TEST_CLUSTER_DIR ?= $(or $(XDG_STATE_HOME),$(HOME)/.local/state)/wasm-controller-manager/test-cluster

.PHONY: setup build plugins run test lint unit-and-integration cluster-up cluster-down

## setup: install the Rust target and Debian tools, build the pinned control plane (cached)
setup:
	scripts/setup.sh

## build: the host binary and every plugin component (target/plugins/<name>.wasm)
build: setup
	$(CARGO) build -p wasm-controller-manager

## run: build, start a local control plane unless a cluster is configured, run the host
run: build
	scripts/run.sh

## test: formatting, clippy, unit and integration tests against a real control plane
test: setup lint
	export WCM_CLUSTER_DIR="$(TEST_CLUSTER_DIR)"; \
	trap 'control-plane/scripts/down.sh' EXIT; \
	control-plane/scripts/up.sh; \
	$(CARGO) test --workspace

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

## cluster-up: start etcd + kube-apiserver on loopback; prints `export KUBECONFIG=...`
cluster-up:
	control-plane/scripts/up.sh

## cluster-down: stop the local control plane and remove its state (safe to repeat)
cluster-down:
	control-plane/scripts/down.sh
