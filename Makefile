# wasm-controller-manager: the two commands a new user runs are `make run` and `make test`.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
CARGO ?= cargo
# The control plane `make test` starts for itself, apart from the one `make cluster-up` runs.
PLUGIN_PACKAGES = $(foreach d,$(wildcard plugins/*/Cargo.toml host/tests/plugins/*/Cargo.toml),-p $(shell sed -n 's/^name = "\(.*\)"/\1/p' $(d) | head -n1))
TEST_CLUSTER_DIR ?= $(or $(XDG_STATE_HOME),$(HOME)/.local/state)/wasm-controller-manager/test-cluster

.PHONY: setup setup-run build examples plugins run test lint cluster-up cluster-down bench fuzz measure-failover image deploy

## setup: install the Rust target and Debian tools (containerd, runc, CNI), build the pinned control plane and the tests' tools (cached)
setup:
	scripts/setup.sh

## setup-run: what `make run` needs of setup (the control plane and node, the plugin tools), not the tests' tools
setup-run:
	scripts/setup.sh --run

## build: the host binary and the example plugins (target/plugins/<name>.wasm)
build: setup-run examples
	$(CARGO) build -p wasm-controller-manager

## examples: the example plugins to target/plugins/
examples:
	scripts/build-plugins.sh --examples

## plugins: example plugins to target/plugins/, test plugins to target/test-plugins/
plugins:
	scripts/build-plugins.sh

## run: build, start a local control plane unless a cluster is configured, run the host
run: build
	scripts/run.sh

## test: formatting, clippy, unit and integration tests against a real control plane
test: setup lint plugins
	export WCM_CLUSTER_DIR="$(TEST_CLUSTER_DIR)"; \
	trap 'control-plane/scripts/down.sh' EXIT; \
	control-plane/scripts/up.sh; \
	$(CARGO) test; \
	$(CARGO) test $(PLUGIN_PACKAGES); \
	(cd guest-sdk-go && go test ./...)

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) clippy --target wasm32-wasip2 -p wasm-controller-sdk $(PLUGIN_PACKAGES) -- -D warnings
	test -z "$$(gofmt -l guest-sdk-go plugins/go host/tests/go-plugins peers)" || { gofmt -l guest-sdk-go plugins/go host/tests/go-plugins peers; exit 1; }
	cd guest-sdk-go && go vet ./... && GOOS=wasip1 GOARCH=wasm go vet ./...
	for d in plugins/go/*/ host/tests/go-plugins/*/; do (cd "$$d" && GOOS=wasip1 GOARCH=wasm go vet ./...); done

## bench: reconcile cost (Wasm vs native), queue throughput, cache memory, the host against native peers, plugins over 1-3 replicas, restarts cold and warm (release build)
bench: setup plugins
	scripts/build-peers.sh
	control-plane/scripts/up.sh >/dev/null
	$(CARGO) bench -p wasm-controller-manager

## fuzz: the host's boundary under long runs of hostile call sequences (WCM_FUZZ_CASES, default 5000)
fuzz: setup plugins
	control-plane/scripts/up.sh >/dev/null
	WCM_FUZZ_CASES=$${WCM_FUZZ_CASES:-5000} $(CARGO) test -p wasm-controller-manager --test boundary_fuzz -- --nocapture

## measure-failover: leader failover times (kill, SIGTERM), short and default timings, medians of 5
measure-failover: setup plugins
	control-plane/scripts/up.sh >/dev/null
	$(CARGO) test -p wasm-controller-manager --test integration -- --ignored --nocapture leader_failover::measure_failover_times

## image: the host's image (release build), without a container engine; imported into the local node if it runs
image: setup-run
	scripts/image.sh --profile release

## deploy: the host with the example plugins in the current cluster (the local one if none is configured;
## another cluster needs IMAGE=REGISTRY/wasm-controller-manager:TAG, pushed there)
deploy: setup-run examples
	scripts/deploy.sh $(if $(IMAGE),--image $(IMAGE))

## cluster-up: start etcd, kube-apiserver, kube-controller-manager and the node; prints `export KUBECONFIG=...`
cluster-up:
	control-plane/scripts/up.sh

## cluster-down: stop the local control plane and remove its state (safe to repeat)
cluster-down:
	control-plane/scripts/down.sh
