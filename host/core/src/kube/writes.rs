//! Calls a plugin makes to the API server: writes, each under the plugin's own field
//! manager (label patches, server-side apply, status patches, deletions), and the one
//! live read (`get` of a kind the plugin does not watch).

use kube::Client;
use kube::api::{
    Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions, PropagationPolicy,
};
use serde_json::{Map, Value};

use super::discovery::ResolvedKind;
use super::labels::{LabelError, validate_key, validate_value};

/// The API of `kind`, in `namespace` if the kind is namespaced.
pub(super) fn api(
    client: &Client,
    kind: &ResolvedKind,
    namespace: Option<&str>,
) -> Result<Api<DynamicObject>, WriteError> {
    match (kind.namespaced, namespace) {
        (true, Some(ns)) => Ok(Api::namespaced_with(client.clone(), ns, &kind.resource)),
        (true, None) => Err(WriteError::MissingNamespace),
        (false, _) => Ok(Api::all_with(client.clone(), &kind.resource)),
    }
}

/// Reads one object straight from the API server.
pub async fn get(
    client: &Client,
    kind: &ResolvedKind,
    namespace: Option<&str>,
    name: &str,
) -> Result<DynamicObject, WriteError> {
    Ok(api(client, kind, namespace)?.get(name).await?)
}

/// Replaces the finalizers of one object only if it is still at `resource_version`
/// (a JSON merge patch carrying the resourceVersion, as client-go's optimistic lock
/// does): `409 Conflict` when someone changed the object since it was read. Returns the
/// object as stored.
pub async fn set_finalizers(
    client: &Client,
    kind: &ResolvedKind,
    (namespace, name): (Option<&str>, &str),
    field_manager: &str,
    resource_version: &str,
    finalizers: &[String],
) -> Result<DynamicObject, WriteError> {
    let patch = serde_json::json!({"metadata": {
        "resourceVersion": resource_version,
        "finalizers": if finalizers.is_empty() { Value::Null } else { serde_json::json!(finalizers) },
    }});
    let api = api(client, kind, namespace)?;
    let params = merge_params(field_manager);
    Ok(api.patch(name, &params, &Patch::Merge(&patch)).await?)
}

/// Parameters of a merge patch recorded under `field_manager`.
pub(super) fn merge_params(field_manager: &str) -> PatchParams {
    PatchParams {
        field_manager: Some(field_manager.to_string()),
        ..Default::default()
    }
}

/// Sets and removes labels on one object with a JSON merge patch under `field_manager`.
///
/// A merge patch rather than server-side apply: apply would also remove every label
/// this manager set in an earlier call and does not repeat now, while plugins expect
/// "set these, remove those" and nothing else. The field manager still records which
/// plugin owns each label. `patch` is [`label_patch`]'s, every key and value of it
/// validated. Returns the object as the API server stored it.
pub async fn patch_labels(
    client: &Client,
    kind: &ResolvedKind,
    (namespace, name): (Option<&str>, &str),
    field_manager: &str,
    patch: &Value,
) -> Result<DynamicObject, WriteError> {
    let api = api(client, kind, namespace)?;
    let params = merge_params(field_manager);
    Ok(api.patch(name, &params, &Patch::Merge(patch)).await?)
}

/// Server-side applies `object` as `field_manager`; `force` takes over fields other
/// managers own instead of failing with a conflict. Returns the stored object.
pub async fn apply(
    client: &Client,
    kind: &ResolvedKind,
    namespace: Option<&str>,
    name: &str,
    field_manager: &str,
    object: &Value,
    force: bool,
) -> Result<DynamicObject, WriteError> {
    let api = api(client, kind, namespace)?;
    let mut params = PatchParams::apply(field_manager);
    params.force = force;
    Ok(api.patch(name, &params, &Patch::Apply(object)).await?)
}

/// Merges `status` into the status subresource of one object as `field_manager`.
pub async fn patch_status(
    client: &Client,
    kind: &ResolvedKind,
    namespace: Option<&str>,
    name: &str,
    field_manager: &str,
    status: &Value,
) -> Result<DynamicObject, WriteError> {
    let api = api(client, kind, namespace)?;
    let params = merge_params(field_manager);
    let patch = serde_json::json!({ "status": status });
    Ok(api
        .patch_status(name, &params, &Patch::Merge(&patch))
        .await?)
}

/// Deletes one object, dependents handled by `propagation`.
pub async fn delete(
    client: &Client,
    kind: &ResolvedKind,
    namespace: Option<&str>,
    name: &str,
    propagation: PropagationPolicy,
    preconditions: Option<Preconditions>,
) -> Result<(), WriteError> {
    let api = api(client, kind, namespace)?;
    let params = DeleteParams {
        propagation_policy: Some(propagation),
        preconditions,
        ..DeleteParams::default()
    };
    api.delete(name, &params).await?;
    Ok(())
}

/// Builds `{"metadata":{"labels":{set..., removed: null}}}` after validating every key.
pub fn label_patch(set: &[(String, String)], remove: &[String]) -> Result<Value, LabelError> {
    let mut labels = Map::new();
    for key in remove {
        validate_key(key)?;
        labels.insert(key.clone(), Value::Null);
    }
    for (key, value) in set {
        validate_key(key)?;
        validate_value(key, value)?;
        labels.insert(key.clone(), Value::String(value.clone()));
    }
    Ok(serde_json::json!({ "metadata": { "labels": labels } }))
}

/// Why a write was not made.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// A key or value breaks Kubernetes' rules; no API call was made.
    #[error(transparent)]
    Label(#[from] LabelError),
    /// A namespaced kind was addressed without a namespace.
    #[error("the kind is namespaced but no namespace was given")]
    MissingNamespace,
    /// The API server refused or could not be reached.
    #[error(transparent)]
    Api(#[from] kube::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_patch_sets_and_removes_in_one_request() {
        let patch = label_patch(&[("a".into(), "1".into())], &["b".into()]).expect("valid");
        assert_eq!(
            patch,
            serde_json::json!({"metadata": {"labels": {"a": "1", "b": null}}})
        );
    }

    #[test]
    fn an_invalid_value_is_rejected_before_any_call() {
        let err = label_patch(&[("ok".into(), "not ok".into())], &[]).expect_err("space");
        assert!(
            err.to_string()
                .contains("invalid value \"not ok\" for label \"ok\""),
            "{err}"
        );
    }
}
