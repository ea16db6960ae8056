//! What of a plugin this replica keeps in memory: everything, always, with one Lease
//! for the replica (a standby keeps warm caches and code); with a Lease per plugin,
//! its informers' watches and caches and its compiled code only while this replica
//! holds the plugin. Elsewhere the plugin keeps its informers, but not their watches
//! or caches (an informer another plugin still holds runs on), and its code waits in
//! the compile cache, read back the moment the Lease is taken.

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use wcm_core::kube::informer::{Informer, InformerHold};
use wcm_core::leader_gate::LeaderGate;
use wcm_core::metrics::{LoadStepLabels, Metrics, PluginLabels};
use wcm_core::runtime::ResidentCode;

/// The informers of a plugin's running version, with holds taken on them while the
/// version was prepared (so an upgrade never stops a watch both versions share), and
/// its code.
pub(super) struct Claim {
    pub informers: Vec<Arc<Informer>>,
    pub holds: Vec<InformerHold>,
    /// The version's code, parked while the gate does not want it.
    pub code: Arc<ResidentCode>,
}

/// Keeps a plugin's informers held and its code in memory while its gate wants them.
pub(super) struct Residency {
    versions: mpsc::UnboundedSender<Claim>,
    task: JoinHandle<()>,
}

impl Residency {
    /// Starts following `gate` for `first`, the plugin's first version; the time to
    /// read parked code back goes to `metrics`.
    pub fn start(plugin: &str, gate: LeaderGate, first: Claim, metrics: Arc<Metrics>) -> Residency {
        let (versions, next) = mpsc::unbounded_channel();
        let _ = versions.send(first);
        let plugin = plugin.to_string();
        Residency {
            versions,
            task: tokio::spawn(follow(plugin, gate, next, metrics)),
        }
    }

    /// A new version took over: its informers are held from now on (as wanted), and
    /// the old version's released.
    pub fn upgrade(&self, claim: Claim) {
        let _ = self.versions.send(claim);
    }
}

impl Drop for Residency {
    /// Releases every hold: the plugin stopped.
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Holds the current version's informers and code while `gate` wants them: always
/// for a replica's gate, while open (or draining) for a plugin's own.
async fn follow(
    plugin: String,
    gate: LeaderGate,
    mut versions: mpsc::UnboundedReceiver<Claim>,
    metrics: Arc<Metrics>,
) {
    let Some(mut claim) = versions.recv().await else {
        return;
    };
    let follows = gate.is_plugins_own();
    loop {
        let wanted = !follows || gate.is_open();
        keep(&plugin, &mut claim, wanted, &metrics).await;
        let (mut opened, mut closed) = (gate.clone(), gate.clone());
        tokio::select! {
            next = versions.recv() => match next {
                Some(next) => claim = next,
                None => return,
            },
            () = opened.opened(), if !wanted => {}
            () = closed.closed(), if wanted && follows => {}
        }
    }
}

/// Holds the informers and reads the code back if `wanted`; else releases the holds
/// and parks the code. `wcm_plugin_code_bytes` follows.
async fn keep(plugin: &str, claim: &mut Claim, wanted: bool, metrics: &Metrics) {
    match (wanted, claim.holds.is_empty()) {
        (true, true) => claim.holds = claim.informers.iter().map(|i| i.hold()).collect(),
        (false, false) => claim.holds.clear(),
        _ => {}
    }
    match wanted {
        true => read_back(plugin, &claim.code, metrics).await,
        false if claim.code.park() => {
            tracing::debug!(plugin = %plugin, "code parked: held elsewhere")
        }
        false => {}
    }
    let labels = PluginLabels {
        plugin: plugin.to_string(),
    };
    let bytes = i64::try_from(claim.code.resident_bytes()).unwrap_or(i64::MAX);
    metrics.plugin_code_bytes.get_or_create(&labels).set(bytes);
}

/// Brings a wanted version's code into memory, if it was parked, before its first key
/// is taken (a worker would read it back itself, a little later).
async fn read_back(plugin: &str, code: &ResidentCode, metrics: &Metrics) {
    match code.get().await {
        Ok(resumed) => {
            if let Some(took) = resumed.read_back {
                read_back_took(plugin, took, metrics);
            }
        }
        Err(error) => tracing::error!(plugin = %plugin, %error,
            "the plugin's parked code could not be read back; loading it again"),
    }
}

/// Logs and counts (`wcm_plugin_load_seconds{step="read_back"}`) a read-back.
pub(super) fn read_back_took(plugin: &str, took: std::time::Duration, metrics: &Metrics) {
    tracing::info!(plugin = %plugin, ?took, "plugin's code read back from the compile cache: it runs here now");
    let labels = LoadStepLabels {
        step: "read_back".to_string(),
    };
    metrics
        .load_seconds
        .get_or_create(&labels)
        .observe(took.as_secs_f64());
}
