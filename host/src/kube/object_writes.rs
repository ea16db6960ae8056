//! Writes of whole objects and patches as the plugin asks for them: create, patch
//! (JSON merge or JSON patch, of the object or its status or scale subresource) and
//! update guarded by the resourceVersion, each recorded under the plugin's field
//! manager. The checks happen before (`capabilities`); this is the API call.

use kube::Client;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use serde_json::Value;

use super::discovery::ResolvedKind;
use super::writes::{WriteError, api};
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

/// Patches `name` (or its `subresource`); returns the object as stored.
pub async fn patch(
    client: &Client,
    kind: &ResolvedKind,
    (namespace, name): (Option<&str>, &str),
    field_manager: &str,
    (patch_kind, patch): (PatchKind, &Value),
    subresource: Option<&str>,
) -> Result<DynamicObject, WriteError> {
    let api = api(client, kind, namespace)?;
    let params = PatchParams {
        field_manager: Some(field_manager.to_string()),
        ..Default::default()
    };
    let json_patch;
    let patch = match patch_kind {
        PatchKind::Merge => Patch::Merge(patch),
        PatchKind::Json => {
            json_patch = serde_json::from_value::<json_patch::Patch>(patch.clone())
                .map_err(|e| WriteError::Invalid(format!("not a JSON patch: {e}")))?;
            Patch::Json::<&Value>(json_patch)
        }
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
