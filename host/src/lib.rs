//! wasm-controller-manager host library.
