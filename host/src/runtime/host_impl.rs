//! The generated WIT host traits, implemented as thin calls into the plugin's
//! [`PluginCluster`] (the live cluster, or the test kit's in-memory one).

use std::sync::Arc;

use crate::bindings::wcm::controller::cluster::Propagation;
use crate::bindings::wcm::controller::{cluster, log, types};
use crate::bindings::{EventType, Gvk, Level, ObjectRef, WitError};
use crate::capabilities::{CapabilityError, PluginCluster, Target, check_kind, check_namespace};
use crate::keys::from_wit_gvk;
use crate::metrics::{HostCallResult, Limit};

use super::state::HostState;

impl HostState {
    /// Counts one host call in `wcm_host_calls_total{plugin,function,result}` and
    /// hands its result on.
    fn counted<T>(
        &self,
        function: &'static str,
        result: Result<T, WitError>,
    ) -> Result<T, WitError> {
        if let Some(access) = &self.access {
            access
                .budget()
                .host_call(function, HostCallResult::of(&result));
        }
        result
    }

    /// The plugin's access and name, owned, for a call's future.
    fn parts(&self) -> (Result<Arc<dyn PluginCluster>, CapabilityError>, Arc<str>) {
        (self.shared_access(), self.plugin.clone())
    }
}

/// The object a plugin names, validated before it can reach a URL.
fn target(op: &str, plugin: &str, obj: ObjectRef) -> Result<Target, CapabilityError> {
    let gvk = from_wit_gvk(&obj.kind);
    Target::checked(op, plugin, gvk, obj.namespace, obj.name)
}

impl types::Host for HostState {}

impl cluster::Host for HostState {
    async fn get(&mut self, obj: ObjectRef) -> Result<String, WitError> {
        let (access, plugin) = self.parts();
        let result = async move {
            let target = target("get", &plugin, obj)?;
            Ok(access?.get(&target)?.to_string())
        };
        let result = result.await;
        self.counted("get", result)
    }

    async fn list(
        &mut self,
        kind: Gvk,
        namespace: Option<String>,
        label_selector: Option<String>,
    ) -> Result<Vec<String>, WitError> {
        let (access, plugin) = self.parts();
        let result = async move {
            let gvk = from_wit_gvk(&kind);
            check_kind("list", &plugin, &gvk)?;
            if let Some(ns) = &namespace {
                check_namespace("list", &plugin, ns)?;
            }
            let found = access?.list(&gvk, namespace.as_deref(), label_selector.as_deref())?;
            Ok(found.iter().map(|j| j.to_string()).collect())
        };
        let result = result.await;
        self.counted("list", result)
    }

    async fn patch_labels(
        &mut self,
        obj: ObjectRef,
        set: Vec<(String, String)>,
        remove: Vec<String>,
    ) -> Result<(), WitError> {
        let (access, plugin) = self.parts();
        let result = async move {
            let target = target("patch-labels", &plugin, obj)?;
            Ok(access?.patch_labels(&target, &set, &remove).await?)
        };
        let result = result.await;
        self.counted("patch-labels", result)
    }

    async fn record_event(
        &mut self,
        regarding: ObjectRef,
        type_: EventType,
        reason: String,
        note: String,
    ) -> Result<(), WitError> {
        let (access, plugin) = self.parts();
        let result = async move {
            let warning = matches!(type_, EventType::Warning);
            let target = target("record-event", &plugin, regarding)?;
            Ok(access?
                .record_event(&target, warning, &reason, &note)
                .await?)
        };
        let result = result.await;
        self.counted("record-event", result)
    }

    async fn apply(&mut self, object: String, force: bool) -> Result<String, WitError> {
        let (access, _) = self.parts();
        let result = async move { Ok(access?.apply(&object, force).await?) };
        let result = result.await;
        self.counted("apply", result)
    }

    async fn patch_status(&mut self, obj: ObjectRef, status: String) -> Result<(), WitError> {
        let (access, plugin) = self.parts();
        let result = async move {
            let target = target("patch-status", &plugin, obj)?;
            Ok(access?.patch_status(&target, &status).await?)
        };
        let result = result.await;
        self.counted("patch-status", result)
    }

    async fn delete(&mut self, obj: ObjectRef, propagation: Propagation) -> Result<(), WitError> {
        let (access, plugin) = self.parts();
        let result = async move {
            let target = target("delete", &plugin, obj)?;
            Ok(access?.delete(&target, propagation).await?)
        };
        let result = result.await;
        self.counted("delete", result)
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
