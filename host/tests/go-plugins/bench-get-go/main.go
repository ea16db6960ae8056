// bench-get-go, a benchmark plugin in Go: each reconcile reads the requested ConfigMap
// from the host's cache once, parses it, and returns done -- the work of the Rust
// `bench-get`, so `benches/reconcile.rs` compares languages on the same reconcile.
package main

import (
	ctl "wasm-controller-manager.io/sdk/controller"
)

type configMap struct {
	Metadata struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Data map[string]string `json:"data"`
}

type benchGet struct{}

func (benchGet) Registration() ctl.Registration {
	return ctl.NewRegistration("bench-get-go", "0.1.0").
		Watch(ctl.WatchAll(ctl.ConfigMap).Labels("wcm.bench/target"))
}

func (benchGet) Reconcile(req ctl.Request) (ctl.Action, error) {
	ref, _ := req.Object()
	_, err := ctl.Get[configMap](ref)
	return ctl.Done(), err
}

func init() { ctl.Export(benchGet{}) }

func main() {}
