//! The generated WIT host traits, implemented as thin calls into [`ClusterAccess`].

use crate::bindings::wcm::controller::cluster::Propagation;
use crate::bindings::wcm::controller::{cluster, log, types};
use crate::bindings::{EventType, Gvk, Level, ObjectRef, WitError};
use crate::capabilities::{CapabilityError, Target, check_kind, check_namespace};
use crate::keys::from_wit_gvk;
use crate::metrics::Limit;

use super::state::HostState;

impl HostState {
    /// The object a plugin names, validated before it can reach a URL.
    fn target(&self, op: &str, obj: ObjectRef) -> Result<Target, CapabilityError> {
        let gvk = from_wit_gvk(&obj.kind);
        Target::checked(op, &self.plugin, gvk, obj.namespace, obj.name)
    }
}

impl types::Host for HostState {}

impl cluster::Host for HostState {
    async fn get(&mut self, obj: ObjectRef) -> Result<String, WitError> {
        let target = self.target("get", obj)?;
        Ok(self.access()?.get(&target)?.to_string())
    }

    async fn list(
        &mut self,
        kind: Gvk,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> Result<Vec<String>, WitError> {
        let gvk = from_wit_gvk(&kind);
        check_kind("list", &self.plugin, &gvk)?;
        if let Some(ns) = &namespace {
            check_namespace("list", &self.plugin, ns)?;
        }
        let found = self
            .access()?
            .list(&gvk, namespace.as_deref(), label_selector.as_deref())?;
        Ok(found.iter().map(|j| j.to_string()).collect())
    }

    async fn patch_labels(
        &mut self,
        obj: ObjectRef,
        set: Vec<(String, String)>,
        remove: Vec<String>,
    ) -> Result<(), WitError> {
        let target = self.target("patch-labels", obj)?;
        let access = self.access()?;
        Ok(access.patch_labels(&target, &set, &remove).await?)
    }

    async fn record_event(
        &mut self,
        regarding: ObjectRef,
        type_: EventType,
        reason: String,
        note: String,
    ) -> Result<(), WitError> {
        let warning = matches!(type_, EventType::Warning);
        let target = self.target("record-event", regarding)?;
        let access = self.access()?;
        Ok(access
            .record_event(&target, warning, &reason, &note)
            .await?)
    }

    async fn apply(&mut self, object: String, force: bool) -> Result<String, WitError> {
        Ok(self.access()?.apply(&object, force).await?)
    }

    async fn patch_status(&mut self, obj: ObjectRef, status: String) -> Result<(), WitError> {
        let target = self.target("patch-status", obj)?;
        Ok(self.access()?.patch_status(&target, &status).await?)
    }

    async fn delete(&mut self, obj: ObjectRef, propagation: Propagation) -> Result<(), WitError> {
        let target = self.target("delete", obj)?;
        Ok(self.access()?.delete(&target, propagation).await?)
    }
}

impl log::Host for HostState {
    /// Logs the plugin's line, escaped and cut to size, within its log rate.
    async fn log(&mut self, level: Level, message: String) {
        let Some(line) = self.logs.admit(&message) else {
            return;
        };
        let (plugin, key) = (&*self.plugin, self.key.as_deref().unwrap_or("-"));
        if line.dropped_before > 0 {
            tracing::warn!(
                plugin,
                dropped = line.dropped_before,
                "plugin log lines dropped: over its log rate (--plugin-log-rate)"
            );
        }
        if let (true, Some(access)) = (line.was_cut, &self.access) {
            access.budget().hit(Limit::log_size);
        }
        let message = line.message;
        match level {
            Level::Trace => tracing::trace!(plugin, key, "{message}"),
            Level::Debug => tracing::debug!(plugin, key, "{message}"),
            Level::Info => tracing::info!(plugin, key, "{message}"),
            Level::Warn => tracing::warn!(plugin, key, "{message}"),
            Level::Error => tracing::error!(plugin, key, "{message}"),
        }
    }
}
