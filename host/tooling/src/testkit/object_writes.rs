//! The in-memory cluster's `create`, `patch` (the scale subresource included) and
//! `update`, made on the store as the API server would make them.

use kube::api::DynamicObject;
use serde_json::{Value, json};

use super::memory::MemoryCluster;
use super::store::{StoreError, apply_patch};
use super::writes::failed;
use wcm_core::capabilities::{CapabilityError, Op, Target};
use wcm_core::kube::object_writes::PatchBody;

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
    /// Creates `object` (its name generated when it has none); returns it as stored.
    pub(super) fn created(
        &self,
        op: &Op,
        target: &Target,
        object: &DynamicObject,
    ) -> Result<Value, CapabilityError> {
        self.check_scope(op, target)?;
        let value = serde_json::to_value(object).map_err(|e| op.host_fault(e))?;
        let mut id = self.id(target);
        if object.metadata.name.is_none() {
            id.name = String::new(); // generated
        }
        let mut world = self.world();
        let plugin = &self.plugin;
        let (id, stored, changed) =
            (world.store.create(id, &value, plugin)).map_err(|e| failed(op, target, e))?;
        world.changes.push((id, changed));
        Ok(stored)
    }

    /// Patches `target` or its `subresource`; returns the object (a Scale for the
    /// scale subresource).
    pub(super) fn patched(
        &self,
        op: &Op,
        target: &Target,
        body: &PatchBody,
        subresource: Option<&str>,
    ) -> Result<Value, CapabilityError> {
        if subresource == Some("scale") {
            return self.scaled(op, target, body);
        }
        let id = self.id(target);
        let mut world = self.world();
        let (stored, changed) = (world.store.patch(&id, body, subresource, &self.plugin))
            .map_err(|e| failed(op, target, e))?;
        world.changes.extend(changed.map(|c| (id, c)));
        Ok(stored)
    }

    /// A patch of the scale subresource: applied to the object's Scale (its
    /// `spec.replicas`, 1 when unset), whose replicas then go into the object; returns
    /// the Scale.
    fn scaled(&self, op: &Op, target: &Target, body: &PatchBody) -> Result<Value, CapabilityError> {
        let id = self.id(target);
        let mut world = self.world();
        let current = (world.store.get(&id).cloned())
            .ok_or_else(|| failed(op, target, StoreError::NotFound))?;
        let mut scale = scale_of(&current);
        apply_patch(body, &mut scale).map_err(|e| failed(op, target, e))?;
        let replicas = json!({"spec": {"replicas": scale.pointer("/spec/replicas")}});
        let replicas = PatchBody::Merge(replicas);
        let (stored, changed) = (world.store.patch(&id, &replicas, None, &self.plugin))
            .map_err(|e| failed(op, target, e))?;
        world.changes.extend(changed.map(|c| (id, c)));
        Ok(scale_of(&stored))
    }

    /// Replaces `target` with `object`, which must be at the stored resourceVersion.
    pub(super) fn updated(
        &self,
        op: &Op,
        target: &Target,
        object: &DynamicObject,
    ) -> Result<Value, CapabilityError> {
        let value = serde_json::to_value(object).map_err(|e| op.host_fault(e))?;
        let id = self.id(target);
        let mut world = self.world();
        let (stored, changed) =
            (world.store.replace(&id, &value, &self.plugin)).map_err(|e| failed(op, target, e))?;
        world.changes.extend(changed.map(|c| (id, c)));
        Ok(stored)
    }
}
