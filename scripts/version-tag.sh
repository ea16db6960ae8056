#!/usr/bin/env bash
# The tag of an image of this checkout: the host's version, then the source's commit
# (`0.1.0-g1a2b3c4d5e6f`), then `-dirty` when tracked files differ from that commit, so
# two builds of different sources never share a tag by accident. (Builds of one dirty
# tree share it: deploys pin the digest, which differs whenever the content does.)
#
# Usage: scripts/version-tag.sh [HOST_BINARY]   (default: the workspace version in Cargo.toml)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ $# -gt 0 ]; then version="$("$1" --version | awk '{print $2}')"
else version="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)"; fi
tag="$version"
if commit="$(git rev-parse --short=12 HEAD 2>/dev/null)"; then
  tag="$tag-g$commit"
  git diff --quiet HEAD -- 2>/dev/null || tag="$tag-dirty"
fi
echo "$tag"
