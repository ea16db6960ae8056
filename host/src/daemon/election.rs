//! The leader-election runnable: a campaign for the Lease when election is on, the
//! gate plugins reconcile behind, the renewals `/healthz` watches, and the Lease
//! handed back on a clean stop.

use std::sync::Arc;

use super::{DaemonConfig, counted_client};
use crate::leader::{Campaign, Elector, LeaderGate, Lost};
use crate::metrics::Metrics;
use crate::probes::Probes;

/// The campaign, if leader election is on.
pub(super) struct Election(Option<Campaign>);

impl Election {
    /// Starts campaigning as `config` says, with renewals watched by `probes`.
    pub fn start(config: &DaemonConfig, metrics: &Arc<Metrics>, probes: &Probes) -> Election {
        let identity = &config.identity;
        let Some(election) = config.election.clone() else {
            tracing::info!(identity, "leader election off; this replica reconciles");
            return Election(None);
        };
        tracing::info!(identity, lease = %format!("{}/{}", election.lease_namespace, election.lease_name),
            lease_duration = ?election.lease_duration, renew_deadline = ?election.renew_deadline,
            retry_period = ?election.retry_period, "leader election on; campaigning");
        // The election builds its own client on its own thread: plugin traffic on
        // the shared client cannot queue ahead of a renewal.
        let (kube, lease, counted) = (config.kube.clone(), election.clone(), metrics.clone());
        let elector = move || {
            let client = counted_client(kube, &counted).map_err(|e| e.to_string())?;
            Ok(Elector::new(client, lease))
        };
        let lease_duration = election.lease_duration;
        let campaign = Campaign::start(elector, election, metrics.clone());
        probes.watch_renewals(
            campaign.last_renewal.clone(),
            campaign.leading.clone(),
            lease_duration,
        );
        Election(Some(campaign))
    }

    /// What plugins reconcile behind: open while this replica leads, or always
    /// without election.
    pub fn gate(&self) -> LeaderGate {
        match &self.0 {
            Some(campaign) => LeaderGate::following(campaign.leading.clone()),
            None => LeaderGate::always_open(),
        }
    }

    /// Resolves once the Lease is lost; never without election.
    pub async fn lost(&mut self) -> Lost {
        match &mut self.0 {
            Some(campaign) => campaign.lost().await,
            None => std::future::pending().await,
        }
    }

    /// Hands the Lease back, if this replica holds it.
    pub async fn stop(self) {
        if let Some(campaign) = self.0 {
            campaign.stop().await;
        }
    }
}
