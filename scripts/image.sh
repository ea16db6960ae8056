#!/usr/bin/env bash
# `make image`: builds the host's image without a container engine and imports it into
# the local node (when one runs). The final stage of ./Containerfile says what the image
# declares (ENV, USER, ENTRYPOINT, CMD); this script puts in the same content: the
# binary, the C libraries it links (as `ldd` finds them), CA certificates, /etc/passwd
# and /etc/group naming the non-root user, an empty /plugins. No shell, nothing else.
#
# Usage: scripts/image.sh [--profile release|dev | --binary PATH] [--out FILE]
# The image is tagged VERSION-gCOMMIT (scripts/version-tag.sh), written beside FILE as
# FILE-without-.tar.tag. Prints the image reference on its last line: on the local
# node pinned to its digest (wcm.local/wasm-controller-manager@sha256:...), else tagged.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

profile=release out="" binary=""
while [ $# -gt 0 ]; do
  case "$1" in
    --profile) profile="$2"; shift 2 ;;
    --binary) binary="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "image: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ -z "$binary" ]; then
  dir=$([ "$profile" = dev ] && echo debug || echo "$profile")
  cargo build --profile "$profile" -p wasm-controller-manager >&2
  binary="target/$dir/wasm-controller-manager"
fi
ref="wcm.local/wasm-controller-manager:$(scripts/version-tag.sh "$binary")"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
out="${out:-target/wasm-controller-manager-image.tar}"

# The last stage's declarations.
stage="$(awk '/^FROM /{buf=""} {buf=buf $0 "\n"} END{printf "%s", buf}' Containerfile)"
declared() { printf '%s' "$stage" | sed -n "s/^$1 //p" | tail -n1; }
user="$(declared USER)"
args=(-tag "$ref" -out "$out" -user "$user" -entrypoint "$(declared ENTRYPOINT)" -cmd "$(declared CMD)")
while read -r env; do args+=(-env "$env"); done < <(printf '%s' "$stage" | sed -n 's/^ENV //p')

# The content: the binary (debug builds stripped of their debug info), its libraries,
# CA certificates and the user.
objcopy --strip-debug "$binary" "$work/wasm-controller-manager"
args+=(-add "$work/wasm-controller-manager=/usr/local/bin/wasm-controller-manager:0755")
while read -r lib; do
  args+=(-add "$(readlink -f "$lib")=$lib:0755")
done < <(ldd "$binary" | grep -o '/[^ ]*' | sort -u)
args+=(-add "/etc/ssl/certs/ca-certificates.crt=/etc/ssl/certs/ca-certificates.crt:0644")
uid="${user%%:*}" gid="${user##*:}"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%s:%s:nonroot:/home/nonroot:/sbin/nologin\n' "$uid" "$gid" >"$work/passwd"
printf 'root:x:0:\nnonroot:x:%s:\n' "$gid" >"$work/group"
args+=(-add "$work/passwd=/etc/passwd:0644" -add "$work/group=/etc/group:0644" -dir /plugins:0755)

"$(control-plane/scripts/images.sh path oci-image)" "${args[@]}"
echo "image: wrote $out ($(du -h "$out" | cut -f1))" >&2

echo "${ref##*:}" >"${out%.tar}.tag"
# On the local node, the reference pinned to the imported digest: a rebuilt image
# (same tag, new content) is a new Pod template, so a deploy rolls it out.
pinned="$(control-plane/scripts/images.sh import "$out")"
echo "${pinned:-$ref}"
