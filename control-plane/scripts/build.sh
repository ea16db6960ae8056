#!/usr/bin/env bash
# Builds the pinned etcd and Kubernetes binaries (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubelet, kubectl) and the registry from the Go module proxy into the
# cache.
#
# Usage: control-plane/build.sh [etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|kubectl|registry|cosign ...]
# (default: all)
# A binary already in the cache is not rebuilt; delete its directory to force it.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

command -v go >/dev/null || die "Go is required to build the control plane (go.dev/doc/install)"

# go.sum lines for modules fetched here are verified against the proxy's own records.
export GOFLAGS="${GOFLAGS:-} -mod=mod"
export CGO_ENABLED=0

# k8s.io/kubernetes maps its staging modules to ./staging/src/... with replace
# directives; those do not apply to a module that depends on it. Map each one to the
# published v0.X.Y tag of the same release instead, generated from its own go.mod.
generate_staging_replaces() {
  local kube_mod="$1" staging_version="v0${KUBERNETES_VERSION#v1}"
  grep -E '^\s*k8s\.io/[a-z0-9-]+ => \./staging/src/' "$kube_mod" |
    awk -v v="$staging_version" '{print "-replace=" $1 "=" $1 "@" v}'
}

build_kubernetes_binary() {
  local name="$1" out="$K8S_BIN_DIR/$1"
  [ -x "$out" ] && { log "$name $KUBERNETES_VERSION cached at $out"; return; }
  log "building $name $KUBERNETES_VERSION (first time only; takes several minutes)"
  local work; work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  (
    cd "$work"
    go mod init wcm.local/control-plane >/dev/null 2>&1
    local kube_mod
    kube_mod="$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | jq -r .GoMod)"
    # shellcheck disable=SC2046
    go mod edit $(generate_staging_replaces "$kube_mod")
    go get "k8s.io/kubernetes/cmd/$name@$KUBERNETES_VERSION"
    local minor="${KUBERNETES_VERSION#v1.}"; minor="${minor%%.*}"
    local pkg=k8s.io/component-base/version
    go build -trimpath -o "$work/$name" -ldflags "-s -w \
      -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor \
      -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z" \
      "k8s.io/kubernetes/cmd/$name"
  )
  mkdir -p "$K8S_BIN_DIR" && mv "$work/$name" "$out"
  log "built $out"
}

build_etcd() {
  local out="$ETCD_BIN_DIR/etcd"
  [ -x "$out" ] && { log "etcd $ETCD_VERSION cached at $out"; return; }
  log "building etcd $ETCD_VERSION (first time only)"
  local work; work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  (
    cd "$work"
    go mod init wcm.local/etcd >/dev/null 2>&1
    # The etcd binary's main is a one-line call into the server module.
    printf 'package main\n\nimport (\n\t"os"\n\n\t"go.etcd.io/etcd/server/v3/etcdmain"\n)\n\nfunc main() { etcdmain.Main(os.Args) }\n' >main.go
    go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
    go build -trimpath -o "$work/etcd" -ldflags "-s -w" .
  )
  mkdir -p "$ETCD_BIN_DIR" && mv "$work/etcd" "$out"
  log "built $out"
}

# The registry, and a bcrypt hasher for its htpasswd file (the registry takes bcrypt
# only; a Go one from the same module graph rather than another system package).
build_registry() {
  local out="$REGISTRY_BIN_DIR/registry"
  [ -x "$out" ] && [ -x "$REGISTRY_BIN_DIR/wcm-htpasswd" ] &&
    { log "registry $REGISTRY_VERSION cached at $out"; return; }
  log "building the registry $REGISTRY_VERSION (first time only)"
  local work; work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  (
    cd "$work"
    go mod init wcm.local/registry >/dev/null 2>&1
    mkdir htpasswd
    cat >htpasswd/main.go <<'GO'
// Prints USER:bcrypt(the password read from stdin), one htpasswd line.
package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

func main() {
	password, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	hash, err := bcrypt.GenerateFromPassword([]byte(strings.TrimSuffix(password, "\n")), bcrypt.DefaultCost)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s:%s\n", os.Args[1], hash)
}
GO
    go get "github.com/distribution/distribution/v3/cmd/registry@$REGISTRY_VERSION"
    go get golang.org/x/crypto/bcrypt
    go build -trimpath -o "$work/registry" -ldflags "-s -w \
      -X github.com/distribution/distribution/v3/version.version=$REGISTRY_VERSION" \
      github.com/distribution/distribution/v3/cmd/registry
    go build -trimpath -o "$work/wcm-htpasswd" -ldflags "-s -w" ./htpasswd
  )
  mkdir -p "$REGISTRY_BIN_DIR" && mv "$work/registry" "$work/wcm-htpasswd" "$REGISTRY_BIN_DIR/"
  log "built $out"
}

build_cosign() {
  local out="$COSIGN_BIN_DIR/cosign"
  [ -x "$out" ] && { log "cosign $COSIGN_VERSION cached at $out"; return; }
  log "building cosign $COSIGN_VERSION (first time only)"
  local work; work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  (
    cd "$work"
    go mod init wcm.local/cosign >/dev/null 2>&1
    go get "github.com/sigstore/cosign/v2/cmd/cosign@$COSIGN_VERSION"
    go build -trimpath -o "$work/cosign" -ldflags "-s -w" github.com/sigstore/cosign/v2/cmd/cosign
  )
  mkdir -p "$COSIGN_BIN_DIR" && mv "$work/cosign" "$out"
  log "built $out"
}

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl registry cosign)
for t in "${targets[@]}"; do
  case "$t" in
    etcd) build_etcd ;;
    registry) build_registry ;;
    cosign) build_cosign ;;
    kube-apiserver | kube-controller-manager | kube-scheduler | kubelet | kubectl)
      build_kubernetes_binary "$t" ;;
    *) die "unknown component '$t' (expected etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kubectl, registry, cosign)" ;;
  esac
done
