//! The leader-election runnable: a campaign for the Lease (or, per plugin, an
//! election of a Lease per plugin) when election is on, what plugins reconcile
//! behind, the renewals `/healthz` watches, and the Leases handed back on a clean
//! stop.

use std::sync::Arc;
use std::time::Duration;

use super::{DaemonConfig, counted_client};
use crate::leader::{
    Campaign, ElectionConfig, ElectionMode, Elector, Leadership, Lost, PluginElection,
};
use crate::probes::Probes;
use wcm_core::leader_gate::LeaderGate;
use wcm_core::metrics::Metrics;

/// The election this replica takes part in.
pub(super) enum Election {
    /// None: this replica reconciles alone.
    Off,
    /// One Lease for every plugin.
    Single(Campaign),
    /// A Lease per plugin.
    PerPlugin(PluginElection),
}

impl Election {
    /// Starts campaigning as `config` says, with renewals watched by `probes`.
    pub fn start(config: &DaemonConfig, metrics: &Arc<Metrics>, probes: &Probes) -> Election {
        let identity = &config.identity;
        let Some(election) = config.election.clone() else {
            tracing::info!(identity, "leader election off; this replica reconciles");
            return Election::Off;
        };
        tracing::info!(identity, lease = %format!("{}/{}", election.lease_namespace, election.lease_name),
            mode = ?election.mode, lease_duration = ?election.lease_duration,
            renew_deadline = ?election.renew_deadline, retry_period = ?election.retry_period,
            "leader election on; campaigning");
        // The election builds its own client on its own thread: plugin traffic on
        // the shared client cannot queue ahead of a renewal.
        let (kube, counted) = (config.kube.clone(), metrics.clone());
        let client = move || counted_client(kube, &counted).map_err(|e| e.to_string());
        match election.mode {
            ElectionMode::Single => single(client, election, metrics, probes),
            ElectionMode::PerPlugin => {
                let grace = config.manager.shutdown_grace;
                per_plugin(client, election, grace, metrics, probes)
            }
        }
    }

    /// What plugins reconcile behind: open while this replica leads (or holds the
    /// plugin's Lease), or always without election.
    pub fn leadership(&self) -> Leadership {
        match self {
            Election::Off => Leadership::Replica(LeaderGate::always_open()),
            Election::Single(campaign) => {
                Leadership::Replica(LeaderGate::following(campaign.leading.clone()))
            }
            Election::PerPlugin(election) => Leadership::PerPlugin(election.gates.clone()),
        }
    }

    /// Resolves once the single Lease is lost; never otherwise (a plugin's Lease
    /// lost stops only that plugin).
    pub async fn lost(&mut self) -> Lost {
        match self {
            Election::Single(campaign) => campaign.lost().await,
            _ => std::future::pending().await,
        }
    }

    /// Hands the Lease (or every plugin's Lease) back, if held.
    pub async fn stop(self) {
        match self {
            Election::Off => {}
            Election::Single(campaign) => campaign.stop().await,
            Election::PerPlugin(election) => election.stop().await,
        }
    }
}

fn single(
    client: impl FnOnce() -> Result<kube::Client, String> + Send + 'static,
    election: ElectionConfig,
    metrics: &Arc<Metrics>,
    probes: &Probes,
) -> Election {
    let lease = election.clone();
    let elector = move || Ok(Elector::new(client()?, lease));
    let lease_duration = election.lease_duration;
    let campaign = Campaign::start(elector, election, metrics.clone());
    probes.watch_renewals(
        campaign.last_renewal.clone(),
        campaign.leading.clone(),
        lease_duration,
    );
    Election::Single(campaign)
}

fn per_plugin(
    client: impl FnOnce() -> Result<kube::Client, String> + Send + 'static,
    election: ElectionConfig,
    grace: Duration,
    metrics: &Arc<Metrics>,
    probes: &Probes,
) -> Election {
    let lease_duration = election.lease_duration;
    let started = PluginElection::start(client, election, grace, metrics.clone());
    // Healthy while this replica renews its membership in time.
    probes.watch_renewals(
        started.last_renewal.clone(),
        started.member.clone(),
        lease_duration,
    );
    Election::PerPlugin(started)
}
