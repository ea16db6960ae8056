//! `wasm-controller-manager run` as a library: the daemon's runnables — the HTTP
//! endpoint, the leader-election campaign and the plugin manager — started and
//! stopped in one order, as controller-runtime's Manager starts its runnables.
//! `main.rs` only turns flags into a [`DaemonConfig`] and calls [`run`].
//!
//! Start: the endpoint first, so `/healthz` answers and `/readyz` says "not ready"
//! from the beginning; then the campaign, before any plugin, so a standby's plugins
//! start their informers while it waits and take over with warm caches; then the
//! manager, which loads the plugins and reconciles only while the campaign leads.
//! Stop, on a signal or a lost Lease: the manager first (no new reconciles, in-flight
//! ones get the grace period), then the campaign hands the Lease back — only after a
//! signal: a replica that lost it returns [`DaemonError::Lost`] so its process exits
//! non-zero and the pod restarts with fresh state — and the endpoint last.

mod clients;
mod election;

pub use clients::counted_client;

use crate::manager::state_events::{self, EventTargets};
use std::net::SocketAddr;
use std::sync::Arc;

use crate::leader::{ElectionConfig, Lost};
use crate::manager::{Manager, ManagerError};
use crate::probes::Probes;
use crate::server::ServerError;
use crate::status::{PluginStateCollector, PluginTable};
use election::Election;
use wcm_core::config::ManagerConfig;
use wcm_core::metrics::Metrics;
use wcm_core::rights::identity::ServiceAccounts;

/// Everything `run` needs, from the flags.
#[derive(Debug)]
pub struct DaemonConfig {
    /// This replica's identity: the Lease's holder, Events' `reportingInstance`.
    pub identity: String,
    /// How to reach the API server (its User-Agent names this replica).
    pub kube: kube::Config,
    /// Leader election; none reconciles at once, alone.
    pub election: Option<ElectionConfig>,
    /// Where `/metrics`, `/healthz`, `/readyz` and `/plugins` are served; none for
    /// nowhere.
    pub http: Option<SocketAddr>,
    /// The ServiceAccounts plugins act as, by impersonation; none to let every
    /// plugin act as the host.
    pub plugin_accounts: Option<ServiceAccounts>,
    /// The plugins directory and the limits of plugins.
    pub manager: ManagerConfig,
    /// This host's Pod, which Events about plugins from files are about, if it runs
    /// in one: namespace, name and uid (the downward API's `POD_NAMESPACE`,
    /// `POD_NAME`, `POD_UID`).
    pub pod: Option<(String, String, Option<String>)>,
}

/// Why the daemon stopped other than on a signal.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// No client could be built from the configuration.
    #[error("cannot build a Kubernetes client: {0}")]
    Client(#[source] kube::Error),
    /// The HTTP endpoint could not start.
    #[error(transparent)]
    Server(#[from] ServerError),
    /// The manager could not start.
    #[error(transparent)]
    Manager(#[from] ManagerError),
    /// This replica lost the Lease: it stopped reconciling, and exits to restart.
    #[error("leadership lost ({0}); stopped reconciling, exiting to restart")]
    Lost(Lost),
}

/// Runs the daemon until `shutdown` resolves (a signal) or the Lease is lost.
pub async fn run(
    config: DaemonConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<(), DaemonError> {
    let (table, probes) = (PluginTable::default(), Probes::default());
    let states = Box::new(PluginStateCollector::new(table.clone()));
    let metrics = Arc::new(Metrics::with_collectors(vec![states]));
    let client = counted_client(config.kube.clone(), &metrics).map_err(DaemonError::Client)?;
    let _endpoint = match config.http {
        Some(addr) => Some(crate::server::serve(
            addr,
            metrics.clone(),
            table.clone(),
            probes.clone(),
        )?),
        None => None,
    };
    let targets = EventTargets {
        pod: config.pod.clone(),
        wasm_plugins: (config.manager.wasm_plugins.as_ref()).map(|w| w.namespace.clone()),
    };
    let _events = state_events::spawn(client.clone(), &config.identity, targets, table.clone());
    let mut election = Election::start(&config, &metrics, &probes);
    let identities =
        clients::plugin_identities(config.plugin_accounts, config.kube, client, &metrics);
    let manager = Manager::start(
        config.manager,
        identities,
        metrics,
        table,
        election.leadership(),
        probes,
    )
    .await?;
    tracing::info!(
        loading = manager.loading(),
        "manager started; loading plugins and watching the plugins directory"
    );
    let stop = manager
        .run(async {
            tokio::select! {
                () = shutdown => None,
                lost = election.lost() => Some(lost),
            }
        })
        .await;
    match stop.flatten() {
        Some(lost) => Err(DaemonError::Lost(lost)),
        None => {
            election.stop().await;
            tracing::info!("stopped");
            Ok(())
        }
    }
}
