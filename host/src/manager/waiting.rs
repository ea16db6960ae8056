//! Plugins that loaded and registered but need a kind the API server does not serve
//! yet, typically a custom resource whose CRD is not installed: they are kept, shown
//! as waiting, and started once discovery finds the kind, without a restart.

use std::time::{Duration, Instant};

use crate::bindings::Registration;
use crate::kube::discovery::DiscoveryError;
use crate::runtime::Loaded;
use crate::status::PluginStatus;

use super::{Manager, load};

/// A registered plugin whose start waits for a kind.
pub(super) struct Waiting {
    loaded: Loaded,
    registration: Registration,
}

impl Manager {
    /// Keeps `file`'s loaded plugin until the kind `error` names is served.
    pub(super) fn wait_for_kind(
        &mut self,
        file: &str,
        loaded: &Loaded,
        registration: Registration,
        error: &DiscoveryError,
    ) {
        let retry = self.config.missing_kind_retry;
        if self.retrying.remove(file) {
            tracing::debug!(file, kind = %error.gvk, "kind still not served");
        } else {
            tracing::warn!(file, plugin = %registration.name, kind = %error.gvk, %error, ?retry,
                "plugin waits for a kind the API server does not serve (is its CRD installed?)");
            let reason = format!(
                "waiting for {}: not served by the API server (is its CRD installed?)",
                error.gvk
            );
            let (name, version) = (&registration.name, &registration.version);
            self.table
                .set(PluginStatus::waiting(file, name, version, &reason));
        }
        let loaded = loaded.clone();
        let waiting = Waiting {
            loaded,
            registration,
        };
        self.waiting.insert(file.to_string(), waiting);
    }

    /// Tries again to start every waiting plugin, each in a task of its own; those
    /// whose kinds are still missing come back waiting.
    pub(super) fn retry_waiting(&mut self) {
        for (file, waiting) in std::mem::take(&mut self.waiting) {
            let Waiting {
                loaded,
                registration,
            } = waiting;
            let ctx = self.ctx.clone();
            let task_file = file.clone();
            let handle = self.loads.spawn(async move {
                let began = Instant::now();
                let outcome =
                    load::prepare(loaded, registration, &ctx, false, Duration::ZERO, began).await;
                (task_file, outcome)
            });
            self.retrying.insert(file.clone());
            self.loading.insert(file, handle);
        }
    }
}
