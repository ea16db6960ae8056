//! Plugins that loaded and registered but need a kind the API server does not serve
//! yet, typically a custom resource whose CRD is not installed: they are kept, shown
//! as waiting, and started once discovery finds the kind, without a restart.

use crate::bindings::Registration;
use crate::controller::StartError;
use crate::kube::discovery::DiscoveryError;
use crate::runtime::Loaded;
use crate::status::PluginStatus;

use super::{Manager, PluginError, short};

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
        tracing::warn!(file, plugin = %registration.name, kind = %error.gvk, %error, ?retry,
            "plugin waits for a kind the API server does not serve (is its CRD installed?)");
        let reason = format!(
            "waiting for {}: not served by the API server (is its CRD installed?)",
            error.gvk
        );
        let (name, version) = (&registration.name, &registration.version);
        self.table
            .set(PluginStatus::waiting(file, name, version, &reason));
        let loaded = loaded.clone();
        let waiting = Waiting {
            loaded,
            registration,
        };
        self.waiting.insert(file.to_string(), waiting);
    }

    /// Tries to start every waiting plugin; those whose kinds are still missing wait on.
    pub(super) async fn retry_waiting(&mut self) {
        for (file, waiting) in std::mem::take(&mut self.waiting) {
            let Waiting {
                loaded,
                registration,
            } = &waiting;
            match self.start_new(&file, loaded, registration.clone()).await {
                Ok(_) => {
                    tracing::info!(file, plugin = %registration.name,
                        version = %registration.version, hash = %short(&loaded.hash),
                        "plugin loaded: the kinds it waited for are served now");
                    let (name, version) = (&registration.name, &registration.version);
                    let row = PluginStatus::running(&file, name, version, &loaded.hash);
                    self.table.set(row);
                }
                Err(PluginError::Start(StartError::Discovery(e))) if e.is_not_served() => {
                    tracing::debug!(file, kind = %e.gvk, "kind still not served");
                    self.waiting.insert(file, waiting);
                }
                Err(e) => self.failed(&file, Some(&loaded.hash), &e),
            }
        }
    }
}
