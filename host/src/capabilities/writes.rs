//! The writing capabilities: labels, whole objects, status, deletion and Events, each
//! checked against the plugin's permissions and made only while this replica leads.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{DynamicObject, Preconditions, PropagationPolicy};
use kube::core::GroupVersionKind;
use serde_json::Value;

use super::head::object_head;
use super::object_writes::parse_object;
use super::{CapabilityError, ClusterAccess, Target, from_kube};
use crate::contract::{DeleteOptions, ErrorCode, EventRecord, Propagation, Verb};
use crate::kube::discovery::{ResolvedKind, display_gvk, split_api_version};
use crate::kube::events::EventError;
use crate::kube::finalizers;
use crate::kube::writes::{self, WriteError};
use crate::logs::escape;
use crate::metrics::Limit;

impl ClusterAccess {
    /// Refuses a write once this replica has stopped leading. Workers cancel their
    /// reconciles when leadership ends; this catches a write already on its way.
    fn require_leader(&self, op: &str) -> Result<(), CapabilityError> {
        match self.leader.is_open() {
            true => Ok(()),
            false => Err(CapabilityError::Unavailable(format!(
                "{op}: this replica does not lead (any more); nothing was written"
            ))),
        }
    }

    /// Admits one API request: this replica leads, and the plugin's API rate allows
    /// it (waiting for it if needed; leadership is checked again after the wait).
    pub(super) async fn admit_request(&self, op: &str) -> Result<(), CapabilityError> {
        self.require_leader(op)?;
        if !self.declared.budget.api_request().await.is_zero() {
            self.require_leader(op)?;
        }
        Ok(())
    }

    /// The API resource of `gvk`, for an error message prefixed with `op`. A lookup
    /// the host has to make for it is a request the plugin caused: it takes a token of
    /// the plugin's API rate and is counted as one of its requests, like a write.
    pub(super) async fn resolve(
        &self,
        op: &str,
        gvk: &GroupVersionKind,
    ) -> Result<ResolvedKind, CapabilityError> {
        let resolver = self.registry.resolver();
        if !resolver.knows(gvk) {
            self.declared.budget.api_request().await;
        }
        resolver
            .resolve(gvk)
            .await
            .map_err(|e| CapabilityError::Invalid(format!("{op}: {e}")))
    }

    /// Read-your-writes: the next reconcile sees this write even if the watch event
    /// has not arrived yet (a stale read would repeat work, like an Event).
    pub(super) fn remember(&self, target: &Target, written: &DynamicObject) {
        for (_, informer) in self.caches_of(&target.gvk, target.namespace.as_deref()) {
            informer.refresh(written);
        }
    }

    /// Sets and removes labels on any object the plugin may patch.
    pub async fn patch_labels(
        &self,
        target: &Target,
        set: &[(String, String)],
        remove: &[String],
    ) -> Result<(), CapabilityError> {
        let op = format!("patch-labels {target}");
        self.declared.require(Verb::Patch, "patch-labels", target)?;
        writes::label_patch(set, remove)
            .map_err(|e| CapabilityError::Invalid(format!("{op}: {e}")))?;
        self.admit_request(&op).await?;
        let kind = self.resolve(&op, &target.gvk).await?;
        let (ns, name) = (target.namespace.as_deref(), &target.name);
        let written = writes::patch_labels(
            &self.client,
            &kind,
            ns,
            name,
            &self.declared.plugin,
            set,
            remove,
        )
        .await
        .map_err(|e| self.refused(&op, e))?;
        self.remember(target, &written);
        Ok(())
    }

    /// Server-side applies a whole object (JSON) as the plugin; returns the stored
    /// object's JSON (without `managedFields`, as the caches hold objects).
    pub async fn apply(&self, object: &str, force: bool) -> Result<String, CapabilityError> {
        let target = object_head("apply", &self.declared.plugin, object, false)?;
        let op = format!("apply {target}");
        self.declared.require(Verb::Apply, "apply", &target)?;
        let value = parse_object("apply", object)?;
        self.admit_request(&op).await?;
        let kind = self.resolve(&op, &target.gvk).await?;
        let (ns, name) = (target.namespace.as_deref(), &target.name);
        let mut written = writes::apply(
            &self.client,
            &kind,
            ns,
            name,
            &self.declared.plugin,
            &value,
            force,
        )
        .await
        .map_err(|e| self.refused(&op, e))?;
        self.remember(&target, &written);
        written.metadata.managed_fields = None;
        serde_json::to_string(&written).map_err(|e| CapabilityError::Other(format!("{op}: {e}")))
    }

    /// Adds and removes finalizers of `target`, leaving the others alone: a read and a
    /// write guarded by the resourceVersion read, tried again (read included) when
    /// someone changed the object in between.
    pub async fn patch_finalizers(
        &self,
        target: &Target,
        add: &[String],
        remove: &[String],
    ) -> Result<(), CapabilityError> {
        const ATTEMPTS: usize = 3;
        let op = format!("patch-finalizers {target}");
        self.declared
            .require(Verb::Patch, "patch-finalizers", target)?;
        finalizers::check(add, remove)
            .map_err(|e| CapabilityError::Invalid(format!("{op}: {e}")))?;
        self.require_leader(&op)?;
        let kind = self.resolve(&op, &target.gvk).await?;
        let at = (target.namespace.as_deref(), target.name.as_str());
        let mut attempt = 1;
        loop {
            self.admit_request(&op).await?;
            let read = (writes::get(&self.client, &kind, at.0, at.1).await)
                .map_err(|e| self.refused(&op, e))?;
            let current = read.metadata.finalizers.clone().unwrap_or_default();
            let wanted = finalizers::changed(&current, add, remove);
            if wanted == current {
                return Ok(());
            }
            let version = read.metadata.resource_version.clone().unwrap_or_default();
            self.admit_request(&op).await?;
            let plugin = &self.declared.plugin;
            let written =
                writes::set_finalizers(&self.client, &kind, at, plugin, &version, &wanted).await;
            match written.map_err(|e| self.refused(&op, e)) {
                Ok(written) => {
                    self.remember(target, &written);
                    return Ok(());
                }
                Err(e) if e.code() == ErrorCode::Conflict && attempt < ATTEMPTS => attempt += 1,
                Err(e) => return Err(e),
            }
        }
    }

    /// Merges `status` (JSON of `.status`) into the status subresource of `target`.
    pub async fn patch_status(&self, target: &Target, status: &str) -> Result<(), CapabilityError> {
        let op = format!("patch-status {target}");
        self.declared
            .require(Verb::PatchStatus, "patch-status", target)?;
        let value: Value = serde_json::from_str(status)
            .map_err(|e| CapabilityError::Invalid(format!("{op}: the status is not JSON: {e}")))?;
        self.admit_request(&op).await?;
        let kind = self.resolve(&op, &target.gvk).await?;
        let (ns, name) = (target.namespace.as_deref(), &target.name);
        let written =
            writes::patch_status(&self.client, &kind, ns, name, &self.declared.plugin, &value)
                .await
                .map_err(|e| self.refused(&op, e))?;
        self.remember(target, &written);
        Ok(())
    }

    /// Deletes `target`, its dependents handled by the options' propagation, if the
    /// uid and resourceVersion preconditions hold.
    pub async fn delete(
        &self,
        target: &Target,
        options: &DeleteOptions,
    ) -> Result<(), CapabilityError> {
        let op = format!("delete {target}");
        self.declared.require(Verb::Delete, "delete", target)?;
        self.admit_request(&op).await?;
        let kind = self.resolve(&op, &target.gvk).await?;
        let preconditions =
            (options.uid.is_some() || options.resource_version.is_some()).then(|| Preconditions {
                uid: options.uid.clone(),
                resource_version: options.resource_version.clone(),
            });
        let policy = match options.propagation {
            Propagation::Background => PropagationPolicy::Background,
            Propagation::Foreground => PropagationPolicy::Foreground,
            Propagation::Orphan => PropagationPolicy::Orphan,
        };
        let (ns, name) = (target.namespace.as_deref(), &target.name);
        writes::delete(&self.client, &kind, ns, name, policy, preconditions)
            .await
            .map_err(|e| self.refused(&op, e))
    }

    /// Records an Event about `regarding`, as the plugin. The plugin may record
    /// Events only about kinds it watches or declared a permission on, and at most
    /// client-go's spam-filter rate per object: Events over it are dropped (counted
    /// in `wcm_plugin_limit_hits_total{limit="events"}`), not failed, since Events
    /// are best-effort and a reconcile must not fail for one.
    pub async fn record_event(
        &self,
        regarding: &Target,
        related: Option<&Target>,
        event: &EventRecord,
    ) -> Result<(), CapabilityError> {
        let op = self.declared.check_event(regarding, related, event)?;
        self.require_leader(&op)?;
        let uid = self.cached_uid(regarding);
        let object = (
            display_gvk(&regarding.gvk),
            regarding.namespace.clone(),
            regarding.name.clone(),
            uid.clone(),
        );
        if !self.declared.budget.events.allow(&object) {
            self.declared.budget.hit(Limit::events);
            tracing::debug!(plugin = %self.declared.plugin, object = %regarding, reason = %escape(&event.reason),
                "event dropped by the spam filter");
            return Ok(());
        }
        self.admit_request(&op).await?;
        let related = related.map(|r| reference(r, self.cached_uid(r)));
        self.recorder
            .record(&reference(regarding, uid), related, event)
            .await
            .map_err(|e| match e {
                EventError::Api(e) => self.noticed(from_kube(&op, &e)),
                other => CapabilityError::Invalid(format!("{op}: {other}")),
            })
    }
}

impl ClusterAccess {
    /// A failed request as the plugin sees it (see [`failed`]), noticed.
    pub(super) fn refused(&self, op: &str, error: WriteError) -> CapabilityError {
        self.noticed(failed(op, error))
    }

    /// `error`, after asking for a review of the plugin's rights at once if the API
    /// server refused the request as forbidden: the plugin's state then names the
    /// rule it lacks within a second, not at the next periodic review.
    pub(super) fn noticed(&self, error: CapabilityError) -> CapabilityError {
        if let CapabilityError::Api(e) = &error
            && e.status == Some(403)
        {
            self.granted.review_soon();
        }
        error
    }

    /// The uid of `target` if the plugin's caches hold it (Events name it).
    fn cached_uid(&self, target: &Target) -> Option<String> {
        self.caches_of(&target.gvk, target.namespace.as_deref())
            .find_map(|(_, i)| i.cache().get(target.namespace.as_deref(), &target.name))
            .and_then(|o| o.uid.clone())
    }
}

/// An Event's reference to `target`.
fn reference(target: &Target, uid: Option<String>) -> ObjectReference {
    ObjectReference {
        api_version: Some(target.gvk.api_version()),
        kind: Some(target.gvk.kind.clone()),
        namespace: target.namespace.clone(),
        name: Some(target.name.clone()),
        uid,
        ..Default::default()
    }
}

/// A failed write as the plugin sees it: API errors by status, the rest invalid input.
pub(super) fn failed(op: &str, error: WriteError) -> CapabilityError {
    match error {
        WriteError::Api(e) => from_kube(op, &e),
        other => CapabilityError::Invalid(format!("{op}: {other}")),
    }
}

/// The object an `apply` addresses, from its `apiVersion`, `kind` and metadata.
pub(crate) fn applied_target(object: &Value) -> Result<Target, String> {
    let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str);
    let api_version = text("/apiVersion").ok_or("has no apiVersion")?;
    let kind = text("/kind").ok_or("has no kind")?;
    let name = text("/metadata/name").ok_or("has no metadata.name")?;
    let (group, version) = split_api_version(api_version);
    Ok(Target {
        gvk: GroupVersionKind::gvk(group, version, kind),
        namespace: text("/metadata/namespace").map(str::to_string),
        name: name.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_applied_object_is_addressed_by_its_api_version_kind_and_metadata() {
        let object = serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop"},
        });
        let target = applied_target(&object).expect("complete");
        assert_eq!(target.to_string(), "apps/v1/Deployment shop/web");
        let core =
            serde_json::json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}});
        assert_eq!(
            applied_target(&core).expect("complete").to_string(),
            "v1/Node n"
        );
        let nameless = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}});
        assert_eq!(
            applied_target(&nameless).expect_err("no name"),
            "has no metadata.name"
        );
    }
}
