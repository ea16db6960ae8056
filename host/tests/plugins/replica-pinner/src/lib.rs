//! Test plugin: for every Deployment labelled `wcm.test/pin-replicas=<n>`, applies
//! `spec.replicas: n` by server-side apply *without* force. When another manager owns
//! the field with another value, the conflict the plugin receives is recorded as a
//! Warning Event `ApplyConflict` carrying the error's message, so tests can see what a
//! plugin sees when two controllers want the same field.

use k8s_openapi::api::apps::v1::Deployment;
use serde_json::json;
use wasm_controller_sdk::{
    Action, Controller, EventType, Failure, Registration, Request, Verb, Watch, cluster,
    export_controller,
};

/// The label holding the wanted replica count.
const PIN: &str = "wcm.test/pin-replicas";

/// The plugin.
pub struct ReplicaPinner;

impl Controller for ReplicaPinner {
    fn registration() -> Registration {
        Registration::new("replica-pinner", "0.1.0")
            .watch(Watch::all::<Deployment>().labels(PIN))
            .permit::<Deployment>(&[Verb::Apply])
    }

    fn reconcile(req: Request) -> Result<Action, Failure> {
        let Some(target) = req.object() else {
            return Ok(Action::Done);
        };
        let deployment = match cluster::get_json(&target) {
            Ok(object) => object,
            Err(e) if e.is_not_found() => return Ok(Action::Done),
            Err(e) => return Err(e.into()),
        };
        let Some(replicas) = deployment["metadata"]["labels"][PIN]
            .as_str()
            .and_then(|v| v.parse::<i32>().ok())
        else {
            return Ok(Action::Done);
        };
        let wanted = json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": req.name, "namespace": req.namespace},
            "spec": {"replicas": replicas},
        });
        match cluster::apply_json(&wanted, false) {
            Err(e) if e.is_conflict() => {
                let note = &e.message;
                cluster::record_event(&target, EventType::Warning, "ApplyConflict", note)?;
                Ok(Action::Done)
            }
            Err(e) => Err(e.into()),
            Ok(_) => Ok(Action::Done),
        }
    }
}

export_controller!(ReplicaPinner);
