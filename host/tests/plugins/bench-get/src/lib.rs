//! Benchmark plugin: each reconcile reads the requested ConfigMap from the host's cache
//! once, parses it, and returns `done` — the smallest useful reconcile.

use k8s_openapi::api::core::v1::ConfigMap;
use wasm_controller_sdk::{
    Action, Controller, Failure, Registration, Request, Watch, cluster, export_controller,
};

/// The plugin.
pub struct BenchGet;

impl Controller for BenchGet {
    fn registration() -> Registration {
        Registration::new("bench-get", "0.1.0")
            .watch(Watch::all::<ConfigMap>().labels("wcm.bench/target"))
    }

    fn reconcile(req: Request) -> Result<Action, Failure> {
        let _cm: ConfigMap = cluster::get(req.namespace.as_deref(), &req.name)?;
        Ok(Action::Done)
    }
}

export_controller!(BenchGet);
