//! The plugin Leases of one replica in `--leader-elect-mode=per-plugin`: each round
//! it acquires or renews the Leases of the plugins assigned to it, hands over (drains,
//! then releases) those it should no longer hold, stops acting for one it cannot
//! renew in time, and notes who holds every plugin of the group.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube::api::Api;
use tokio::sync::{Notify, watch};
use tokio::time::{Instant, timeout, timeout_at};

use super::config::ElectionConfig;
use super::elector::{Attempt, Elector};
use super::lease_watch::LeaseWatch;
use super::plugin_gates::{Holder, PluginGates};
use super::record::LeaseRecord;
use crate::probes::LastRenewal;
use wcm_core::leader_gate::GateState;
use wcm_core::metrics::{Metrics, PluginLabels};

/// The label naming the plugin a Lease is for.
pub const PLUGIN_LABEL: &str = "wasm-controller-manager.io/plugin";

/// What the election shares with the rest of the host.
pub(super) struct Shared {
    pub gates: PluginGates,
    pub metrics: Arc<Metrics>,
    pub last_renewal: LastRenewal,
    pub member: watch::Sender<bool>,
    /// How long a plugin handed over has for its reconciles in flight.
    pub grace: Duration,
}

/// The Leases of the plugins this replica runs or holds.
pub(super) struct PluginLeases {
    client: Client,
    watch: LeaseWatch,
    config: ElectionConfig,
    leases: BTreeMap<String, PluginLease>,
    /// Leases labelled for a plugin but not named after it, each reported once.
    ignored: BTreeSet<String>,
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
    /// The plugin Leases of `config`'s group, watched from now on; `handed` is
    /// notified when one changes hands.
    pub(super) fn new(
        client: Client,
        config: &ElectionConfig,
        handed: Arc<Notify>,
    ) -> PluginLeases {
        let api = Api::namespaced(client.clone(), &config.lease_namespace);
        PluginLeases {
            watch: LeaseWatch::start(api, PLUGIN_LABEL, config.lease_duration, handed),
            client,
            config: config.clone(),
            leases: BTreeMap::new(),
            ignored: BTreeSet::new(),
        }
    }

    /// One round: each plugin assigned here (`mine`) and run here (`runs`) is
    /// acquired or, when `renewing` (a round on schedule, not one woken early),
    /// renewed; each other one held here is handed over.
    pub(super) async fn step_all(
        &mut self,
        mine: &BTreeSet<String>,
        runs: &[String],
        renewing: bool,
        shared: &Shared,
    ) {
        let config = &self.config;
        let steps = self.leases.iter_mut().map(|(plugin, lease)| {
            let wanted = mine.contains(plugin) && runs.contains(plugin);
            lease.step(plugin, wanted, renewing, config, shared)
        });
        futures::future::join_all(steps).await;
        self.leases.retain(|plugin, lease| {
            let kept = lease.held.is_some() || runs.contains(plugin);
            if !kept {
                shared.metrics.forget_leading(lease.elector.lease_name());
            }
            kept
        });
    }

    /// Notes who holds each plugin's Lease (for `/plugins`, and so a standby knows
    /// a plugin is reported on by its holder), as the watch saw them; each plugin run
    /// here learns when its Lease's record changed, so once it is assigned here an
    /// expired holder is judged from when its renewals stopped, not from then.
    /// Returns each plugin's holder (none for a released Lease).
    pub(super) fn note_holders(&mut self, shared: &Shared) -> BTreeMap<String, String> {
        let mut holders = BTreeMap::new();
        let prefix = format!("{}-", self.config.lease_name);
        let mut ignored = BTreeSet::new();
        for (name, watched) in self.watch.leases() {
            let labels = watched.lease.metadata.labels.as_ref();
            let Some(plugin) = labels.and_then(|l| l.get(PLUGIN_LABEL)) else {
                continue;
            };
            if !name.starts_with(&prefix) {
                continue; // another group's
            }
            // A plugin's Lease is the one named after it; any other carrying its
            // label (written by someone else) says nothing about who runs it.
            if name.strip_prefix(&prefix) != Some(plugin.as_str()) {
                ignored.insert(name.clone());
                continue;
            }
            let held_here = match self.leases.get_mut(plugin) {
                Some(ours) => {
                    ours.elector.saw(&watched.observed, &watched.lease);
                    ours.held.is_some()
                }
                None => false,
            };
            let record = &watched.observed.record;
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
            let holder = shown_holder(record, held_here, &self.config.identity);
            shared.gates.set_holder(plugin, holder);
        }
        self.report_ignored(ignored, shared);
        holders
    }

    /// Says once of each Lease labelled for a plugin but not named after it that it
    /// is ignored, and counts them.
    fn report_ignored(&mut self, ignored: BTreeSet<String>, shared: &Shared) {
        for name in ignored.difference(&self.ignored) {
            tracing::warn!(lease = %wcm_core::logs::shorten(name), label = PLUGIN_LABEL,
                "a Lease labelled for a plugin but not named after it is ignored: a plugin's \
                 Lease is <group>-<plugin>; whoever wrote it may create Leases in this namespace");
        }
        shared.metrics.ignored_leases.set(ignored.len() as i64);
        self.ignored = ignored;
    }

    /// When the plugin Leases were first listed.
    pub(super) fn synced_at(&self) -> Option<Instant> {
        self.watch.synced_at()
    }

    /// When a plugin Lease another replica holds runs out next, as this replica
    /// judges it.
    pub(super) fn next_expiry(&self) -> Option<Instant> {
        self.watch.next_expiry(&self.config.identity)
    }

    /// Takes part in the Lease of every plugin that `runs` here.
    pub(super) fn track(&mut self, runs: &[String], shared: &Shared) {
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
    pub(super) async fn release_all(&mut self, shared: &Shared) {
        let held = self.leases.iter_mut().filter(|(_, l)| l.held.is_some());
        let releases = held.map(|(plugin, lease)| lease.release(plugin, shared));
        futures::future::join_all(releases).await;
    }
}

impl PluginLease {
    async fn step(
        &mut self,
        plugin: &str,
        wanted: bool,
        renewing: bool,
        config: &ElectionConfig,
        shared: &Shared,
    ) {
        match self.held {
            None if wanted => self.acquire(plugin, config, shared).await,
            None => {}
            Some(renewed) if Instant::now() >= renewed + config.renew_deadline => {
                self.lost(plugin, "no renewal within the renew deadline", shared)
            }
            // A round woken early (a Lease changed hands or ran out) renews nothing.
            Some(_) if wanted && self.draining.is_none() && !renewing => {}
            Some(_) if wanted && self.draining.is_none() => {
                self.renew(plugin, config, shared).await
            }
            Some(_) => self.hand_over(plugin, renewing, config, shared).await,
        }
    }

    async fn acquire(&mut self, plugin: &str, config: &ElectionConfig, shared: &Shared) {
        let sent = Instant::now();
        if self.elector.held_by_another(sent) {
            return; // the watch says so: no request until it runs out or is released
        }
        let attempt = timeout(config.retry_period, self.elector.try_acquire_or_renew()).await;
        if let Ok(Ok(Attempt::Leading)) = attempt {
            self.held = Some(sent);
            if let Some(record) = self.elector.observed() {
                let holder = shown_holder(record, true, &config.identity);
                shared.gates.set_holder(plugin, holder);
            }
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
    async fn hand_over(
        &mut self,
        plugin: &str,
        renewing: bool,
        config: &ElectionConfig,
        shared: &Shared,
    ) {
        let since = *self.draining.get_or_insert_with(|| {
            shared.gates.set(plugin, GateState::Draining);
            tracing::info!(
                plugin = %plugin,
                "handing the plugin over: no new keys, in-flight finish"
            );
            Instant::now()
        });
        let done = shared.gates.busy(plugin) == 0 || since.elapsed() >= shared.grace;
        match (done, renewing) {
            (false, true) => self.renew(plugin, config, shared).await,
            (false, false) => {}
            (true, _) => self.release(plugin, shared).await,
        }
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

/// Who holds a plugin's Lease as `/plugins` shows it, from `record`: this replica
/// (`identity`) while it holds the Lease (`held_here`), whatever copy the watch has
/// delivered so far — right after a take-over, the one before this replica's own
/// write; otherwise the record's holder.
fn shown_holder(record: &LeaseRecord, held_here: bool, identity: &str) -> Holder {
    Holder {
        identity: match held_here {
            true => identity.to_string(),
            false => record.holder.clone(),
        },
        transitions: record.transitions,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_held_here_shows_this_replica_even_over_a_copy_from_before_its_write() {
        let before = LeaseRecord {
            holder: "replica-b".into(),
            transitions: 3,
            ..LeaseRecord::default()
        };
        let shown = |held| shown_holder(&before, held, "replica-a");
        assert_eq!(shown(true).identity, "replica-a");
        assert_eq!(shown(false).identity, "replica-b");
        assert_eq!(shown(true).transitions, 3);
    }
}
