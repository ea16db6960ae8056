//! The generated WIT host traits, implemented as thin calls into [`ClusterAccess`].

use crate::bindings::wcm::controller::cluster::Propagation;
use crate::bindings::wcm::controller::{cluster, log, types};
use crate::bindings::{EventType, Gvk, Level, ObjectRef, WitError};
use crate::capabilities::Target;
use crate::keys::from_wit_gvk;

use super::state::HostState;

fn target(obj: &ObjectRef) -> Target {
    Target {
        gvk: from_wit_gvk(&obj.kind),
        namespace: obj.namespace.clone(),
        name: obj.name.clone(),
    }
}

impl types::Host for HostState {}

impl cluster::Host for HostState {
    async fn get(&mut self, obj: ObjectRef) -> Result<String, WitError> {
        Ok(self.access()?.get(&target(&obj))?.to_string())
    }

    async fn list(
        &mut self,
        kind: Gvk,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> Result<Vec<String>, WitError> {
        let found = self.access()?.list(
            &from_wit_gvk(&kind),
            namespace.as_deref(),
            label_selector.as_deref(),
        )?;
        Ok(found.iter().map(|j| j.to_string()).collect())
    }

    async fn patch_labels(
        &mut self,
        obj: ObjectRef,
        set: Vec<(String, String)>,
        remove: Vec<String>,
    ) -> Result<(), WitError> {
        let access = self.access()?;
        Ok(access.patch_labels(&target(&obj), &set, &remove).await?)
    }

    async fn record_event(
        &mut self,
        regarding: ObjectRef,
        type_: EventType,
        reason: String,
        note: String,
    ) -> Result<(), WitError> {
        let warning = matches!(type_, EventType::Warning);
        let access = self.access()?;
        Ok(access
            .record_event(&target(&regarding), warning, &reason, &note)
            .await?)
    }

    async fn apply(&mut self, object: String, force: bool) -> Result<String, WitError> {
        Ok(self.access()?.apply(&object, force).await?)
    }

    async fn patch_status(&mut self, obj: ObjectRef, status: String) -> Result<(), WitError> {
        Ok(self.access()?.patch_status(&target(&obj), &status).await?)
    }

    async fn delete(&mut self, obj: ObjectRef, propagation: Propagation) -> Result<(), WitError> {
        Ok(self.access()?.delete(&target(&obj), propagation).await?)
    }
}

impl log::Host for HostState {
    async fn log(&mut self, level: Level, message: String) {
        let (plugin, key) = (&*self.plugin, self.key.as_deref().unwrap_or("-"));
        match level {
            Level::Trace => tracing::trace!(plugin, key, "{message}"),
            Level::Debug => tracing::debug!(plugin, key, "{message}"),
            Level::Info => tracing::info!(plugin, key, "{message}"),
            Level::Warn => tracing::warn!(plugin, key, "{message}"),
            Level::Error => tracing::error!(plugin, key, "{message}"),
        }
    }
}
