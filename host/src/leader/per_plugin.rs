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

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::{Api, ListParams};
use tokio::sync::{oneshot, watch};
use tokio::time::{Instant, timeout, timeout_at};

use super::assign::assign;
use super::config::ElectionConfig;
use super::elector::{Attempt, Elector, to_record};
use super::gate::GateState;
use super::members::Membership;
use super::plugin_gates::{Holder, PluginGates};
use super::thread::on_own_thread;
use crate::metrics::{Metrics, PluginLabels};
use crate::probes::LastRenewal;

/// The label naming the plugin a Lease is for.
pub const PLUGIN_LABEL: &str = "wasm-controller-manager.io/plugin";

/// A running per-plugin election.
pub struct PluginElection {
    /// The plugins' gates: the manager takes one per plugin it runs.
    pub gates: PluginGates,
    /// When this replica last renewed its membership (for `/healthz`).
    pub last_renewal: LastRenewal,
    /// Whether this replica is in the group now.
    pub member: watch::Receiver<bool>,
    stop: Option<oneshot::Sender<()>>,
    ended: Option<oneshot::Receiver<Result<(), String>>>,
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
        let (stop, stopped) = oneshot::channel();
        let shared = Shared {
            gates: gates.clone(),
            metrics,
            last_renewal: last_renewal.clone(),
            member: member_tx,
            grace,
        };
        let ended = on_own_thread("plugin-leases", move || async move {
            match client() {
                Ok(client) => run(client, config, shared, stopped).await,
                Err(e) => tracing::error!(error = e, "per-plugin election cannot start"),
            }
        });
        PluginElection {
            gates,
            last_renewal,
            member,
            stop: Some(stop),
            ended: Some(ended),
        }
    }

    /// Releases every plugin Lease held here and leaves the group.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(ended) = self.ended.take() {
            let _ = ended.await;
        }
    }
}

/// What the election shares with the rest of the host.
struct Shared {
    gates: PluginGates,
    metrics: Arc<Metrics>,
    last_renewal: LastRenewal,
    member: watch::Sender<bool>,
    grace: Duration,
}

async fn run(
    client: Client,
    config: ElectionConfig,
    shared: Shared,
    mut stopped: oneshot::Receiver<()>,
) {
    tracing::info!(identity = %config.identity, group = %config.lease_name,
        "per-plugin leader election on: every replica works");
    let mut membership = Membership::new(client.clone(), &config);
    let mut leases = PluginLeases::new(client, &config);
    let mut renewed: Option<Instant> = None;
    let mut members = BTreeMap::new();
    loop {
        // Rounds start a (jittered) retry period apart, however long one takes.
        let next = Instant::now() + super::campaign::jittered(config.retry_period);
        let runs = shared.gates.wanted();
        let sent = Instant::now();
        match timeout(config.retry_period, membership.renew(&runs)).await {
            Ok(Ok(true)) => {
                renewed = Some(sent);
                shared.gates.announced(&runs);
                *shared
                    .last_renewal
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()) = Some(std::time::Instant::now());
            }
            Ok(Ok(false)) => tracing::error!(identity = %config.identity,
                "another replica holds this replica's membership Lease: same identity?"),
            Ok(Err(e)) => tracing::warn!(error = %e, "cannot renew the membership Lease"),
            Err(_) => tracing::warn!("renewing the membership Lease timed out"),
        }
        let in_group = renewed.is_some_and(|t| t + config.renew_deadline > Instant::now());
        shared.member.send_replace(in_group);
        if let Ok(Ok(live)) = timeout(config.retry_period, membership.live()).await {
            members = live;
        }
        let mut view = members.clone();
        match in_group {
            true => view.insert(config.identity.clone(), runs.iter().cloned().collect()),
            false => view.remove(&config.identity),
        };
        leases.track(&runs, &shared);
        let holders = leases.note_holders(&shared).await;
        let mine: BTreeSet<String> = (assign(&view, &holders).into_iter())
            .filter(|(_, holder)| *holder == config.identity)
            .map(|(plugin, _)| plugin)
            .collect();
        leases.step_all(&mine, &runs, &shared).await;
        tokio::select! {
            () = tokio::time::sleep_until(next) => {}
            _ = &mut stopped => break,
        }
    }
    leases.release_all(&shared).await;
    membership.leave().await;
}

/// The Leases of the plugins this replica runs or holds.
struct PluginLeases {
    client: Client,
    api: Api<Lease>,
    config: ElectionConfig,
    leases: BTreeMap<String, PluginLease>,
}

/// One plugin's Lease as this replica takes part in it.
struct PluginLease {
    elector: Elector,
    /// While held: when the last successful renewal was sent.
    held: Option<Instant>,
    /// While handed over: since when.
    draining: Option<Instant>,
}

impl PluginLeases {
    fn new(client: Client, config: &ElectionConfig) -> PluginLeases {
        PluginLeases {
            api: Api::namespaced(client.clone(), &config.lease_namespace),
            client,
            config: config.clone(),
            leases: BTreeMap::new(),
        }
    }

    /// One round: each plugin assigned here (`mine`) and run here (`runs`) is
    /// acquired or renewed; each other one held here is handed over.
    async fn step_all(&mut self, mine: &BTreeSet<String>, runs: &[String], shared: &Shared) {
        for plugin in runs {
            if !self.leases.contains_key(plugin) {
                let lease = self.lease_of(plugin);
                shared
                    .metrics
                    .set_leading(lease.elector.lease_name(), false);
                self.leases.insert(plugin.clone(), lease);
            }
        }
        let config = &self.config;
        let steps = self.leases.iter_mut().map(|(plugin, lease)| {
            let wanted = mine.contains(plugin) && runs.contains(plugin);
            lease.step(plugin, wanted, config, shared)
        });
        futures::future::join_all(steps).await;
        self.leases
            .retain(|plugin, lease| lease.held.is_some() || runs.contains(plugin));
    }

    /// Notes who holds each plugin's Lease (for `/plugins`, and so a standby knows
    /// a plugin is reported on by its holder), with one list of the group's Leases;
    /// each plugin run here sees its Lease change, so once it is assigned here an
    /// expired holder is judged from when its renewals stopped, not from then.
    /// Returns each plugin's holder (none for a released Lease).
    async fn note_holders(&mut self, shared: &Shared) -> BTreeMap<String, String> {
        let mut holders = BTreeMap::new();
        let params = ListParams::default().labels(PLUGIN_LABEL);
        let listed = timeout(self.config.retry_period, self.api.list(&params)).await;
        let Ok(Ok(leases)) = listed else {
            return holders;
        };
        let prefix = format!("{}-", self.config.lease_name);
        for lease in leases {
            let labels = lease.metadata.labels.as_ref();
            let plugin = labels.and_then(|l| l.get(PLUGIN_LABEL));
            let ours = lease
                .metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with(&prefix));
            if let (Some(plugin), true) = (plugin, ours) {
                if let Some(ours) = self.leases.get_mut(plugin) {
                    ours.elector.saw(&lease);
                }
                let record = to_record(&lease);
                let labels = PluginLabels {
                    plugin: plugin.clone(),
                };
                let transitions = shared
                    .metrics
                    .plugin_lease_transitions
                    .get_or_create(&labels);
                transitions.set(record.transitions.into());
                if !record.holder.is_empty() {
                    holders.insert(plugin.clone(), record.holder.clone());
                }
                let holder = Holder {
                    identity: record.holder,
                    transitions: record.transitions,
                };
                shared.gates.set_holder(plugin, holder);
            }
        }
        holders
    }

    /// Takes part in the Lease of every plugin that `runs` here.
    fn track(&mut self, runs: &[String], shared: &Shared) {
        for plugin in runs {
            if !self.leases.contains_key(plugin) {
                let lease = self.lease_of(plugin);
                shared
                    .metrics
                    .set_leading(lease.elector.lease_name(), false);
                self.leases.insert(plugin.clone(), lease);
            }
        }
    }

    fn lease_of(&self, plugin: &str) -> PluginLease {
        let config = ElectionConfig {
            lease_name: format!("{}-{plugin}", self.config.lease_name),
            ..self.config.clone()
        };
        let labels = [(PLUGIN_LABEL.to_string(), plugin.to_string())];
        PluginLease {
            elector: Elector::new(self.client.clone(), config).labelled(labels.into()),
            held: None,
            draining: None,
        }
    }

    /// Closes every gate and releases every Lease held here (a clean stop: the
    /// plugins have stopped already).
    async fn release_all(&mut self, shared: &Shared) {
        let held = self.leases.iter_mut().filter(|(_, l)| l.held.is_some());
        let releases = held.map(|(plugin, lease)| lease.release(plugin, shared));
        futures::future::join_all(releases).await;
    }
}

impl PluginLease {
    async fn step(&mut self, plugin: &str, wanted: bool, config: &ElectionConfig, shared: &Shared) {
        match self.held {
            None if wanted => self.acquire(plugin, config, shared).await,
            None => {}
            Some(renewed) if Instant::now() >= renewed + config.renew_deadline => {
                self.lost(plugin, "no renewal within the renew deadline", shared)
            }
            Some(_) if wanted && self.draining.is_none() => {
                self.renew(plugin, config, shared).await
            }
            Some(_) => self.hand_over(plugin, config, shared).await,
        }
    }

    async fn acquire(&mut self, plugin: &str, config: &ElectionConfig, shared: &Shared) {
        let sent = Instant::now();
        let attempt = timeout(config.retry_period, self.elector.try_acquire_or_renew()).await;
        if let Ok(Ok(Attempt::Leading)) = attempt {
            self.held = Some(sent);
            shared.metrics.set_leading(self.elector.lease_name(), true);
            // Said before the gate opens: no write of the plugin precedes this line.
            tracing::info!(plugin = %plugin, lease = self.elector.lease_name(),
                "plugin lease acquired");
            shared.gates.set(plugin, GateState::Open);
        }
    }

    async fn renew(&mut self, plugin: &str, config: &ElectionConfig, shared: &Shared) {
        let Some(renewed) = self.held else { return };
        let sent = Instant::now();
        let deadline = renewed + config.renew_deadline;
        match timeout_at(deadline, self.elector.try_acquire_or_renew()).await {
            Ok(Ok(Attempt::Leading)) => self.held = Some(sent),
            Ok(Ok(Attempt::Following { holder })) => self.lost(
                plugin,
                &format!("the lease is held by {holder} now"),
                shared,
            ),
            _ => {} // a lost race or an error: tried again; the deadline decides
        }
    }

    /// Drains the plugin here, then releases its Lease.
    async fn hand_over(&mut self, plugin: &str, config: &ElectionConfig, shared: &Shared) {
        let since = *self.draining.get_or_insert_with(|| {
            shared.gates.set(plugin, GateState::Draining);
            tracing::info!(
                plugin = %plugin,
                "handing the plugin over: no new keys, in-flight finish"
            );
            Instant::now()
        });
        let done = shared.gates.busy(plugin) == 0 || since.elapsed() >= shared.grace;
        if !done {
            return self.renew(plugin, config, shared).await;
        }
        self.release(plugin, shared).await;
    }

    async fn release(&mut self, plugin: &str, shared: &Shared) {
        shared.gates.set(plugin, GateState::Closed);
        shared.metrics.set_leading(self.elector.lease_name(), false);
        (self.held, self.draining) = (None, None);
        // Said once the gate is closed and before the Lease is free: no write of the
        // plugin follows this line, and no other replica acts before it.
        tracing::info!(plugin = %plugin, lease = self.elector.lease_name(),
            "plugin lease released");
        if let Err(e) = self.elector.release().await {
            tracing::warn!(plugin = %plugin, error = %e,
                "could not release the plugin's lease; it will expire");
        }
    }

    fn lost(&mut self, plugin: &str, why: &str, shared: &Shared) {
        shared.gates.set(plugin, GateState::Closed);
        shared.metrics.set_leading(self.elector.lease_name(), false);
        (self.held, self.draining) = (None, None);
        tracing::error!(
            plugin = %plugin,
            lease = self.elector.lease_name(),
            why,
            "plugin lease lost: stopped acting for it"
        );
    }
}
