#!/usr/bin/env bash
# Builds the local node's images without a container engine: the Go tools in
# control-plane/images (oci-image, which writes image archives; pause, the Pods'
# sandbox; web, the example web server WebApps run; install-plugins, the entrypoint of
# plugin images; check-metrics, the Prometheus parser the tests read /metrics with) and
# the pause and web image archives, into the cache. Prints nothing
# but logs; `images.sh path NAME` prints an archive's or a tool's path, and
# `images.sh import ARCHIVE` imports an image archive into the local node if it runs,
# printing each image's name pinned to its digest.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

IMAGES_SRC="$CONTROL_PLANE_DIR/../images"
# Keyed by the sources' hash: a change of the tools or of go.sum builds them again.
images_key() {
  (cd "$IMAGES_SRC" && find . -type f \( -name '*.go' -o -name 'go.mod' -o -name 'go.sum' \) -print0 |
    sort -z | xargs -0 sha256sum | sha256sum | cut -c1-12)
}
IMAGES_DIR="$CACHE_ROOT/images-$(images_key)"

TOOLS=(oci-image pause web install-plugins check-metrics)

build_tools() {
  local tool missing=false
  for tool in "${TOOLS[@]}"; do [ -x "$IMAGES_DIR/$tool" ] || missing=true; done
  $missing || return 0
  command -v go >/dev/null || die "Go is required to build the node's images"
  log "building ${TOOLS[*]} (control-plane/images)"
  mkdir -p "$IMAGES_DIR"
  (
    cd "$IMAGES_SRC"
    export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -mod=mod"
    for tool in "${TOOLS[@]}"; do
      go build -trimpath -ldflags "-s -w" -o "$IMAGES_DIR/$tool.new" "./cmd/$tool"
    done
  )
  for tool in "${TOOLS[@]}"; do mv "$IMAGES_DIR/$tool.new" "$IMAGES_DIR/$tool"; done
}

# build_image NAME TAG USER: the image TAG whose entrypoint is the tool NAME, once.
build_image() {
  local name="$1" tag="$2" user="$3"
  [ -f "$IMAGES_DIR/$name.tar" ] && return
  build_tools
  "$IMAGES_DIR/oci-image" -out "$IMAGES_DIR/$name.tar.new" -tag "$tag" \
    -entrypoint "/$name" -user "$user" -add "$IMAGES_DIR/$name=/$name:0755"
  mv "$IMAGES_DIR/$name.tar.new" "$IMAGES_DIR/$name.tar"
  log "built $tag at $IMAGES_DIR/$name.tar"
}

build_images() {
  build_image pause "$PAUSE_IMAGE" 65535:65535
  build_image web "$WEB_IMAGE" 65532:65532
}

# import_archive FILE: into the local node of $STATE_DIR, if it runs. Each image is
# also named by its digest (REPOSITORY@sha256:...), so a Pod can pin it as on a
# registry: the node's CRI finds a local image by that name only. Prints those names.
import_archive() {
  local sock="$STATE_DIR/node/containerd.sock" name digest
  [ -S "$sock" ] || return 0
  while read -r name digest; do
    ctr -a "$sock" -n k8s.io images tag --force "$name" "${name%:*}@$digest" >/dev/null
    echo "${name%:*}@$digest"
  done < <(ctr -a "$sock" -n k8s.io images import "$1" |
    sed -n 's/^unpacking \([^ ]*\) (\(sha256:[0-9a-f]*\)).*/\1 \2/p')
  log "imported $1 into the node of $STATE_DIR"
}

case "${1:-build}" in
  build) build_images ;;
  import) import_archive "${2:?images.sh import ARCHIVE}" ;;
  path)
    build_images
    case "${2:-}" in
      pause | web) echo "$IMAGES_DIR/$2.tar" ;;
      oci-image | install-plugins | check-metrics) echo "$IMAGES_DIR/$2" ;;
      *) die "images.sh path pause|web|oci-image|install-plugins|check-metrics" ;;
    esac
    ;;
  *) die "usage: images.sh [build | import ARCHIVE | path pause|web|oci-image|install-plugins|check-metrics]" ;;
esac
