//! What each plugin file is doing, for `/plugins` and `wasm-controller-manager plugins`.

mod client;

pub use client::{FetchError, fetch};

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

/// The state of one plugin file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// A version is running.
    Running,
    /// Nothing runs for this file; `reason` says why.
    Failed,
    /// Loaded, but a kind it needs is not served yet (a CRD not installed); it starts
    /// once the kind appears. `reason` names the kind.
    Waiting,
}

/// One row of the plugin table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PluginStatus {
    /// File name in the plugins directory.
    pub file: String,
    /// Running or failed.
    pub state: State,
    /// Registered name of the running version.
    pub plugin: Option<String>,
    /// Registered version string of the running version.
    pub version: Option<String>,
    /// SHA-256 of the running version's file.
    pub hash: Option<String>,
    /// When the running version was loaded (RFC 3339, UTC).
    pub loaded_at: Option<String>,
    /// Why the file is not running, or why its last upgrade was refused while an
    /// older version keeps running.
    pub reason: Option<String>,
}

impl PluginStatus {
    /// A file that runs `plugin` `version` with content hash `hash`, loaded now.
    pub fn running(file: &str, plugin: &str, version: &str, hash: &str) -> PluginStatus {
        PluginStatus {
            file: file.into(),
            state: State::Running,
            plugin: Some(plugin.into()),
            version: Some(version.into()),
            hash: Some(hash.into()),
            loaded_at: Some(humantime::format_rfc3339_seconds(SystemTime::now()).to_string()),
            reason: None,
        }
    }

    /// A file that does not run, and why.
    pub fn failed(file: &str, reason: &str) -> PluginStatus {
        PluginStatus::not_running(file, State::Failed, reason)
    }

    /// A file whose plugin waits for a kind to be served, and which.
    pub fn waiting(file: &str, plugin: &str, version: &str, reason: &str) -> PluginStatus {
        PluginStatus {
            plugin: Some(plugin.into()),
            version: Some(version.into()),
            ..PluginStatus::not_running(file, State::Waiting, reason)
        }
    }

    fn not_running(file: &str, state: State, reason: &str) -> PluginStatus {
        PluginStatus {
            file: file.into(),
            state,
            plugin: None,
            version: None,
            hash: None,
            loaded_at: None,
            reason: Some(reason.into()),
        }
    }
}

/// The plugin table, shared between the manager (writer) and the HTTP endpoint.
#[derive(Debug, Clone, Default)]
pub struct PluginTable {
    rows: Arc<RwLock<BTreeMap<String, PluginStatus>>>,
}

impl PluginTable {
    /// Replaces the row of `status.file`.
    pub fn set(&self, status: PluginStatus) {
        let mut rows = self.rows.write().unwrap_or_else(|p| p.into_inner());
        rows.insert(status.file.clone(), status);
    }

    /// Notes a refused upgrade on a running file's row.
    pub fn set_reason(&self, file: &str, reason: Option<String>) {
        let mut rows = self.rows.write().unwrap_or_else(|p| p.into_inner());
        if let Some(row) = rows.get_mut(file) {
            row.reason = reason;
        }
    }

    /// Drops the row of a removed file.
    pub fn remove(&self, file: &str) {
        let mut rows = self.rows.write().unwrap_or_else(|p| p.into_inner());
        rows.remove(file);
    }

    /// Every row, by file name.
    pub fn rows(&self) -> Vec<PluginStatus> {
        let rows = self.rows.read().unwrap_or_else(|p| p.into_inner());
        rows.values().cloned().collect()
    }
}
