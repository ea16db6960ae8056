//! Test plugin using what contract 0.3 added, next to `contract-v0-2` in one host. For
//! each ConfigMap labelled `wcm.test/contract`, by its data:
//! - `fail: terminal`: fails with a terminal `invalid` error (not retried);
//! - `fail: retry`: fails with a plain error (retried with backoff);
//! - `record: NAME`: keeps a finalizer `wcm.test/cleanup` on the ConfigMap and, when it
//!   is deleted, first deletes the ConfigMap NAME in the namespace `wcm-records` (the
//!   "external record" it stands for), then releases it;
//! - `delete-uid: UID`: deletes the ConfigMap only if it still has that uid; a refusal
//!   is recorded as a `DeleteRefused` Event whose note carries the code and status;
//! - `create: PREFIX`: creates a ConfigMap named `PREFIX` + a generated suffix (data
//!   `from: <source>`) once, and notes its name in the annotation `wcm.test/created`
//!   by a merge patch guarded by the source's resourceVersion;
//! - `update: please`: updates the ConfigMap read (its resourceVersion) to
//!   `update: done`;
//! - otherwise: labels it `wcm.test/seen-by=contract-v0-3`, records a `SeenBy` Event
//!   with action `Inspect` and, if `related: NAME` is given, that ConfigMap as its
//!   related object, and logs `inspected` with fields; with `secret: NAME` it reads
//!   that Secret, a kind it does not watch, live from the API server and says in the
//!   Event's note how many keys it has (or the status of the failed read).

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use wasm_controller_sdk::cluster::{self, DeleteOptions, Event, Propagation};
use wasm_controller_sdk::finalizer::{Finalized, finalize};
use wasm_controller_sdk::log::{self, Level};
use wasm_controller_sdk::metrics;
use wasm_controller_sdk::{
    Action, Controller, Error, EventType, Failure, ObjectRef, Registration, Request, Verb, Watch,
    export_controller,
};

/// The plugin.
pub struct ContractV03;

/// Its finalizer.
const CLEANUP: &str = "wcm.test/cleanup";
/// Where the "external records" it cleans up live.
const RECORDS: &str = "wcm-records";
/// The annotation naming the ConfigMap it created for a source.
const CREATED: &str = "wcm.test/created";

impl Controller for ContractV03 {
    fn registration() -> Registration {
        Registration::new("contract-v0-3", "0.3.0")
            .watch(Watch::all::<ConfigMap>().labels("wcm.test/contract"))
            .permit::<ConfigMap>(&[Verb::Patch, Verb::Delete, Verb::Create, Verb::Update])
            .permit::<Secret>(&[Verb::Get])
            .counter("inspected", "ConfigMaps inspected", &["namespace"])
            .gauge(
                "data_keys",
                "Data keys of the last ConfigMap inspected",
                &[],
            )
    }

    fn reconcile(req: Request) -> Result<Action, Failure> {
        let ns = req.namespace.as_deref();
        let cm: ConfigMap = match cluster::get(ns, &req.name) {
            Ok(cm) => cm,
            Err(e) if e.is_not_found() => return Ok(Action::Done),
            Err(e) => return Err(e.into()),
        };
        let target = ObjectRef::of(&cm);
        let data = cm.data.clone().unwrap_or_default();
        metrics::inc("inspected", &[ns.unwrap_or_default()])?;
        metrics::set("data_keys", &[], data.len() as f64)?;
        match data.get("fail").map(String::as_str) {
            Some("terminal") => return Err(Error::invalid("data.fail says terminal").terminal()),
            Some("retry") => return Err(Error::other("data.fail says retry").into()),
            _ => {}
        }
        if let Some(record) = data.get("record") {
            let external = ObjectRef::new::<ConfigMap>(Some(RECORDS), record);
            let cleanup = || match cluster::delete(&external, Propagation::Background) {
                Err(e) if !e.is_not_found() => Err(e),
                _ => Ok(()),
            };
            if finalize(&target, &cm.metadata, CLEANUP, cleanup)? == Finalized::Deleting {
                return Ok(Action::Done);
            }
        }
        if let Some(uid) = data.get("delete-uid") {
            return delete_if_still(&target, uid);
        }
        if let Some(prefix) = data.get("create") {
            create_once(&cm, prefix)?;
        }
        if data.get("update").map(String::as_str) == Some("please") {
            let mut updated = cm.clone();
            let data = updated.data.get_or_insert_with(Default::default);
            data.insert("update".into(), "done".into());
            cluster::update(&updated)?;
        }
        cluster::patch_labels(&target, &[("wcm.test/seen-by", "contract-v0-3")], &[])?;
        let related = data
            .get("related")
            .map(|name| ObjectRef::new::<ConfigMap>(ns, name));
        cluster::record(&Event {
            regarding: target.clone(),
            related,
            type_: EventType::Normal,
            reason: "SeenBy".into(),
            action: "Inspect".into(),
            note: format!("contract 0.3{}", secret_note(ns, data.get("secret"))),
        })?;
        let keys = data.len().to_string();
        log::with(
            Level::Info,
            "inspected",
            &[("configmap", &req.name), ("keys", &keys)],
        );
        Ok(Action::Done)
    }
}

/// Creates a ConfigMap named from `prefix` for `source` once, remembered in an
/// annotation of `source` (a merge patch guarded by its resourceVersion).
fn create_once(source: &ConfigMap, prefix: &str) -> Result<(), Error> {
    let annotations = source.metadata.annotations.as_ref();
    if annotations.is_some_and(|a| a.contains_key(CREATED)) {
        return Ok(());
    }
    let mut made = ConfigMap::default();
    made.metadata.generate_name = Some(prefix.to_string());
    made.metadata.namespace = source.metadata.namespace.clone();
    let from = source.metadata.name.clone().unwrap_or_default();
    made.data = Some([("from".to_string(), from)].into());
    let made = cluster::create(&made)?;
    let patch = serde_json::json!({"metadata": {
        "resourceVersion": source.metadata.resource_version,
        "annotations": {CREATED: made.metadata.name},
    }});
    cluster::merge_patch(&ObjectRef::of(source), &patch)?;
    Ok(())
}

/// The HTTP status of a failed call, `none` when the host refused it itself.
fn status(e: &Error) -> String {
    e.status.map_or("none".to_string(), |s| s.to_string())
}

/// What a live read of the Secret `name` found, for the Event's note.
fn secret_note(ns: Option<&str>, name: Option<&String>) -> String {
    let Some(name) = name else {
        return String::new();
    };
    match cluster::get::<Secret>(ns, name) {
        Ok(secret) => format!(
            "; secret {name} has {} keys",
            secret.data.unwrap_or_default().len()
        ),
        Err(e) => format!("; secret {name}: {} (status {})", e.code, status(&e)),
    }
}

/// Deletes `target` only while it has `uid`; a refusal becomes an Event.
fn delete_if_still(target: &ObjectRef, uid: &str) -> Result<Action, Failure> {
    let options = DeleteOptions {
        propagation: Propagation::Background,
        uid: Some(uid.to_string()),
        resource_version: None,
    };
    match cluster::delete_if(target, &options) {
        Ok(()) => Ok(Action::Done),
        Err(e) => {
            let note = format!("{} (status {})", e.code, status(&e));
            cluster::record_event(target, EventType::Warning, "DeleteRefused", &note)?;
            Ok(Action::Done)
        }
    }
}

export_controller!(ContractV03);
