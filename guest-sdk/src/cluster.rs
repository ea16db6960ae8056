//! Reading and writing the cluster from a controller, with `k8s-openapi` types.
//!
//! Reads come from the host's informer cache of the kinds the plugin watches (a kind
//! declared with `get` but not watched is read live from the API server); writes
//! go to the API server under the plugin's own field manager (the plugin's name).
//!
//! The host checks every name, namespace and kind before it is used (one that is not
//! valid in Kubernetes, or would need escaping in a URL, is `invalid`), answers
//! larger than the operator's `--max-result-mib` are refused, and writes wait for the
//! plugin's API rate within the reconcile's deadline (see the host's
//! `docs/isolation.md`).

use k8s_openapi::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::wit::wcm::controller::cluster as host;
use crate::{Error, EventType, Gvk, ObjectRef};

pub use host::{DeleteOptions, Event, PatchType, Propagation};

/// One object by namespace (none if cluster-scoped) and name: from the cache of a
/// watched kind, or live from the API server for a kind declared with
/// [`Verb::Get`](crate::Verb::Get) but not watched (within the plugin's API rate).
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

/// The first `limit` objects of a watched kind (by namespace and name) in
/// `namespace` (all if none) matching `label_selector`: a batch out of thousands, the
/// rest never copied into the plugin. Ask for one more than the batch to learn whether
/// more remain.
pub fn list_first<K: Resource + DeserializeOwned>(
    namespace: Option<&str>,
    label_selector: Option<&str>,
    limit: u32,
) -> Result<Vec<K>, Error> {
    host::list_first(&Gvk::of::<K>(), namespace, label_selector, limit)?
        .iter()
        .map(|json| Ok(serde_json::from_str(json)?))
        .collect()
}

/// How many objects of a watched kind match: counted by the host, nothing copied
/// into the plugin or decoded.
pub fn count(
    kind: &Gvk,
    namespace: Option<&str>,
    label_selector: Option<&str>,
) -> Result<usize, Error> {
    let count = host::count(kind, namespace, label_selector)?;
    Ok(usize::try_from(count).unwrap_or(usize::MAX))
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

/// Adds the finalizers in `add` and removes those in `remove` from `obj`, leaving
/// other controllers' finalizers alone (guarded by the object's resourceVersion and
/// tried again on a conflict). Names are qualified names (`example.com/cleanup`).
/// Needs [`Verb::Patch`](crate::Verb::Patch) on the kind; see
/// [`finalizer::finalize`](crate::finalizer::finalize) for the usual pattern.
pub fn patch_finalizers(obj: &ObjectRef, add: &[&str], remove: &[&str]) -> Result<(), Error> {
    let owned = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    host::patch_finalizers(obj, &owned(add), &owned(remove))
}

/// Records an Event about `regarding`; `reason` is a short PascalCase word such as
/// `Counted`, `note` a sentence for humans (at most 1 KiB). `regarding` must be of a
/// kind the plugin watches or declared a permission on (`forbidden` otherwise).
/// Beyond 25 Events about one object, one more is written every five minutes and the
/// rest are dropped (not failed): record what happened, not every reconcile. The
/// Event's action is `Reconcile`; [`record`] names another and a related object.
pub fn record_event(
    regarding: &ObjectRef,
    kind: EventType,
    reason: &str,
    note: &str,
) -> Result<(), Error> {
    record(&Event {
        regarding: regarding.clone(),
        related: None,
        type_: kind,
        reason: reason.to_string(),
        action: String::new(),
        note: note.to_string(),
    })
}

/// Records `event`, with its `action` (PascalCase, such as `Scale`; empty is
/// `Reconcile`) and an optional `related` object (of a kind the plugin watches or
/// declared a permission on).
pub fn record(event: &Event) -> Result<(), Error> {
    host::record_event(event)
}

/// Creates or updates `object` by server-side apply and returns it as stored.
///
/// `object` holds the fields the controller owns and nothing else (a k8s-openapi
/// value built from defaults serialises only what was set; its `apiVersion` and
/// `kind` come along). Fields applied before and left out now are removed; other
/// managers' fields stay. Without `force`, a field another manager owns with another
/// value fails with `conflict`, one [`Error::causes`] entry per field naming its
/// manager; with `force`
/// the controller takes it over, reverting manual edits to its fields. Needs
/// [`Verb::Apply`](crate::Verb::Apply) on the kind.
pub fn apply<K: Resource + Serialize + DeserializeOwned>(
    object: &K,
    force: bool,
) -> Result<K, Error> {
    let json = serde_json::to_string(object)
        .map_err(|e| Error::invalid(format!("cannot serialise the object to apply: {e}")))?;
    Ok(serde_json::from_str(&host::apply(&json, force)?)?)
}

/// [`apply`] for objects without a Rust type (custom resources), as JSON with
/// `apiVersion`, `kind` and `metadata`.
pub fn apply_json(object: &serde_json::Value, force: bool) -> Result<serde_json::Value, Error> {
    Ok(serde_json::from_str(&host::apply(
        &object.to_string(),
        force,
    )?)?)
}

/// Creates `object` (named, or with `metadata.generate_name`) and returns it as
/// stored, with its generated name; `already-exists` if the name is taken. Needs
/// [`Verb::Create`](crate::Verb::Create) on the kind.
pub fn create<K: Resource + Serialize + DeserializeOwned>(object: &K) -> Result<K, Error> {
    let json = to_json(object)?;
    Ok(serde_json::from_str(&host::create(&json)?)?)
}

/// Patches `obj` with a JSON merge patch (`{"spec": {"paused": true}}`; `null` removes
/// a field) as the plugin's field manager; returns the object as stored. Put
/// `metadata.resourceVersion` in it to make it conditional (`conflict` if the object
/// changed). Needs [`Verb::Patch`](crate::Verb::Patch).
pub fn merge_patch(obj: &ObjectRef, patch: &serde_json::Value) -> Result<serde_json::Value, Error> {
    patch_as(obj, PatchType::Merge, patch, None)
}

/// Patches `obj` with a JSON patch (RFC 6902 operations, `test` included).
pub fn json_patch(obj: &ObjectRef, ops: &serde_json::Value) -> Result<serde_json::Value, Error> {
    patch_as(obj, PatchType::Json, ops, None)
}

/// Patches `obj`'s `subresource` (`status`, needing [`Verb::PatchStatus`](crate::Verb::PatchStatus),
/// or `scale`, needing [`Verb::PatchScale`](crate::Verb::PatchScale)); returns what the
/// API server returns (the object, or its Scale).
pub fn patch_as(
    obj: &ObjectRef,
    kind: PatchType,
    patch: &serde_json::Value,
    subresource: Option<&str>,
) -> Result<serde_json::Value, Error> {
    Ok(serde_json::from_str(&host::patch(
        obj,
        kind,
        &patch.to_string(),
        subresource,
    )?)?)
}

/// Replaces an object read earlier (it carries the `metadata.resource_version` it was
/// read at) with `object`: `conflict` if it changed since, as client-go's `Update`.
/// The status is not changed. Needs [`Verb::Update`](crate::Verb::Update).
pub fn update<K: Resource + Serialize + DeserializeOwned>(object: &K) -> Result<K, Error> {
    let json = to_json(object)?;
    Ok(serde_json::from_str(&host::update(&json)?)?)
}

fn to_json(object: &impl Serialize) -> Result<String, Error> {
    serde_json::to_string(object)
        .map_err(|e| Error::invalid(format!("cannot serialise the object: {e}")))
}

/// Merges `status` (the value of the object's `.status`) into the status subresource
/// of `obj`: fields not mentioned stay, lists are replaced whole. Needs
/// [`Verb::PatchStatus`](crate::Verb::PatchStatus) on the kind.
pub fn patch_status(obj: &ObjectRef, status: &impl Serialize) -> Result<(), Error> {
    let json = serde_json::to_string(status)
        .map_err(|e| Error::invalid(format!("cannot serialise the status: {e}")))?;
    host::patch_status(obj, &json)
}

/// Deletes `obj`; `not-found` if it is already gone. Needs
/// [`Verb::Delete`](crate::Verb::Delete) on the kind.
pub fn delete(obj: &ObjectRef, propagation: Propagation) -> Result<(), Error> {
    let options = DeleteOptions {
        propagation,
        uid: None,
        resource_version: None,
    };
    host::delete(obj, &options)
}

/// Deletes `obj` only if it is still the object with `options.uid` and/or still at
/// `options.resource_version` (`conflict` otherwise): a delete decided on a read
/// cannot remove an object created again under the same name since.
pub fn delete_if(obj: &ObjectRef, options: &DeleteOptions) -> Result<(), Error> {
    host::delete(obj, options)
}
