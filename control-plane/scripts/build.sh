#!/usr/bin/env bash
# Builds the pinned etcd and Kubernetes binaries (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubelet, kubectl), the registry, cosign, promtool, helm and an
# OpenTelemetry Collector from the Go module proxy into the cache.
#
# Usage: control-plane/build.sh [etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|kubectl|registry|cosign|promtool|helm|helm3|otelcol ...]
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

# go_build DIR WHAT STEPS BINARY...: the BINARYs in DIR, built once. Unless all are
# there, STEPS (a function) runs in a fresh Go module in a temporary directory, given
# that directory, and must leave the BINARYs there; they are then moved into DIR.
go_build() {
  local dir="$1" what="$2" steps="$3"; shift 3
  local binary missing=false
  for binary in "$@"; do [ -x "$dir/$binary" ] || missing=true; done
  $missing || { log "$what cached at $dir/$1"; return; }
  log "building $what (first time only; a large one takes minutes)"
  local work; work="$(mktemp -d)"
  trap 'rm -rf "$work"; trap - RETURN' RETURN
  (
    cd "$work"
    go mod init wcm.local/build >/dev/null 2>&1
    "$steps" "$work"
  )
  mkdir -p "$dir"
  for binary in "$@"; do mv "$work/$binary" "$dir/"; done
  log "built $dir/$1"
}

# kubernetes_steps WORK: the binary $name of k8s.io/kubernetes, with its version stamped.
kubernetes_steps() {
  local kube_mod
  kube_mod="$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | jq -r .GoMod)"
  # shellcheck disable=SC2046
  go mod edit $(generate_staging_replaces "$kube_mod")
  go get "k8s.io/kubernetes/cmd/$name@$KUBERNETES_VERSION"
  local minor="${KUBERNETES_VERSION#v1.}"; minor="${minor%%.*}"
  local pkg=k8s.io/component-base/version
  go build -trimpath -o "$1/$name" -ldflags "-s -w \
    -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor \
    -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z" \
    "k8s.io/kubernetes/cmd/$name"
}

build_kubernetes_binary() {
  local name="$1"
  go_build "$K8S_BIN_DIR" "$name $KUBERNETES_VERSION" kubernetes_steps "$name"
}

# etcd_steps WORK: the etcd binary, whose main is a one-line call into the server module.
etcd_steps() {
  printf 'package main\n\nimport (\n\t"os"\n\n\t"go.etcd.io/etcd/server/v3/etcdmain"\n)\n\nfunc main() { etcdmain.Main(os.Args) }\n' >main.go
  go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
  go build -trimpath -o "$1/etcd" -ldflags "-s -w" .
}

# registry_steps WORK: the registry, and a bcrypt hasher for its htpasswd file (the
# registry takes bcrypt only; a Go one from the same module graph rather than another
# system package).
registry_steps() {
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
  go build -trimpath -o "$1/registry" -ldflags "-s -w \
    -X github.com/distribution/distribution/v3/version.version=$REGISTRY_VERSION" \
    github.com/distribution/distribution/v3/cmd/registry
  go build -trimpath -o "$1/wcm-htpasswd" -ldflags "-s -w" ./htpasswd
}

# cosign_steps WORK: cosign, which signs plugins in the tests of signature policies.
cosign_steps() {
  go get "github.com/sigstore/cosign/v2/cmd/cosign@$COSIGN_VERSION"
  go build -trimpath -o "$1/cosign" -ldflags "-s -w" github.com/sigstore/cosign/v2/cmd/cosign
}

# promtool_steps WORK: promtool, which checks and unit-tests the alerting rules.
promtool_steps() {
  go get "github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_VERSION"
  go build -trimpath -o "$1/promtool" -ldflags "-s -w" github.com/prometheus/prometheus/cmd/promtool
}

# helm_steps WORK: helm, which lints, renders and installs the chart in the tests.
helm_steps() {
  go get "helm.sh/helm/v4/cmd/helm@$HELM_VERSION"
  go build -trimpath -o "$1/helm" -ldflags "-s -w \
    -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" helm.sh/helm/v4/cmd/helm
}

# helm3_steps WORK: Helm 3, which most installs run: the chart is installed with it too.
helm3_steps() {
  go get "helm.sh/helm/v3/cmd/helm@$HELM3_VERSION"
  go build -trimpath -o "$1/helm" -ldflags "-s -w \
    -X helm.sh/helm/v3/internal/version.version=$HELM3_VERSION" helm.sh/helm/v3/cmd/helm
}

# otelcol_steps WORK: an OpenTelemetry Collector with only the OTLP receiver and the
# file exporter (what the tests of the host's traces need), as the Collector's builder
# would assemble it: a main that lists its factories.
otelcol_steps() {
  cat >main.go <<'GO'
// An OpenTelemetry Collector with the OTLP receiver and the file exporter only.
package main

import (
	"log"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

func factories() (otelcol.Factories, error) {
	receivers, err := otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory())
	if err != nil {
		return otelcol.Factories{}, err
	}
	exporters, err := otelcol.MakeFactoryMap[exporter.Factory](fileexporter.NewFactory())
	if err != nil {
		return otelcol.Factories{}, err
	}
	telemetry := otelconftelemetry.NewFactory()
	return otelcol.Factories{Receivers: receivers, Exporters: exporters, Telemetry: telemetry}, nil
}

func main() {
	info := component.BuildInfo{Command: "otelcol", Description: "OTLP in, JSON files out", Version: "VERSION"}
	settings := otelcol.CollectorSettings{
		BuildInfo: info,
		Factories: factories,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				// env: the default scheme of `${VAR}` in a configuration.
				ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory(), envprovider.NewFactory()},
			},
		},
	}
	if err := otelcol.NewCommand(settings).Execute(); err != nil {
		log.Fatal(err)
	}
}
GO
  sed -i "s/\"VERSION\"/\"$OTELCOL_VERSION\"/" main.go
  go get "go.opentelemetry.io/collector/otelcol@$OTELCOL_VERSION" \
    "go.opentelemetry.io/collector/service@$OTELCOL_VERSION" \
    "go.opentelemetry.io/collector/receiver/otlpreceiver@$OTELCOL_VERSION" \
    "github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter@$OTELCOL_VERSION"
  # The confmap providers at the release's confmap version (tidy would take the newest).
  local confmap
  confmap="$(go list -m -f '{{.Version}}' go.opentelemetry.io/collector/confmap)"
  go get "go.opentelemetry.io/collector/confmap/provider/envprovider@$confmap" \
    "go.opentelemetry.io/collector/confmap/provider/fileprovider@$confmap"
  go mod tidy
  go build -trimpath -o "$1/otelcol" -ldflags "-s -w" .
}

# The Go caches of these builds (some 9 GB of modules and build results for Kubernetes)
# serve nothing once the binaries are cached, and CI machines are short of disk: they
# live in a temporary directory, removed when this script ends. Nothing is built when
# every binary is cached, so nothing is downloaded either.
go_caches="$(mktemp -d)"
trap 'chmod -R u+w "$go_caches" 2>/dev/null; rm -rf "$go_caches"' EXIT
export GOCACHE="$go_caches/build" GOMODCACHE="$go_caches/mod"

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl registry cosign promtool helm helm3 otelcol)
for t in "${targets[@]}"; do
  case "$t" in
    etcd) go_build "$ETCD_BIN_DIR" "etcd $ETCD_VERSION" etcd_steps etcd ;;
    registry) go_build "$REGISTRY_BIN_DIR" "the registry $REGISTRY_VERSION" registry_steps registry wcm-htpasswd ;;
    cosign) go_build "$COSIGN_BIN_DIR" "cosign $COSIGN_VERSION" cosign_steps cosign ;;
    promtool) go_build "$PROMTOOL_BIN_DIR" "promtool $PROMETHEUS_VERSION" promtool_steps promtool ;;
    helm) go_build "$HELM_BIN_DIR" "helm $HELM_VERSION" helm_steps helm ;;
    helm3) go_build "$HELM3_BIN_DIR" "helm $HELM3_VERSION" helm3_steps helm ;;
    otelcol) go_build "$OTELCOL_BIN_DIR" "the OpenTelemetry Collector $OTELCOL_VERSION" otelcol_steps otelcol ;;
    kube-apiserver | kube-controller-manager | kube-scheduler | kubelet | kubectl)
      build_kubernetes_binary "$t" ;;
    *) die "unknown component '$t' (expected etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kubectl, registry, cosign, promtool, helm, helm3, otelcol)" ;;
  esac
done
