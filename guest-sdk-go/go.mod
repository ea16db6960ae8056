module wasm-controller-manager.io/sdk

go 1.26
