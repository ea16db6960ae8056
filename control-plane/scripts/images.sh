#!/usr/bin/env bash
# Builds the local node's images without a container engine: the Go tools in
# control-plane/images (oci-image, which writes image archives, and pause, the Pods'
# sandbox) and the pause image archive, into the cache. Prints nothing but logs;
# `images.sh path pause` prints the archive's path.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

IMAGES_SRC="$CONTROL_PLANE_DIR/../images"
# Keyed by the sources' hash: a change of the tools or of go.sum builds them again.
images_key() {
  (cd "$IMAGES_SRC" && find . -type f \( -name '*.go' -o -name 'go.mod' -o -name 'go.sum' \) -print0 |
    sort -z | xargs -0 sha256sum | sha256sum | cut -c1-12)
}
IMAGES_DIR="$CACHE_ROOT/images-$(images_key)"

build_tools() {
  [ -x "$IMAGES_DIR/oci-image" ] && [ -x "$IMAGES_DIR/pause" ] && return
  command -v go >/dev/null || die "Go is required to build the node's images"
  log "building oci-image and pause (control-plane/images)"
  mkdir -p "$IMAGES_DIR"
  (
    cd "$IMAGES_SRC"
    export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -mod=mod"
    go build -trimpath -ldflags "-s -w" -o "$IMAGES_DIR/oci-image.new" ./cmd/oci-image
    go build -trimpath -ldflags "-s -w" -o "$IMAGES_DIR/pause.new" ./cmd/pause
  )
  mv "$IMAGES_DIR/oci-image.new" "$IMAGES_DIR/oci-image"
  mv "$IMAGES_DIR/pause.new" "$IMAGES_DIR/pause"
}

build_pause_image() {
  [ -f "$IMAGES_DIR/pause.tar" ] && return
  build_tools
  "$IMAGES_DIR/oci-image" -out "$IMAGES_DIR/pause.tar.new" -tag "$PAUSE_IMAGE" \
    -entrypoint /pause -user 65535:65535 -add "$IMAGES_DIR/pause=/pause:0755"
  mv "$IMAGES_DIR/pause.tar.new" "$IMAGES_DIR/pause.tar"
  log "built $PAUSE_IMAGE at $IMAGES_DIR/pause.tar"
}

case "${1:-build}" in
  build) build_pause_image ;;
  path)
    build_pause_image
    case "${2:-}" in
      pause) echo "$IMAGES_DIR/pause.tar" ;;
      oci-image) echo "$IMAGES_DIR/oci-image" ;;
      *) die "images.sh path pause|oci-image" ;;
    esac
    ;;
  *) die "usage: images.sh [build | path pause|oci-image]" ;;
esac
