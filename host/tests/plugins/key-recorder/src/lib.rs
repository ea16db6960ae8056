//! Test plugin: for every Pod key it reconciles, records an Event about that Pod —
//! `Seen` while the Pod exists, `Gone` once `get` says it is not found — so tests can
//! observe which keys were delivered, deletions included. It resyncs every second, so
//! an unchanged Pod is reconciled again and its `Seen` Event's series count grows.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use wasm_controller_sdk::{
    Action, Controller, EventType, Failure, ObjectRef, Registration, Request, Watch, cluster,
    export_controller,
};

/// The plugin.
pub struct KeyRecorder;

impl Controller for KeyRecorder {
    fn registration() -> Registration {
        Registration::new("key-recorder", "0.1.0")
            // Metadata only, as pod-counter: the two share one informer.
            .watch(Watch::all::<Pod>().metadata_only())
            .resync_every(Duration::from_secs(1))
    }

    fn reconcile(req: Request) -> Result<Action, Failure> {
        let target = ObjectRef::new::<Pod>(req.namespace.as_deref(), &req.name);
        let reason = match cluster::get::<Pod>(req.namespace.as_deref(), &req.name) {
            Ok(_) => "Seen",
            Err(e) if e.is_not_found() => "Gone",
            Err(e) => return Err(e.into()),
        };
        cluster::record_event(&target, EventType::Normal, reason, "key delivered")?;
        Ok(Action::Done)
    }
}

export_controller!(KeyRecorder);
