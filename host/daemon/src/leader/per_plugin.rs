//! `--leader-elect-mode=per-plugin`: every replica works. Each plugin has a Lease of
//! its own (`<name>-<plugin>`, labelled `wasm-controller-manager.io/plugin=<plugin>`);
//! the replicas renew membership Leases (`members`), every replica computes the
//! wanted holder of each plugin from the live members alone (`assign`), and a
//! replica acts for a plugin only while it holds the plugin's Lease (its gate, in
//! `plugin_gates`, is open).
//!
//! A hand-over is drained, never overlapped: the giving replica stops taking the
//! plugin's keys, lets reconciles in flight finish (within the grace period), closes
//! the gate and only then releases the Lease; the taker acquires a Lease only when
//! it is released or expired, as the single Lease is taken. A holder that cannot
//! renew within the renew deadline closes the plugin's gate (in-flight reconciles
//! are cancelled) before a standby could take the Lease. Unlike the single Lease,
//! losing a plugin's Lease does not end the process: only that plugin stops here.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use tokio::sync::{Notify, oneshot, watch};
use tokio::time::{Instant, timeout};

use super::assign::assign;
use super::config::ElectionConfig;
use super::members::{Live, Membership};
use super::plugin_gates::PluginGates;
use super::plugin_leases::{PluginLeases, Shared};
use super::thread::OwnThread;
use crate::probes::LastRenewal;
use wcm_core::metrics::Metrics;

/// A running per-plugin election.
pub struct PluginElection {
    /// The plugins' gates: the manager takes one per plugin it runs.
    pub gates: PluginGates,
    /// When this replica last renewed its membership (for `/healthz`).
    pub last_renewal: LastRenewal,
    /// Whether this replica is in the group now.
    pub member: watch::Receiver<bool>,
    thread: OwnThread<()>,
}

impl PluginElection {
    /// Starts on a thread of its own (`client` is called there). A plugin handed
    /// over has `grace` for its reconciles in flight.
    pub fn start<F>(
        client: F,
        config: ElectionConfig,
        grace: Duration,
        metrics: Arc<Metrics>,
    ) -> PluginElection
    where
        F: FnOnce() -> Result<Client, String> + Send + 'static,
    {
        let settle = config.retry_period.mul_f64(super::JITTER_FACTOR);
        let (gates, last_renewal) = (PluginGates::settling_for(settle), LastRenewal::default());
        let (member_tx, member) = watch::channel(false);
        let shared = Shared {
            gates: gates.clone(),
            metrics,
            last_renewal: last_renewal.clone(),
            member: member_tx,
            grace,
        };
        let thread = OwnThread::start("plugin-leases", move |stopped| async move {
            match client() {
                Ok(client) => run(client, config, shared, stopped).await,
                Err(e) => tracing::error!(error = e, "per-plugin election cannot start"),
            }
        });
        PluginElection {
            gates,
            last_renewal,
            member,
            thread,
        }
    }

    /// Releases every plugin Lease held here and leaves the group.
    pub async fn stop(mut self) {
        self.thread.stop().await;
    }
}

async fn run(
    client: Client,
    config: ElectionConfig,
    shared: Shared,
    mut stopped: oneshot::Receiver<()>,
) {
    tracing::info!(identity = %config.identity, group = %config.lease_name,
        "per-plugin leader election on: every replica works");
    let handed = Arc::new(Notify::new());
    let mut group = Group::new(client.clone(), &config, handed.clone());
    let mut leases = PluginLeases::new(client, &config, handed.clone());
    let mut next = Instant::now();
    loop {
        // Rounds on schedule start a (jittered) retry period apart, however long one
        // takes, and renew; a round woken early only acquires and hands over.
        let renewing = Instant::now() >= next;
        if renewing {
            next = Instant::now() + super::campaign::jittered(config.retry_period);
        }
        let synced = [group.membership.synced_at(), leases.synced_at()];
        if let [Some(members), Some(plugins)] = synced {
            // Settled once it has watched both kinds for a lease duration: it then saw
            // every live holder's renewals arrive, and can tell the moment a crashed
            // one's Lease runs out.
            let settled = members.max(plugins).elapsed() >= config.lease_duration;
            round(&mut group, &mut leases, renewing, settled, &shared).await;
        }
        // Looks again on schedule, when a Lease another replica holds runs out, or
        // when one changes hands, whichever comes first.
        let expiries = [group.membership.next_expiry(), leases.next_expiry()];
        let wake = expiries.into_iter().flatten().fold(next, Instant::min);
        tokio::select! {
            () = tokio::time::sleep_until(wake) => {}
            () = handed.notified() => {}
            _ = &mut stopped => break,
        }
    }
    leases.release_all(&shared).await;
    group.membership.leave().await;
}

/// One round: the membership (renewed when `renewing`, saying whether this replica
/// is `settled`), the group as seen now, who holds what, and this replica's plugins
/// acquired, renewed or handed over.
async fn round(
    group: &mut Group,
    leases: &mut PluginLeases,
    renewing: bool,
    settled: bool,
    shared: &Shared,
) {
    let runs = shared.gates.wanted();
    let live = group.round(&runs, renewing, settled, shared).await;
    leases.track(&runs, shared);
    let holders = leases.note_holders(shared);
    let identity = &group.config.identity;
    let mine: BTreeSet<String> = (assign(&live.runs, &holders, &live.unsettled).into_iter())
        .filter(|(_, holder)| holder == identity)
        .map(|(plugin, _)| plugin)
        .collect();
    leases.step_all(&mine, &runs, renewing, shared).await;
}

/// This replica's membership and its view of the group.
struct Group {
    membership: Membership,
    config: ElectionConfig,
    /// When the last successful renewal of the membership was sent.
    renewed: Option<Instant>,
}

impl Group {
    fn new(client: Client, config: &ElectionConfig, handed: Arc<Notify>) -> Group {
        Group {
            membership: Membership::new(client, config, handed),
            config: config.clone(),
            renewed: None,
        }
    }

    /// Renews the membership naming `runs` and whether this replica is `settled`
    /// (when `renewing`), and reads the members: the group as this replica sees it,
    /// itself as it is now (absent while it is not in the group).
    async fn round(
        &mut self,
        runs: &[String],
        renewing: bool,
        settled: bool,
        shared: &Shared,
    ) -> Live {
        if renewing {
            self.renew(runs, settled, shared).await;
            self.membership.forget_gone().await;
        }
        // In the group while the others count it in: its last renewal is within a lease
        // duration (as they judge it). A renewal late by less than that moves nothing;
        // it was once the renew deadline, and one slow round on a loaded machine
        // handed over every plugin of the replica, only to take them back.
        let live_for = self.config.lease_duration;
        let in_group = self.renewed.is_some_and(|t| t + live_for > Instant::now());
        shared.member.send_replace(in_group);
        let mut live = self.membership.live();
        let identity = &self.config.identity;
        live.unsettled.remove(identity);
        if !in_group {
            live.runs.remove(identity);
            return live;
        }
        live.runs
            .insert(identity.clone(), runs.iter().cloned().collect());
        if !settled {
            live.unsettled.insert(identity.clone());
        }
        live
    }

    async fn renew(&mut self, runs: &[String], settled: bool, shared: &Shared) {
        let (retry, identity) = (self.config.retry_period, &self.config.identity);
        let sent = Instant::now();
        match timeout(retry, self.membership.renew(runs, settled)).await {
            Ok(Ok(true)) => {
                self.renewed = Some(sent);
                shared.gates.announced(runs);
                let mut last = shared
                    .last_renewal
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                *last = Some(std::time::Instant::now());
            }
            Ok(Ok(false)) => tracing::error!(identity = %identity,
                "another replica holds this replica's membership Lease: same identity?"),
            Ok(Err(e)) => tracing::warn!(error = %e, "cannot renew the membership Lease"),
            Err(_) => tracing::warn!("renewing the membership Lease timed out"),
        }
    }
}
