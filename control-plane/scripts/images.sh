#!/usr/bin/env bash
# Builds the local node's images without a container engine: the Go tools in
# control-plane/images (oci-image, which writes image archives; pause, the Pods'
# sandbox; web, the example web server WebApps run; install-plugins, the entrypoint of
# plugin images) and the pause and web image archives, into the cache. Prints nothing
# but logs; `images.sh path NAME` prints an archive's or a tool's path.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

IMAGES_SRC="$CONTROL_PLANE_DIR/../images"
# Keyed by the sources' hash: a change of the tools or of go.sum builds them again.
images_key() {
  (cd "$IMAGES_SRC" && find . -type f \( -name '*.go' -o -name 'go.mod' -o -name 'go.sum' \) -print0 |
    sort -z | xargs -0 sha256sum | sha256sum | cut -c1-12)
}
IMAGES_DIR="$CACHE_ROOT/images-$(images_key)"

TOOLS=(oci-image pause web install-plugins)

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

build_pause_image() {
  [ -f "$IMAGES_DIR/pause.tar" ] && return
  build_tools
  "$IMAGES_DIR/oci-image" -out "$IMAGES_DIR/pause.tar.new" -tag "$PAUSE_IMAGE" \
    -entrypoint /pause -user 65535:65535 -add "$IMAGES_DIR/pause=/pause:0755"
  mv "$IMAGES_DIR/pause.tar.new" "$IMAGES_DIR/pause.tar"
  log "built $PAUSE_IMAGE at $IMAGES_DIR/pause.tar"
}

build_web_image() {
  [ -f "$IMAGES_DIR/web.tar" ] && return
  build_tools
  "$IMAGES_DIR/oci-image" -out "$IMAGES_DIR/web.tar.new" -tag "$WEB_IMAGE" \
    -entrypoint /web -user 65532:65532 -add "$IMAGES_DIR/web=/web:0755"
  mv "$IMAGES_DIR/web.tar.new" "$IMAGES_DIR/web.tar"
  log "built $WEB_IMAGE at $IMAGES_DIR/web.tar"
}

case "${1:-build}" in
  build) build_pause_image; build_web_image ;;
  path)
    build_pause_image
    build_web_image
    case "${2:-}" in
      pause | web) echo "$IMAGES_DIR/$2.tar" ;;
      oci-image | install-plugins) echo "$IMAGES_DIR/$2" ;;
      *) die "images.sh path pause|web|oci-image|install-plugins" ;;
    esac
    ;;
  *) die "usage: images.sh [build | path pause|web|oci-image|install-plugins]" ;;
esac
