#!/usr/bin/env bash
# Builds a plugin image without a container engine: an image whose only job is to
# deliver plugins into the host's plugins folder, for plugins too large for a ConfigMap
# (a Python or JavaScript component is 12-18 MB; a ConfigMap holds at most 1 MiB). It
# holds the given *.wasm files in /wcm-plugins and a small static program,
# install-plugins (control-plane/images/cmd/install-plugins), as its entrypoint. Run as
# an init container that shares an emptyDir with the host (`scripts/deploy.sh
# --plugin-image REF` writes that), it copies each plugin into the folder whole
# (temporary name, then rename). The image is imported into the local node when one
# runs; push it to your registry for other clusters.
#
# Usage: scripts/plugin-image.sh [--tag REF] [--out FILE] PLUGIN.wasm...
# The default tag is wcm.local/plugins:<first 12 hex digits of the plugins' SHA-256>,
# so a new plugin version is a new reference (and a rollout). Prints it on its last line.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

tag="" out="" plugins=()
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) tag="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -*) echo "plugin-image: unknown option $1" >&2; exit 2 ;;
    *) plugins+=("$1"); shift ;;
  esac
done
[ ${#plugins[@]} -gt 0 ] || { echo "usage: scripts/plugin-image.sh [--tag REF] [--out FILE] PLUGIN.wasm..." >&2; exit 2; }
declare -A seen=()
for f in "${plugins[@]}"; do
  case "$f" in *.wasm) ;; *) echo "plugin-image: $f is not a *.wasm file" >&2; exit 2 ;; esac
  [ -f "$f" ] || { echo "plugin-image: $f does not exist" >&2; exit 2; }
  name="$(basename "$f")"
  [ -z "${seen[$name]:-}" ] || { echo "plugin-image: two plugins named $name" >&2; exit 2; }
  seen[$name]=1
done
digest="$(for f in "${plugins[@]}"; do printf '%s %s\n' "$(basename "$f")" "$(sha256sum <"$f" | cut -c1-64)"; done |
  sort | sha256sum | cut -c1-12)"
tag="${tag:-wcm.local/plugins:$digest}"
out="${out:-target/plugin-image-$digest.tar}"
mkdir -p "$(dirname "$out")"

images=control-plane/scripts/images.sh
args=(-tag "$tag" -out "$out" -user 65532:65532
  -entrypoint '["/install-plugins"]' -cmd '["-from","/wcm-plugins","-to","/plugins"]'
  -add "$("$images" path install-plugins)=/install-plugins:0755")
for f in "${plugins[@]}"; do args+=(-add "$f=/wcm-plugins/$(basename "$f"):0644"); done
"$("$images" path oci-image)" "${args[@]}"
echo "plugin-image: wrote $out ($(du -h "$out" | cut -f1)): ${!seen[*]}" >&2

# Its tag is its content's digest already: a new content is a new tag.
"$images" import "$out" >/dev/null
echo "$tag"
