//! Plugins that loaded and registered but need a kind the API server does not serve
//! yet, typically a custom resource whose CRD is not installed: they are kept, shown
//! as waiting, and started once discovery finds the kind, without a restart.

use crate::bindings::Registration;
use crate::controller::StartError;
use crate::kube::discovery::DiscoveryError;
use crate::runtime::{Loaded, PluginCode};
use crate::status::PluginStatus;

use super::{Manager, PluginError, Running, short};

/// A registered plugin whose start waits for a kind.
pub(super) struct Waiting {
    code: PluginCode,
    hash: String,
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
        let waiting = Waiting {
            code: loaded.code.clone(),
            hash: loaded.hash.clone(),
            registration,
        };
        self.waiting.insert(file.to_string(), waiting);
    }

    /// Tries to start every waiting plugin; those whose kinds are still missing wait on.
    pub(super) async fn retry_waiting(&mut self) {
        for (file, waiting) in std::mem::take(&mut self.waiting) {
            let Waiting {
                code,
                hash,
                registration,
            } = waiting;
            let started = self
                .start_waiting(&file, code.clone(), &hash, registration.clone())
                .await;
            match started {
                Ok(()) => {}
                Err(PluginError::Start(StartError::Discovery(e))) if e.is_not_served() => {
                    tracing::debug!(file, kind = %e.gvk, "kind still not served");
                    let again = Waiting {
                        code,
                        hash,
                        registration,
                    };
                    self.waiting.insert(file, again);
                }
                Err(e) => self.failed(&file, Some(&hash), &e),
            }
        }
    }

    async fn start_waiting(
        &mut self,
        file: &str,
        code: PluginCode,
        hash: &str,
        registration: Registration,
    ) -> Result<(), PluginError> {
        self.check_unique(file, &registration.name)?;
        let controller =
            crate::controller::PluginController::start(code, registration.clone(), &self.ctx)
                .await?;
        let running = Running {
            controller,
            hash: hash.to_string(),
        };
        self.running.insert(file.to_string(), running);
        tracing::info!(file, plugin = %registration.name, version = %registration.version,
            hash = %short(hash), "plugin loaded: the kinds it waited for are served now");
        self.table.set(PluginStatus::running(
            file,
            &registration.name,
            &registration.version,
            hash,
        ));
        Ok(())
    }
}
