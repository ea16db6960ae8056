//! The in-memory cluster's `create`, `patch` and `update`: the live cluster's checks
//! (the same functions), then the store's write, recorded for the report.

use serde_json::{Value, json};

use super::memory::MemoryCluster;
use super::report::Write;
use super::store::{StoreError, apply_patch};
use crate::capabilities::{
    CapabilityError, Target, object_target, patch_value, patch_verb, require_version,
};
use crate::contract::{PatchKind, Verb};
use crate::kube::object_writes::PatchBody;

/// An object's Scale, as the scale subresource shows it.
fn scale_of(object: &Value) -> Value {
    let replicas = object
        .pointer("/spec/replicas")
        .cloned()
        .unwrap_or(json!(1));
    json!({
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {
            "name": object.pointer("/metadata/name"),
            "namespace": object.pointer("/metadata/namespace"),
            "resourceVersion": object.pointer("/metadata/resourceVersion"),
        },
        "spec": {"replicas": replicas},
        "status": {"replicas": object.pointer("/status/replicas").cloned().unwrap_or(json!(0))},
    })
}

impl MemoryCluster {
    /// `create`: the stored object's JSON.
    pub(super) fn create_now(&self, json: &str) -> Result<String, CapabilityError> {
        let (value, target) = object_target("create", &self.declared.plugin, json, true)?;
        let mut write = Write::new("create", &target);
        write.applied = Some(value.clone());
        let result = self.created(&target, &value);
        self.recorded(write, result)
    }

    fn created(&self, target: &Target, value: &Value) -> Result<String, CapabilityError> {
        let op = format!("create {target}");
        self.declared.require(Verb::Create, "create", target)?;
        self.check_scope(&op, target)?;
        let mut id = self.id(target);
        if value.pointer("/metadata/name").is_none() {
            id.name = String::new(); // generated
        }
        let mut world = self.world();
        let plugin = &self.declared.plugin;
        let (id, stored, changed) =
            (world.store.create(id, value, plugin)).map_err(|e| Self::failed(&op, target, e))?;
        world.changes.push((id, changed));
        Ok(stored.to_string())
    }

    /// `patch`: the stored object's JSON (a Scale for the scale subresource).
    pub(super) fn patch_now(
        &self,
        target: &Target,
        kind: PatchKind,
        patch: &str,
        subresource: Option<&str>,
    ) -> Result<String, CapabilityError> {
        let op = format!("patch {target}");
        let body = patch_value(&op, kind, patch)?;
        let mut write = Write::new("patch", target);
        let mut described = json!({"type": body.kind_name(), "body": body.to_value()});
        if let Some(sub) = subresource {
            described["subresource"] = json!(sub);
        }
        write.patch = Some(described);
        let result = self.patched(&op, target, &body, subresource);
        self.recorded(write, result)
    }

    fn patched(
        &self,
        op: &str,
        target: &Target,
        body: &PatchBody,
        subresource: Option<&str>,
    ) -> Result<String, CapabilityError> {
        self.declared
            .require(patch_verb(op, subresource)?, "patch", target)?;
        if subresource == Some("scale") {
            return self.scaled(op, target, body);
        }
        let id = self.id(target);
        let mut world = self.world();
        let plugin = &self.declared.plugin;
        let (stored, changed) = (world.store.patch(&id, body, subresource, plugin))
            .map_err(|e| Self::failed(op, target, e))?;
        world.changes.extend(changed.map(|c| (id, c)));
        Ok(stored.to_string())
    }

    /// A patch of the scale subresource: applied to the object's Scale (its
    /// `spec.replicas`, 1 when unset), whose replicas then go into the object; returns
    /// the Scale.
    fn scaled(
        &self,
        op: &str,
        target: &Target,
        body: &PatchBody,
    ) -> Result<String, CapabilityError> {
        let id = self.id(target);
        let mut world = self.world();
        let current = (world.store.get(&id).cloned())
            .ok_or_else(|| Self::failed(op, target, StoreError::NotFound))?;
        let mut scale = scale_of(&current);
        apply_patch(body, &mut scale).map_err(|e| Self::failed(op, target, e))?;
        let replicas = json!({"spec": {"replicas": scale.pointer("/spec/replicas")}});
        let replicas = PatchBody::Merge(replicas);
        let plugin = &self.declared.plugin;
        let (stored, changed) = (world.store.patch(&id, &replicas, None, plugin))
            .map_err(|e| Self::failed(op, target, e))?;
        world.changes.extend(changed.map(|c| (id, c)));
        Ok(scale_of(&stored).to_string())
    }

    /// `update`: the stored object's JSON.
    pub(super) fn update_now(&self, json: &str) -> Result<String, CapabilityError> {
        let (value, target) = object_target("update", &self.declared.plugin, json, false)?;
        let mut write = Write::new("update", &target);
        write.applied = Some(value.clone());
        let result = self.updated(&target, &value);
        self.recorded(write, result)
    }

    fn updated(&self, target: &Target, value: &Value) -> Result<String, CapabilityError> {
        let op = format!("update {target}");
        self.declared.require(Verb::Update, "update", target)?;
        require_version(&op, value)?;
        let id = self.id(target);
        let mut world = self.world();
        let (stored, changed) = (world.store.replace(&id, value, &self.declared.plugin))
            .map_err(|e| Self::failed(&op, target, e))?;
        world.changes.extend(changed.map(|c| (id, c)));
        Ok(stored.to_string())
    }
}
