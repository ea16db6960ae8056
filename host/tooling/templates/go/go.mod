module {{name}}

go 1.26

require wasm-controller-manager.io/sdk v0.0.0

// The Go SDK of wasm-controller-manager {{host_version}}, written here by
// `wasm-controller-manager new`.
replace wasm-controller-manager.io/sdk => ./sdk
