//! Writes a plugin makes to the API server, each under the plugin's own field manager.

use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{Map, Value};

use super::discovery::ResolvedKind;
use super::labels::{LabelError, validate_key, validate_value};

/// Sets and removes labels on one object with a JSON merge patch under `field_manager`.
///
/// A merge patch rather than server-side apply: apply would also remove every label
/// this manager set in an earlier call and does not repeat now, while plugins expect
/// "set these, remove those" and nothing else. The field manager still records which
/// plugin owns each label. Every key and value is validated before the API call.
/// Returns the object as the API server stored it.
pub async fn patch_labels(
    client: &Client,
    kind: &ResolvedKind,
    namespace: Option<&str>,
    name: &str,
    field_manager: &str,
    set: &[(String, String)],
    remove: &[String],
) -> Result<DynamicObject, PatchLabelsError> {
    let patch = label_patch(set, remove)?;
    let api: Api<DynamicObject> = match (kind.namespaced, namespace) {
        (true, Some(ns)) => Api::namespaced_with(client.clone(), ns, &kind.resource),
        (true, None) => return Err(PatchLabelsError::MissingNamespace),
        (false, _) => Api::all_with(client.clone(), &kind.resource),
    };
    let params = PatchParams {
        field_manager: Some(field_manager.to_string()),
        ..Default::default()
    };
    Ok(api.patch(name, &params, &Patch::Merge(&patch)).await?)
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

/// Why a label patch was not made.
#[derive(Debug, thiserror::Error)]
pub enum PatchLabelsError {
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
