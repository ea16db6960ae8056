#!/usr/bin/env bash
# Builds every plugin crate for wasm32-wasip2 and copies the components to
# target/plugins/<name>.wasm (examples) and target/test-plugins/<name>.wasm (test-only).
# With --examples, the examples only: what `make run` and `make deploy` run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

examples_only=false
[ "${1:-}" = --examples ] && examples_only=true
test_dirs=(host/tests/plugins/*/)
$examples_only && test_dirs=()

package_name() { sed -n 's/^name = "\(.*\)"/\1/p' "$1/Cargo.toml" | head -n1; }

declare -A dest=()
args=()
for dir in plugins/*/ "${test_dirs[@]}"; do
  [ -f "$dir/Cargo.toml" ] || continue
  name="$(package_name "$dir")"
  args+=(-p "$name")
  case "$dir" in plugins/*) dest[$name]=target/plugins ;; *) dest[$name]=target/test-plugins ;; esac
done

cargo build --target wasm32-wasip2 --profile plugin "${args[@]}"
mkdir -p target/plugins target/test-plugins
for name in "${!dest[@]}"; do
  cp "target/wasm32-wasip2/plugin/${name//-/_}.wasm" "${dest[$name]}/$name.wasm"
done
if ! $examples_only; then
# The upgrade tests' variant of pod-counter: same name, other label format and version.
cargo build --target wasm32-wasip2 --profile plugin -p pod-counter --features next-label-format
cp target/wasm32-wasip2/plugin/pod_counter.wasm target/test-plugins/pod-counter-next.wasm
cargo build --target wasm32-wasip2 --profile plugin -p pod-counter
cp target/wasm32-wasip2/plugin/pod_counter.wasm target/plugins/pod-counter.wasm
# The hostile-plugin tests' registrations, one variant per feature.
for feature in resync-1ms resync-max bad-selector too-many-watches secrets secrets-peek namespace-a unsupported-field many-informers metrics; do
  cargo build --target wasm32-wasip2 --profile plugin -p hostile-registration --features "$feature"
  cp target/wasm32-wasip2/plugin/hostile_registration.wasm "target/test-plugins/hostile-$feature.wasm"
done
cargo build --target wasm32-wasip2 --profile plugin -p hostile-registration
cp target/wasm32-wasip2/plugin/hostile_registration.wasm target/test-plugins/hostile-registration.wasm
fi

# Plugins in other languages: plugins/<language>/<name>/<entry> becomes
# target/plugins/<name>.wasm (and host/tests/<language>-plugins/<name>/<entry>
# target/test-plugins/<name>.wasm) when a source, the SDK or the WIT changed, built by
# the pinned tool scripts/setup.sh installed. `build_each LANGUAGE ENTRY TOOL ARGS...`
# runs TOOL with ARGS, `{dir}` and `{out}` in them replaced by the plugin's directory
# and output.
source scripts/tools.env
mkdir -p target/plugins target/test-plugins
build_each() {
  local language="$1" entry="$2" tool="$3" dir name out arg args
  shift 3
  for dir in plugins/"$language"/*/ host/tests/"$language"-plugins/*/; do
    [ -f "$dir/$entry" ] || continue
    $examples_only && [[ "$dir" == host/tests/* ]] && continue
    name="$(basename "$dir")"
    out="target/plugins/$name.wasm"
    [[ "$dir" == host/tests/* ]] && out="target/test-plugins/$name.wasm"
    if [ -f "$out" ] && [ -z "$(find "$dir" wit "${SDK_DIRS[@]}" -newer "$out" -type f | head -n1)" ]; then
      continue
    fi
    [ -x "$tool" ] || { echo "plugins: $tool missing; run scripts/setup.sh" >&2; exit 1; }
    args=()
    for arg in "$@"; do
      arg="${arg//\{dir\}/$dir}"
      args+=("${arg//\{out\}/$out}")
    done
    "$tool" "${args[@]}"
    echo "plugins: built $out from $dir" >&2
  done
}
SDK_DIRS=(guest-sdk-python)
build_each python app.py "$PYTHON_TOOLS/bin/componentize-py" \
  -d wit -w controller componentize app -p "{dir}" -p guest-sdk-python -o "{out}"
# Without componentize-js's HTTP features: the host links no wasi:http.
SDK_DIRS=(guest-sdk-js)
build_each javascript index.js "$JS_TOOLS/node_modules/.bin/componentize-js" \
  "{dir}index.js" -w wit -n controller -d http fetch-event -o "{out}"
# Go plugins: plugins/go/<name> is a main package using guest-sdk-go, built by the
# standard Go toolchain as a WASI preview 1 reactor and made a component by the
# host's own `componentize` (Go's build cache makes an unchanged plugin quick).
cargo build -p wasm-controller-manager
mkdir -p target/go target/test-plugins
# `go_plugins DIR OUT`: every Go plugin under DIR becomes OUT/<name>.wasm.
go_plugins() {
  local dir name
  for dir in "$1"/*/; do
    [ -f "$dir/go.mod" ] || continue
    name="$(basename "$dir")"
    (cd "$dir" && GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o "$OLDPWD/target/go/$name.core.wasm" .)
    target/debug/wasm-controller-manager componentize "target/go/$name.core.wasm" -o "$2/$name.wasm"
  done
}
go_plugins plugins/go target/plugins
# Go test plugins (host/tests/go-plugins: not Cargo workspace members).
$examples_only || go_plugins host/tests/go-plugins target/test-plugins
echo "plugins: $(ls target/plugins | tr '\n' ' ')" >&2
