//! Reading and writing the cluster from a controller, with `k8s-openapi` types.
//!
//! Reads come from the host's informer cache of the kinds the plugin watches; writes
//! go to the API server under the plugin's own field manager.

use k8s_openapi::Resource;
use serde::de::DeserializeOwned;

use crate::wit::wcm::controller::cluster as host;
use crate::{Error, EventType, Gvk, ObjectRef};

/// One object of a watched kind, by namespace (none if cluster-scoped) and name.
pub fn get<K: Resource + DeserializeOwned>(
    namespace: Option<&str>,
    name: &str,
) -> Result<K, Error> {
    let json = host::get(&ObjectRef::new::<K>(namespace, name))?;
    Ok(serde_json::from_str(&json)?)
}

/// Objects of a watched kind in `namespace` (all if none) matching `label_selector`.
pub fn list<K: Resource + DeserializeOwned>(
    namespace: Option<&str>,
    label_selector: Option<&str>,
) -> Result<Vec<K>, Error> {
    list_as(&Gvk::of::<K>(), namespace, label_selector)
}

/// Objects of a watched kind decoded into `T`, which may name only the fields the
/// controller reads (say `struct Meta { metadata: ObjectMeta }`): decoding thousands
/// of objects costs far less when the rest is skipped.
pub fn list_as<T: DeserializeOwned>(
    kind: &Gvk,
    namespace: Option<&str>,
    label_selector: Option<&str>,
) -> Result<Vec<T>, Error> {
    host::list(kind, namespace, label_selector)?
        .iter()
        .map(|json| Ok(serde_json::from_str(json)?))
        .collect()
}

/// One object of any watched kind as JSON (for custom resources without a Rust type).
pub fn get_json(obj: &ObjectRef) -> Result<serde_json::Value, Error> {
    Ok(serde_json::from_str(&host::get(obj)?)?)
}

/// Objects of any watched kind as JSON.
pub fn list_json(
    kind: &Gvk,
    namespace: Option<&str>,
    label_selector: Option<&str>,
) -> Result<Vec<serde_json::Value>, Error> {
    host::list(kind, namespace, label_selector)?
        .iter()
        .map(|json| Ok(serde_json::from_str(json)?))
        .collect()
}

/// Sets the labels in `set` and removes those in `remove` on `obj`. Needs the
/// `patch` permission on the object's kind; invalid keys or values are rejected
/// before any API call.
pub fn patch_labels(obj: &ObjectRef, set: &[(&str, &str)], remove: &[&str]) -> Result<(), Error> {
    let set: Vec<(String, String)> = set
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let remove: Vec<String> = remove.iter().map(|k| k.to_string()).collect();
    host::patch_labels(obj, &set, &remove)
}

/// Records an Event about `regarding`; `reason` is a short PascalCase word such as
/// `Counted`, `note` a sentence for humans (at most 1 KiB).
pub fn record_event(
    regarding: &ObjectRef,
    kind: EventType,
    reason: &str,
    note: &str,
) -> Result<(), Error> {
    host::record_event(regarding, kind, reason, note)
}
