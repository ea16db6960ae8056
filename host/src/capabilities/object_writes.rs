//! Creating, patching and updating objects as the plugin: the object or patch parsed
//! and its target checked before anything is sent, the verb required, the API rate
//! and leadership admitted, and the stored object read back into the caches.

use kube::api::DynamicObject;
use serde_json::Value;

use super::head::object_head;
use super::{CapabilityError, ClusterAccess, Target};
use crate::contract::{PatchKind, Verb};
use crate::kube::object_writes::{self, PatchBody, SUBRESOURCES};
use crate::logs::shorten;

impl ClusterAccess {
    /// Creates the object `json` (named, or with `metadata.generateName`); returns it
    /// as stored.
    pub async fn create(&self, json: &str) -> Result<String, CapabilityError> {
        let target = object_head("create", &self.declared.plugin, json, true)?;
        let op = format!("create {target}");
        self.declared.require(Verb::Create, "create", &target)?;
        let object = dynamic(&op, parse_object("create", json)?)?;
        self.admit_request(&op).await?;
        let kind = self.resolve(&op, &target.gvk).await?;
        let ns = target.namespace.as_deref();
        let plugin = &self.declared.plugin;
        let written = (object_writes::create(&self.client, &kind, ns, plugin, &object).await)
            .map_err(|e| self.refused(&op, e))?;
        let stored = Target {
            name: written.metadata.name.clone().unwrap_or_default(),
            ..target
        };
        self.answer(&op, &stored, written, true)
    }

    /// Patches `target` or its `subresource` (`status`, `scale`).
    pub async fn patch(
        &self,
        target: &Target,
        kind: PatchKind,
        patch: &str,
        subresource: Option<&str>,
    ) -> Result<String, CapabilityError> {
        let op = match subresource {
            Some(sub) => format!("patch {target} ({})", shorten(sub)),
            None => format!("patch {target}"),
        };
        let verb = patch_verb(&op, subresource)?;
        self.declared.require(verb, "patch", target)?;
        let body = patch_value(&op, kind, patch)?;
        self.admit_request(&op).await?;
        let resolved = self.resolve(&op, &target.gvk).await?;
        let at = (target.namespace.as_deref(), target.name.as_str());
        let plugin = &self.declared.plugin;
        let written = object_writes::patch(&self.client, &resolved, at, plugin, body, subresource)
            .await
            .map_err(|e| self.refused(&op, e))?;
        // A scale subresource answers with a Scale, not the object.
        self.answer(&op, target, written, subresource != Some("scale"))
    }

    /// Replaces an object that carries the resourceVersion it was read at.
    pub async fn update(&self, json: &str) -> Result<String, CapabilityError> {
        let target = object_head("update", &self.declared.plugin, json, false)?;
        let op = format!("update {target}");
        self.declared.require(Verb::Update, "update", &target)?;
        let value = parse_object("update", json)?;
        require_version(&op, &value)?;
        let object = dynamic(&op, value)?;
        self.admit_request(&op).await?;
        let kind = self.resolve(&op, &target.gvk).await?;
        let at = (target.namespace.as_deref(), target.name.as_str());
        let plugin = &self.declared.plugin;
        let written = (object_writes::update(&self.client, &kind, at, plugin, &object).await)
            .map_err(|e| self.refused(&op, e))?;
        self.answer(&op, &target, written, true)
    }

    /// The stored object as the plugin gets it: managedFields removed, within its
    /// result size, and read back into the caches when it is the object itself.
    fn answer(
        &self,
        op: &str,
        target: &Target,
        mut written: DynamicObject,
        is_object: bool,
    ) -> Result<String, CapabilityError> {
        if is_object {
            self.remember(target, &written);
        }
        written.metadata.managed_fields = None;
        let json = serde_json::to_string(&written)
            .map_err(|e| CapabilityError::Other(format!("{op}: {e}")))?;
        self.declared.check_result_size(op, json.len())?;
        Ok(json)
    }
}

/// The object a plugin passed, parsed, and its checked target; `generate` accepts a
/// `metadata.generateName` in place of a name (see [`object_head`]).
pub(crate) fn object_target(
    call: &str,
    plugin: &str,
    json: &str,
    generate: bool,
) -> Result<(Value, Target), CapabilityError> {
    let target = object_head(call, plugin, json, generate)?;
    Ok((parse_object(call, json)?, target))
}

/// The object a plugin passed to `call`, parsed whole.
pub(crate) fn parse_object(call: &str, json: &str) -> Result<Value, CapabilityError> {
    serde_json::from_str(json)
        .map_err(|e| CapabilityError::Invalid(format!("{call}: the object is not JSON: {e}")))
}

/// The verb a patch of `subresource` needs; refused for a subresource no plugin may
/// patch.
pub(crate) fn patch_verb(op: &str, subresource: Option<&str>) -> Result<Verb, CapabilityError> {
    match subresource {
        None => Ok(Verb::Patch),
        Some("status") => Ok(Verb::PatchStatus),
        Some("scale") => Ok(Verb::PatchScale),
        Some(other) => Err(CapabilityError::Invalid(format!(
            "{op}: subresource {:?} is not one a plugin may patch ({})",
            shorten(other),
            SUBRESOURCES.join(", ")
        ))),
    }
}

/// Refuses an update without the resourceVersion it was read at.
pub(crate) fn require_version(op: &str, object: &Value) -> Result<(), CapabilityError> {
    match object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
    {
        Some(_) => Ok(()),
        None => Err(CapabilityError::Invalid(format!(
            "{op}: the object has no metadata.resourceVersion; update what you read \
             (or use apply or a patch)"
        ))),
    }
}

/// The JSON of an object as kube sends it.
fn dynamic(op: &str, value: Value) -> Result<DynamicObject, CapabilityError> {
    serde_json::from_value(value)
        .map_err(|e| CapabilityError::Invalid(format!("{op}: not a Kubernetes object: {e}")))
}

/// A patch as its kind says it must be shaped, parsed once.
pub(crate) fn patch_value(
    op: &str,
    kind: PatchKind,
    patch: &str,
) -> Result<PatchBody, CapabilityError> {
    let invalid = |why: String| CapabilityError::Invalid(format!("{op}: the patch {why}"));
    let value: Value =
        serde_json::from_str(patch).map_err(|e| invalid(format!("is not JSON: {e}")))?;
    PatchBody::parse(kind, value).map_err(invalid)
}
