//! A `WasmPlugin`'s status written as a projection of what the host knows of it: its
//! pull, its row of the plugin table, or why the host refuses it; written whole (every
//! field it leaves out cleared), only when it changed, and only by the replica that
//! acts for the plugin.

use kube::api::{Patch, PatchParams};

use super::Manager;
use super::resources::key_of;
use crate::wasmplugin::{Facts, status_of, status_patch};

impl Manager {
    /// Writes every resource's status that changed (health moves rows without a load).
    pub(super) fn refresh_resource_statuses(&mut self) {
        let names: Vec<String> = match &self.resources {
            Some(resources) => resources.known.keys().cloned().collect(),
            None => return,
        };
        for name in names {
            self.write_status(&name);
        }
    }

    /// Writes `name`'s status if it changed, while this replica acts for it (a
    /// standby's view is the holder's to report).
    pub(super) fn write_status(&mut self, name: &str) {
        if !self.ctx.leader.reports_on(name) {
            return;
        }
        let row = self.table.row(&key_of(name));
        let Some(resources) = &mut self.resources else {
            return;
        };
        let pull = resources.pull_of(name);
        let Some(known) = resources.known.get_mut(name) else {
            return;
        };
        let facts = Facts {
            generation: known.generation,
            paused: known.spec.paused,
            pull: &pull,
            running: known.running.as_ref(),
            row: row.as_ref(),
            refused: (known.refused.as_ref()).map(|(reason, why)| (*reason, why.as_str())),
        };
        // Whole seconds, as the API server keeps them, so a status read back equals it.
        let now = k8s_openapi::jiff::Timestamp::now().as_second();
        let now = k8s_openapi::jiff::Timestamp::from_second(now).unwrap_or_default();
        let status = status_of(&facts, known.status.as_ref(), now);
        if known.status.as_ref() == Some(&status) {
            return;
        }
        known.status = Some(status.clone());
        let (api, name) = (resources.api.clone(), name.to_string());
        tokio::spawn(async move {
            let patch = Patch::Merge(status_patch(&status));
            if let Err(e) = api
                .patch_status(&name, &PatchParams::default(), &patch)
                .await
            {
                tracing::warn!(plugin = %wcm_core::logs::shorten(&name), error = %e,
                    "could not write the WasmPlugin's status");
            }
        });
    }
}
