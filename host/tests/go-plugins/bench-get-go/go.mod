module bench-get-go

go 1.26

require wasm-controller-manager.io/sdk v0.0.0

replace wasm-controller-manager.io/sdk => ../../../../guest-sdk-go
