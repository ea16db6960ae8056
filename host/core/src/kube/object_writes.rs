//! Writes of whole objects and patches as the plugin asks for them: create, patch
//! (JSON merge or JSON patch, of the object or its status or scale subresource) and
//! update guarded by the resourceVersion, each recorded under the plugin's field
//! manager. The checks happen before (`capabilities`); this is the API call.

use kube::Client;
use kube::api::{DynamicObject, Patch, PostParams};
use serde_json::Value;

use super::discovery::ResolvedKind;
use super::writes::{WriteError, api, merge_params};
use crate::contract::PatchKind;

/// The subresources a plugin may patch.
pub const SUBRESOURCES: [&str; 2] = ["status", "scale"];

fn post_params(field_manager: &str) -> PostParams {
    PostParams {
        field_manager: Some(field_manager.to_string()),
        ..Default::default()
    }
}

/// Creates `object` in `namespace`; returns it as stored.
pub async fn create(
    client: &Client,
    kind: &ResolvedKind,
    namespace: Option<&str>,
    field_manager: &str,
    object: &DynamicObject,
) -> Result<DynamicObject, WriteError> {
    let api = api(client, kind, namespace)?;
    Ok(api.create(&post_params(field_manager), object).await?)
}

/// A patch as a plugin gave it, parsed once: a JSON merge patch (an object) or a JSON
/// patch (its operations).
#[derive(Debug, Clone, PartialEq)]
pub enum PatchBody {
    /// RFC 7386.
    Merge(Value),
    /// RFC 6902.
    Json(json_patch::Patch),
}

impl PatchBody {
    /// Parses `value` as a patch of `kind`; the reason says what shape it lacks.
    pub fn parse(kind: PatchKind, value: Value) -> Result<PatchBody, String> {
        match (kind, value) {
            (PatchKind::Merge, value @ Value::Object(_)) => Ok(PatchBody::Merge(value)),
            (PatchKind::Merge, _) => Err("must be a JSON object (a merge patch)".into()),
            (PatchKind::Json, value @ Value::Array(_)) => serde_json::from_value(value)
                .map(PatchBody::Json)
                .map_err(|e| format!("is not a JSON patch: {e}")),
            (PatchKind::Json, _) => Err("must be a list of operations (a JSON patch)".into()),
        }
    }

    /// The patch as JSON again (for the test kit's report).
    pub fn to_value(&self) -> Value {
        match self {
            PatchBody::Merge(value) => value.clone(),
            PatchBody::Json(ops) => serde_json::to_value(ops).unwrap_or_default(),
        }
    }
}

/// Patches `name` (or its `subresource`); returns the object as stored.
pub async fn patch(
    client: &Client,
    kind: &ResolvedKind,
    (namespace, name): (Option<&str>, &str),
    field_manager: &str,
    body: PatchBody,
    subresource: Option<&str>,
) -> Result<DynamicObject, WriteError> {
    let api = api(client, kind, namespace)?;
    let params = merge_params(field_manager);
    let patch = match body {
        PatchBody::Merge(value) => Patch::Merge(value),
        PatchBody::Json(ops) => Patch::Json(ops),
    };
    Ok(match subresource {
        None => api.patch(name, &params, &patch).await?,
        Some(sub) => api.patch_subresource(sub, name, &params, &patch).await?,
    })
}

/// Replaces `object` if it is still at the resourceVersion it carries.
pub async fn update(
    client: &Client,
    kind: &ResolvedKind,
    (namespace, name): (Option<&str>, &str),
    field_manager: &str,
    object: &DynamicObject,
) -> Result<DynamicObject, WriteError> {
    let api = api(client, kind, namespace)?;
    Ok(api
        .replace(name, &post_params(field_manager), object)
        .await?)
}
