//! Test plugin built against the frozen contract 0.2 (`wit/compat/v0.2`) with raw
//! bindings, as a plugin compiled before 0.3 is: the host must keep loading and
//! running it next to 0.3 plugins. For each ConfigMap labelled `wcm.test/contract` it
//! labels it `wcm.test/seen-by=contract-v0-2` and records a `SeenBy` Event; a ConfigMap
//! whose data says `fail: "yes"` fails its reconcile with a `conflict` (0.2's error
//! variant), one saying `delete: "yes"` is deleted (0.2's delete, propagation only).

// Raw bindings, no SDK: the generated export glue is `unsafe` by nature.
#![allow(unsafe_code)]

#[allow(missing_docs, clippy::all)]
mod bindings {
    wit_bindgen::generate!({
        path: "../../../../wit/compat/v0.2",
        world: "controller",
    });
}

use bindings::exports::wcm::controller::reconciler::{
    Action, Guest, KeyMapping, Permission, Registration, Request, Verb, Watch,
};
use bindings::wcm::controller::cluster::{self, Propagation};
use bindings::wcm::controller::types::{Error, EventType, Gvk, ObjectRef};

/// The plugin.
struct ContractV02;

fn config_maps() -> Gvk {
    Gvk {
        group: String::new(),
        version: "v1".into(),
        kind: "ConfigMap".into(),
    }
}

impl Guest for ContractV02 {
    fn register() -> Registration {
        Registration {
            name: "contract-v0-2".into(),
            version: "0.2.0".into(),
            watches: vec![Watch {
                kind: config_maps(),
                namespace: None,
                label_selector: Some("wcm.test/contract".into()),
                maps_to: KeyMapping::Object,
            }],
            permissions: vec![Permission {
                kind: config_maps(),
                verbs: vec![Verb::Patch, Verb::Delete, Verb::PatchStatus],
            }],
            max_concurrent_reconciles: 0,
            resync_period_ms: None,
        }
    }

    fn reconcile(req: Request) -> Result<Action, Error> {
        let target = ObjectRef {
            kind: config_maps(),
            namespace: req.namespace.clone(),
            name: req.name.clone(),
        };
        let json = match cluster::get(&target) {
            Ok(json) => json,
            Err(Error::NotFound(_)) => return Ok(Action::Done),
            Err(e) => return Err(e),
        };
        let object: serde_json::Value =
            serde_json::from_str(&json).map_err(|e| Error::Invalid(e.to_string()))?;
        let data = |key: &str| {
            object
                .pointer(&format!("/data/{key}"))
                .and_then(|v| v.as_str())
        };
        if data("fail") == Some("yes") {
            return Err(Error::Conflict(
                "asked to fail with 0.2's conflict case".into(),
            ));
        }
        if data("delete") == Some("yes") {
            return cluster::delete(&target, Propagation::Background).map(|()| Action::Done);
        }
        let seen = [("wcm.test/seen-by".to_string(), "contract-v0-2".to_string())];
        cluster::patch_labels(&target, &seen, &[])?;
        cluster::record_event(&target, EventType::Normal, "SeenBy", "contract 0.2")?;
        Ok(Action::Done)
    }
}

bindings::export!(ContractV02 with_types_in bindings);
