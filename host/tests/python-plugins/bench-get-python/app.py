"""Benchmark plugin in Python: each reconcile reads the requested ConfigMap from the
host's cache once, parses it, and returns done -- the work of the Rust `bench-get`, so
`benches/reconcile.rs` compares languages on the same reconcile."""

from wasm_controller import CONFIG_MAP, Controller, Done, Registration, Watch, cluster, export


class BenchGet(Controller):
    def registration(self):
        return (Registration("bench-get-python", "0.1.0")
                .watch(Watch.all(CONFIG_MAP).labels("wcm.bench/target")))

    def reconcile(self, request):
        cluster.get(request.object())
        return Done()


Reconciler = export(BenchGet())
