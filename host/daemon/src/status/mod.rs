//! What each plugin file is doing, for `/plugins` and `wasm-controller-manager plugins`.

mod client;
mod state_metric;
mod table;

pub use client::{FetchError, fetch};
pub use state_metric::PluginStateCollector;
pub use table::render as render_table;

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use wcm_core::budget::Budget;

/// The state of one plugin file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// A version is running and working.
    Running,
    /// A version runs, but a watch it needs fails (the API server refuses to list
    /// its kind, for instance); `reason` has the API's error. It recovers by itself
    /// when the cause goes away.
    Degraded,
    /// A version runs, but its reconciles trap or time out again and again; they
    /// are paused with a growing backoff. A success or a new version ends it.
    CrashLooping,
    /// Nothing runs for this file; `reason` says why.
    Failed,
    /// Loaded, but a kind it needs is not served yet (a CRD not installed); it starts
    /// once the kind appears. `reason` names the kind.
    Waiting,
    /// Its ServiceAccount may not list or watch a kind it watches: it does not start,
    /// or, running, it is not served that kind. `reason` names the rules it lacks;
    /// it (re)starts by itself once RBAC grants them.
    Forbidden,
}

impl State {
    /// The name the table and the metrics use.
    pub fn name(self) -> &'static str {
        match self {
            State::Running => "running",
            State::Degraded => "degraded",
            State::CrashLooping => "crash-looping",
            State::Failed => "failed",
            State::Waiting => "waiting",
            State::Forbidden => "forbidden",
        }
    }
}

/// The limits a running plugin works within, as the operator set them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    /// Deadline of one reconcile (`--reconcile-timeout`), in milliseconds.
    pub reconcile_timeout_ms: u64,
    /// Linear memory of one instance (`--max-memory-mib`), in bytes.
    pub max_memory_bytes: usize,
    /// Reconciles at once: the plugin's wish capped by `--max-concurrent-reconciles`.
    pub concurrent_reconciles: usize,
    /// API rate, result size, watch and log budgets.
    #[serde(flatten)]
    pub budget: Budget,
}

/// One row of the plugin table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PluginStatus {
    /// File name in the plugins directory.
    pub file: String,
    /// Running or failed.
    pub state: State,
    /// The plugin's identity: its file's name without `.wasm`.
    pub plugin: Option<String>,
    /// The name its `register` returned, when that is another: shown, never acted
    /// on (the file's name decides whom the plugin acts as).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registered_as: Option<String>,
    /// Registered version string of the running version.
    pub version: Option<String>,
    /// SHA-256 of the running version's file.
    pub hash: Option<String>,
    /// When the running version was loaded (RFC 3339, UTC).
    pub loaded_at: Option<String>,
    /// Why the file is not running, why it is degraded or crash-looping, or why
    /// its last upgrade was refused while an older version keeps running.
    pub reason: Option<String>,
    /// The limits of the running version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Limits>,
    /// The contract version the running version was built against
    /// (`wcm:controller@0.2.0` for a plugin adapted from the previous version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract: Option<String>,
    /// The rules it declared against those RBAC grants its ServiceAccount; none when
    /// plugins share the host's identity (`--impersonate-plugins=false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rights: Option<Rights>,
    /// Who holds the plugin's Lease (`--leader-elect-mode=per-plugin`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<LeaseHolder>,
}

/// The holder of a plugin's Lease, as the replica last read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseHolder {
    /// The replica acting for the plugin; empty while none does.
    pub holder: String,
    /// How often the plugin changed hands (`leaseTransitions`).
    pub transitions: i32,
}

/// A plugin's declared rules against what its ServiceAccount is granted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rights {
    /// The ServiceAccount's user name.
    pub user: String,
    /// How many rules its registration implies (what `rbac` generates for it).
    pub declared: usize,
    /// How many of those are granted.
    pub granted: usize,
    /// The declared rules that are not granted, as the API server words them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub denied: Vec<String>,
}

/// What the table keys of `WasmPlugin`s start with: `wasmplugin/NAME` (a file's key
/// is its name, which ends in `.wasm` and has no `/`).
pub const WASMPLUGIN_ROW: &str = "wasmplugin/";

/// The identity a plugin of table key `file` acts as: the `WasmPlugin`'s name, or the
/// file's name without `.wasm`.
pub fn identity_of(file: &str) -> &str {
    match file.strip_prefix(WASMPLUGIN_ROW) {
        Some(name) => name,
        None => file.strip_suffix(".wasm").unwrap_or(file),
    }
}

impl PluginStatus {
    /// The identity of the plugin of this row, whether or not it registered.
    pub fn identity(&self) -> &str {
        self.plugin
            .as_deref()
            .unwrap_or_else(|| identity_of(&self.file))
    }

    /// A file that runs `plugin` `version` with content hash `hash`, loaded now.
    pub fn running(file: &str, plugin: &str, version: &str, hash: &str) -> PluginStatus {
        PluginStatus {
            file: file.into(),
            state: State::Running,
            plugin: Some(plugin.into()),
            registered_as: None,
            version: Some(version.into()),
            hash: Some(hash.into()),
            loaded_at: Some(humantime::format_rfc3339_seconds(SystemTime::now()).to_string()),
            reason: None,
            limits: None,
            contract: None,
            rights: None,
            lease: None,
        }
    }

    /// The same row noting the name the plugin registered as, if it is another.
    pub fn with_registered_as(self, registered_as: Option<&str>) -> PluginStatus {
        PluginStatus {
            registered_as: registered_as.map(str::to_string),
            ..self
        }
    }

    /// The same row with the running version's limits.
    pub fn with_limits(self, limits: Limits) -> PluginStatus {
        PluginStatus {
            limits: Some(limits),
            ..self
        }
    }

    /// The same row with the contract version the plugin was built against.
    pub fn with_contract(self, contract: String) -> PluginStatus {
        PluginStatus {
            contract: Some(contract),
            ..self
        }
    }

    /// A file that does not run, and why.
    pub fn failed(file: &str, reason: &str) -> PluginStatus {
        PluginStatus::not_running(file, State::Failed, reason)
    }

    /// A file whose plugin waits for a kind to be served or for a right to be
    /// granted (`state`), and why.
    pub fn waiting(
        file: &str,
        (plugin, version): (&str, &str),
        state: State,
        reason: &str,
    ) -> PluginStatus {
        PluginStatus {
            plugin: Some(plugin.into()),
            version: Some(version.into()),
            ..PluginStatus::not_running(file, state, reason)
        }
    }

    fn not_running(file: &str, state: State, reason: &str) -> PluginStatus {
        PluginStatus {
            file: file.into(),
            state,
            plugin: None,
            registered_as: None,
            version: None,
            hash: None,
            loaded_at: None,
            reason: Some(reason.into()),
            limits: None,
            contract: None,
            rights: None,
            lease: None,
        }
    }
}

impl Rights {
    /// The row of `user`'s last review.
    pub fn of(user: String, review: &wcm_core::rights::Review) -> Rights {
        Rights {
            user,
            declared: review.declared,
            granted: review.declared.saturating_sub(review.denied.len()),
            denied: review.denied.iter().map(ToString::to_string).collect(),
        }
    }
}

/// The plugin table, shared between the manager (writer) and the HTTP endpoint.
#[derive(Debug, Clone, Default)]
pub struct PluginTable {
    rows: Arc<RwLock<BTreeMap<String, PluginStatus>>>,
    /// Told of every change of a row's state (for the Events about plugins).
    changed: Arc<tokio::sync::Notify>,
}

impl PluginTable {
    /// Replaces the row of `status.file`.
    pub fn set(&self, status: PluginStatus) {
        let mut rows = self.rows.write().unwrap_or_else(|p| p.into_inner());
        rows.insert(status.file.clone(), status);
        self.changed.notify_one();
    }

    /// Waits until a row's state may have changed since the last wait returned.
    pub async fn changed(&self) {
        self.changed.notified().await;
    }

    /// Sets the health of a running file's row: its state and why.
    pub fn set_health(&self, file: &str, state: State, reason: Option<String>) {
        let mut rows = self.rows.write().unwrap_or_else(|p| p.into_inner());
        if let Some(row) = rows.get_mut(file) {
            row.state = state;
            row.reason = reason;
            self.changed.notify_one();
        }
    }

    /// Sets who holds the Lease of a file's plugin.
    pub fn set_lease(&self, file: &str, lease: Option<LeaseHolder>) {
        let mut rows = self.rows.write().unwrap_or_else(|p| p.into_inner());
        if let Some(row) = rows.get_mut(file) {
            row.lease = lease;
        }
    }

    /// Sets the rights of a file's row.
    pub fn set_rights(&self, file: &str, rights: Option<Rights>) {
        let mut rows = self.rows.write().unwrap_or_else(|p| p.into_inner());
        if let Some(row) = rows.get_mut(file) {
            row.rights = rights;
        }
    }

    /// The reason a file's row shows now.
    pub fn reason_of(&self, file: &str) -> Option<String> {
        let rows = self.rows.read().unwrap_or_else(|p| p.into_inner());
        rows.get(file).and_then(|row| row.reason.clone())
    }

    /// Notes a refused upgrade on a running file's row.
    pub fn set_reason(&self, file: &str, reason: Option<String>) {
        let mut rows = self.rows.write().unwrap_or_else(|p| p.into_inner());
        if let Some(row) = rows.get_mut(file) {
            row.reason = reason;
        }
    }

    /// The row of `file`, if it has one.
    pub fn row(&self, file: &str) -> Option<PluginStatus> {
        let rows = self.rows.read().unwrap_or_else(|p| p.into_inner());
        rows.get(file).cloned()
    }

    /// Drops the row of a removed file.
    pub fn remove(&self, file: &str) {
        let mut rows = self.rows.write().unwrap_or_else(|p| p.into_inner());
        rows.remove(file);
        self.changed.notify_one();
    }

    /// Each row's plugin identity and state, without copying the rest of the rows
    /// (reasons, limits, rights), for the state metric at each scrape.
    pub fn states(&self) -> Vec<(String, State)> {
        let rows = self.rows.read().unwrap_or_else(|p| p.into_inner());
        let states = rows
            .values()
            .map(|row| (row.identity().to_string(), row.state));
        states.collect()
    }

    /// Every row, by file name.
    pub fn rows(&self) -> Vec<PluginStatus> {
        let rows = self.rows.read().unwrap_or_else(|p| p.into_inner());
        rows.values().cloned().collect()
    }
}
