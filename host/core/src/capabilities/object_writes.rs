//! Writing whole objects and patches as the plugin — `apply`, `create`, `patch`,
//! `update` — each as one pipeline: the target read from the object (or given), the
//! declared verb, the body parsed and shaped, admission, the backend, read-your-writes
//! and the stored object within the result size.

use kube::api::DynamicObject;
use serde_json::Value;

use super::backend::{AskedWrite, Write};
use super::head::object_head;
use super::{CapabilityError, ClusterAccess, Op, Target};
use crate::contract::{Capability, PatchKind, Verb};
use crate::kube::object_writes::{PatchBody, SUBRESOURCES};
use crate::logs::shorten;

impl ClusterAccess {
    /// Server-side applies a whole object (JSON) as the plugin; returns the stored
    /// object's JSON.
    pub async fn apply(&self, json: &str, force: bool) -> Result<String, CapabilityError> {
        let call = Capability::Apply.name();
        let target = object_head(call, &self.declared.plugin, json, false)?;
        let op = Op::on(call, &target);
        let request = AskedWrite::Apply {
            object: json,
            force,
        };
        self.journaled(&target, request, async {
            self.declared.require(Verb::Apply, call, &target)?;
            let object = parse_object(call, json)?;
            let write = Write::Apply {
                object: &object,
                force,
            };
            let written = self.admit_and_write(&op, &target, write).await?;
            self.kept(&op, &target, written)
        })
        .await
    }

    /// Creates the object `json` (named, or with `metadata.generateName`); returns it
    /// as stored.
    pub async fn create(&self, json: &str) -> Result<String, CapabilityError> {
        let call = Capability::Create.name();
        let target = object_head(call, &self.declared.plugin, json, true)?;
        let op = Op::on(call, &target);
        self.journaled(&target, AskedWrite::Create(json), async {
            self.declared.require(Verb::Create, call, &target)?;
            let object = dynamic(&op, parse_object(call, json)?)?;
            let written = self
                .admit_and_write(&op, &target, Write::Create(&object))
                .await?;
            let stored = Target {
                name: written.metadata.name.clone().unwrap_or_default(),
                ..target.clone()
            };
            self.kept(&op, &stored, written)
        })
        .await
    }

    /// Patches `target` or its `subresource` (`status`, `scale`).
    pub async fn patch(
        &self,
        target: &Target,
        kind: PatchKind,
        patch: &str,
        subresource: Option<&str>,
    ) -> Result<String, CapabilityError> {
        let call = Capability::Patch.name();
        let op = Op::on_part(call, target, subresource);
        let request = AskedWrite::Patch {
            body: (kind, patch),
            subresource,
        };
        self.journaled(target, request, async {
            let verb = patch_verb(&op, subresource)?;
            self.declared.require(verb, call, target)?;
            let body = patch_value(&op, kind, patch)?;
            let write = Write::Patch { body, subresource };
            let written = self.admit_and_write(&op, target, write).await?;
            match subresource {
                // A scale subresource answers with a Scale, not the object.
                Some("scale") => self.answer(&op, written),
                _ => self.kept(&op, target, written),
            }
        })
        .await
    }

    /// Replaces an object that carries the resourceVersion it was read at.
    pub async fn update(&self, json: &str) -> Result<String, CapabilityError> {
        let call = Capability::Update.name();
        let target = object_head(call, &self.declared.plugin, json, false)?;
        let op = Op::on(call, &target);
        self.journaled(&target, AskedWrite::Update(json), async {
            self.declared.require(Verb::Update, call, &target)?;
            let value = parse_object(call, json)?;
            require_version(&op, &value)?;
            let object = dynamic(&op, value)?;
            let written = self
                .admit_and_write(&op, &target, Write::Update(&object))
                .await?;
            self.kept(&op, &target, written)
        })
        .await
    }

    /// The stored object, read back into the caches that hold `target`, as the
    /// plugin gets it.
    fn kept(
        &self,
        op: &Op,
        target: &Target,
        written: DynamicObject,
    ) -> Result<String, CapabilityError> {
        self.backend.remember(target, &written);
        self.answer(op, written)
    }
}

/// The object a plugin passed to `call`, parsed whole.
fn parse_object(call: &str, json: &str) -> Result<Value, CapabilityError> {
    serde_json::from_str(json)
        .map_err(|e| CapabilityError::Invalid(format!("{call}: the object is not JSON: {e}")))
}

/// The verb a patch of `subresource` needs; refused for a subresource no plugin may
/// patch.
fn patch_verb(op: &Op, subresource: Option<&str>) -> Result<Verb, CapabilityError> {
    match subresource {
        None => Ok(Verb::Patch),
        Some("status") => Ok(Verb::PatchStatus),
        Some("scale") => Ok(Verb::PatchScale),
        Some(other) => Err(op.invalid(format!(
            "subresource {:?} is not one a plugin may patch ({})",
            shorten(other),
            SUBRESOURCES.join(", ")
        ))),
    }
}

/// Refuses an update without the resourceVersion it was read at.
fn require_version(op: &Op, object: &Value) -> Result<(), CapabilityError> {
    match object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
    {
        Some(_) => Ok(()),
        None => Err(op.invalid(
            "the object has no metadata.resourceVersion; update what you read (or use \
             apply or a patch)",
        )),
    }
}

/// The object a plugin passed, shaped as a Kubernetes object (typed metadata).
fn dynamic(op: &Op, value: Value) -> Result<DynamicObject, CapabilityError> {
    serde_json::from_value(value).map_err(|e| op.invalid(format!("not a Kubernetes object: {e}")))
}

/// A patch as its kind says it must be shaped, parsed once.
fn patch_value(op: &Op, kind: PatchKind, patch: &str) -> Result<PatchBody, CapabilityError> {
    let invalid = |why: String| op.invalid(format!("the patch {why}"));
    let value: Value =
        serde_json::from_str(patch).map_err(|e| invalid(format!("is not JSON: {e}")))?;
    PatchBody::parse(kind, value).map_err(invalid)
}
