//! The writing capabilities on a named object — labels, finalizers, status, deletion
//! and Events — each as one pipeline: the declared verb, the body's shape, admission
//! (leadership, the API rate), the backend, read-your-writes; and the admission and
//! journal every write shares.

use std::future::Future;

use kube::api::DynamicObject;
use serde_json::Value;

use super::backend::{
    AskedWrite, Checked, FinalizerChange, FinalizerList, LabelChange, LabelPatch, Write,
};
use super::{CapabilityError, ClusterAccess, Op, Target};
use crate::contract::{Capability, DeleteOptions, ErrorCode, EventRecord, Verb};
use crate::kube::discovery::display_gvk;
use crate::kube::finalizers;
use crate::kube::writes::label_patch;
use crate::limits::Limit;
use crate::logs::escape;

/// How often `patch-finalizers` reads and writes again when someone else changed the
/// object in between.
const FINALIZER_ATTEMPTS: usize = 3;

impl ClusterAccess {
    /// Refuses a write once this replica has stopped leading. Workers cancel their
    /// reconciles when leadership ends; this catches a write already on its way.
    fn require_leader(&self, op: &Op) -> Result<(), CapabilityError> {
        match self.leader.is_open() {
            true => Ok(()),
            false => {
                Err(op.unavailable("this replica does not lead (any more); nothing was written"))
            }
        }
    }

    /// Admits one API request: this replica leads, and the plugin's API rate allows
    /// it (waiting for it if needed; leadership is checked again after the wait).
    pub(super) async fn admit(&self, op: &Op) -> Result<(), CapabilityError> {
        self.require_leader(op)?;
        if !self.declared.budget.api_request().await.is_zero() {
            self.require_leader(op)?;
        }
        Ok(())
    }

    /// `error`, after asking for a review of the plugin's rights at once if the API
    /// server refused the request as forbidden: the plugin's state then names the
    /// rule it lacks within a second, not at the next periodic review.
    pub(super) fn review_if_forbidden(&self, error: CapabilityError) -> CapabilityError {
        if let CapabilityError::Api(e) = &error
            && e.status == Some(403)
        {
            self.granted.review_soon();
        }
        error
    }

    /// Admits and makes one write of a kind the cluster serves; returns what was
    /// stored.
    pub(super) async fn admit_and_write<'a>(
        &'a self,
        op: &'a Op,
        target: &'a Target,
        write: Write<'a, Checked>,
    ) -> Result<DynamicObject, CapabilityError> {
        self.backend.served(op, &target.gvk).await?;
        self.admit(op).await?;
        (self.backend.write(op, target, write).await).map_err(|e| self.review_if_forbidden(e))
    }

    /// Runs the checks and write of `request` on `target`, noting in the backend's
    /// journal how it ended.
    pub(super) async fn journaled<T>(
        &self,
        target: &Target,
        request: AskedWrite<'_>,
        work: impl Future<Output = Result<T, CapabilityError>>,
    ) -> Result<T, CapabilityError> {
        let result = work.await;
        self.backend.journal(target, request, result.as_ref().err());
        result
    }

    /// Sets and removes labels on any object the plugin may patch.
    pub async fn patch_labels(
        &self,
        target: &Target,
        set: &[(String, String)],
        remove: &[String],
    ) -> Result<(), CapabilityError> {
        let call = Capability::PatchLabels.name();
        let op = Op::on(call, target);
        let change = LabelChange { set, remove };
        self.journaled(target, AskedWrite::Labels(change), async {
            self.declared.require(Verb::Patch, call, target)?;
            let patch = label_patch(set, remove).map_err(|e| op.invalid(e))?;
            let write = Write::Labels(LabelPatch { change, patch });
            let written = self.admit_and_write(&op, target, write).await?;
            self.backend.remember(target, &written);
            Ok(())
        })
        .await
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
        let call = Capability::PatchFinalizers.name();
        let op = Op::on(call, target);
        let request = AskedWrite::Finalizers(FinalizerChange { add, remove });
        self.journaled(target, request, async {
            self.declared.require(Verb::Patch, call, target)?;
            finalizers::check(add, remove).map_err(|e| op.invalid(e))?;
            self.require_leader(&op)?;
            self.backend.served(&op, &target.gvk).await?;
            let mut attempt = 1;
            loop {
                match self.finalizers_once(&op, target, add, remove).await {
                    Err(e) if e.code() == ErrorCode::Conflict && attempt < FINALIZER_ATTEMPTS => {
                        attempt += 1
                    }
                    done => return done,
                }
            }
        })
        .await
    }

    /// One read of `target`'s finalizers and, if they change, one write of them at the
    /// resourceVersion read.
    async fn finalizers_once(
        &self,
        op: &Op,
        target: &Target,
        add: &[String],
        remove: &[String],
    ) -> Result<(), CapabilityError> {
        self.admit(op).await?;
        let read = (self.backend.get(op, target).await).map_err(|e| self.review_if_forbidden(e))?;
        let current = read.metadata.finalizers.clone().unwrap_or_default();
        let wanted = finalizers::changed(&current, add, remove);
        if wanted == current {
            return Ok(());
        }
        let version = read.metadata.resource_version.clone().unwrap_or_default();
        let write = Write::Finalizers(FinalizerList {
            resource_version: &version,
            finalizers: &wanted,
        });
        let written = self.admit_and_write(op, target, write).await?;
        self.backend.remember(target, &written);
        Ok(())
    }

    /// Merges `status` (JSON of `.status`) into the status subresource of `target`.
    pub async fn patch_status(&self, target: &Target, status: &str) -> Result<(), CapabilityError> {
        let call = Capability::PatchStatus.name();
        let op = Op::on(call, target);
        self.journaled(target, AskedWrite::Status(status), async {
            self.declared.require(Verb::PatchStatus, call, target)?;
            let value: Value = (serde_json::from_str(status))
                .map_err(|e| op.invalid(format!("the status is not JSON: {e}")))?;
            let written = self
                .admit_and_write(&op, target, Write::Status(&value))
                .await?;
            self.backend.remember(target, &written);
            Ok(())
        })
        .await
    }

    /// Deletes `target`, its dependents handled by the options' propagation, if the
    /// uid and resourceVersion preconditions hold.
    pub async fn delete(
        &self,
        target: &Target,
        options: &DeleteOptions,
    ) -> Result<(), CapabilityError> {
        let call = Capability::Delete.name();
        let op = Op::on(call, target);
        self.journaled(target, AskedWrite::Delete(options), async {
            self.declared.require(Verb::Delete, call, target)?;
            self.backend.served(&op, &target.gvk).await?;
            self.admit(&op).await?;
            let deleted = self.backend.delete(&op, target, options).await;
            deleted.map_err(|e| self.review_if_forbidden(e))
        })
        .await
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
        let op = Op::named(self.declared.check_event(regarding, related, event)?);
        self.require_leader(&op)?;
        let uid = self.backend.uid(regarding);
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
        self.admit(&op).await?;
        let related = related.map(|r| (r, self.backend.uid(r)));
        let recorded = (self.backend)
            .record_event(&op, (regarding, uid), related, event)
            .await;
        recorded.map_err(|e| self.review_if_forbidden(e))
    }
}
