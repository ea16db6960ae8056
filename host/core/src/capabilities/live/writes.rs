//! The live cluster's requests as the plugin: a read past the caches, the writes, a
//! deletion and an Event, each on the API resource its kind resolves to, their
//! failures as the API server worded them.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{DynamicObject, Preconditions, PropagationPolicy};

use super::LiveCluster;
use crate::capabilities::{
    CapabilityError, Checked, FinalizerList, LabelPatch, Op, Regarding, Target, Write, from_kube,
};
use crate::contract::{DeleteOptions, EventRecord, Propagation};
use crate::kube::events::EventError;
use crate::kube::object_writes;
use crate::kube::writes::{self, WriteError};

impl LiveCluster {
    /// `target`, read from the API server.
    pub(super) async fn read(
        &self,
        op: &Op,
        target: &Target,
    ) -> Result<DynamicObject, CapabilityError> {
        let kind = self.resolve(op, &target.gvk).await?;
        let (ns, name) = (target.namespace.as_deref(), &target.name);
        (writes::get(&self.client, &kind, ns, name).await).map_err(|e| failed(op, e))
    }

    /// One write, as the plugin's field manager.
    pub(super) async fn write_as_plugin(
        &self,
        op: &Op,
        target: &Target,
        write: Write<'_, Checked>,
    ) -> Result<DynamicObject, CapabilityError> {
        let kind = self.resolve(op, &target.gvk).await?;
        let (client, manager) = (&self.client, self.budget.plugin.as_str());
        let at = (target.namespace.as_deref(), target.name.as_str());
        let written = match write {
            Write::Labels(LabelPatch { patch, .. }) => {
                writes::patch_labels(client, &kind, at, manager, &patch).await
            }
            Write::Finalizers(FinalizerList {
                resource_version,
                finalizers,
            }) => {
                let version = resource_version;
                writes::set_finalizers(client, &kind, at, manager, version, finalizers).await
            }
            Write::Status(status) => {
                writes::patch_status(client, &kind, at.0, at.1, manager, status).await
            }
            Write::Apply { object, force } => {
                writes::apply(client, &kind, at.0, at.1, manager, object, force).await
            }
            Write::Create(object) => {
                object_writes::create(client, &kind, at.0, manager, object).await
            }
            Write::Patch { body, subresource } => {
                object_writes::patch(client, &kind, at, manager, body, subresource).await
            }
            Write::Update(object) => {
                object_writes::update(client, &kind, at, manager, object).await
            }
            Write::Delete(never) => match never {},
        };
        written.map_err(|e| failed(op, e))
    }

    /// Deletes `target` with the options' propagation and preconditions.
    pub(super) async fn delete_as_plugin(
        &self,
        op: &Op,
        target: &Target,
        options: &DeleteOptions,
    ) -> Result<(), CapabilityError> {
        let kind = self.resolve(op, &target.gvk).await?;
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
        (writes::delete(&self.client, &kind, ns, name, policy, preconditions).await)
            .map_err(|e| failed(op, e))
    }

    /// Records `event` through the plugin's recorder (which folds repeats into series).
    pub(super) async fn record_as_plugin(
        &self,
        op: &Op,
        (regarding, uid): Regarding<'_>,
        related: Option<Regarding<'_>>,
        event: &EventRecord,
    ) -> Result<(), CapabilityError> {
        let related = related.map(|(target, uid)| reference(target, uid));
        (self.recorder)
            .record(&reference(regarding, uid), related, event)
            .await
            .map_err(|e| match e {
                EventError::Api(e) => from_kube(op, &e),
                other => op.invalid(other),
            })
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

/// A failed request as the plugin sees it: API errors by status, the rest invalid
/// input.
fn failed(op: &Op, error: WriteError) -> CapabilityError {
    match error {
        WriteError::Api(e) => from_kube(op, &e),
        other => op.invalid(other),
    }
}
