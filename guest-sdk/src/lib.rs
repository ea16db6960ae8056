//! The Rust SDK for writing wasm-controller-manager controllers.
