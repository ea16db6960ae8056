//! Test plugin: every ConfigMap labelled `wcm.test/owner` gets the label
//! `wcm.test/owned-pods` with the number of Pods whose controller owner it is. Pod
//! changes map to their owner's key, so a burst of Pod events is one reconcile per
//! owner, which is what tests of the controller-owner key mapping under churn observe.

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use wasm_controller_sdk::{
    Action, Controller, Failure, Gvk, ObjectRef, Registration, Request, Verb, Watch, cluster,
    export_controller,
};

/// The label marking owner ConfigMaps.
const OWNER: &str = "wcm.test/owner";
/// The label the count is written to.
const OWNED_PODS: &str = "wcm.test/owned-pods";

/// The plugin.
pub struct OwnerCounter;

/// The only part of a Pod this plugin reads; the rest is skipped when decoding.
#[derive(Deserialize)]
struct PodMeta {
    metadata: ObjectMeta,
}

impl Controller for OwnerCounter {
    fn registration() -> Registration {
        Registration::new("owner-counter", "0.1.0")
            .watch(Watch::all::<ConfigMap>().labels(OWNER))
            .watch(Watch::all::<Pod>().owned_by::<ConfigMap>())
            .permit::<ConfigMap>(&[Verb::Patch])
    }

    fn reconcile(req: Request) -> Result<Action, Failure> {
        let owner = match cluster::get::<ConfigMap>(req.namespace.as_deref(), &req.name) {
            Ok(owner) => owner,
            Err(e) if e.is_not_found() => return Ok(Action::Done),
            Err(e) => return Err(e.into()),
        };
        let uid = owner.metadata.uid.clone().unwrap_or_default();
        let pods: Vec<PodMeta> =
            cluster::list_as(&Gvk::of::<Pod>(), req.namespace.as_deref(), None)?;
        let owned = pods
            .iter()
            .filter(|p| controlled_by(p, &uid))
            .count()
            .to_string();
        let current = owner
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(OWNED_PODS));
        if current != Some(&owned) {
            cluster::patch_labels(&ObjectRef::of(&owner), &[(OWNED_PODS, &owned)], &[])?;
        }
        Ok(Action::Done)
    }
}

/// Whether `pod`'s controller owner reference points at the object with `uid`.
fn controlled_by(pod: &PodMeta, uid: &str) -> bool {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|r| r.controller == Some(true) && r.uid == uid)
}

export_controller!(OwnerCounter);
