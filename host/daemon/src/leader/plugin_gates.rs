//! The gates of `--leader-elect-mode=per-plugin`, one per plugin this replica runs:
//! the manager's side takes a plugin's gate when it starts the plugin's controller;
//! the election's side sees which plugins are wanted (a gate in use), opens, drains
//! and closes their gates, and notes who holds each Lease for `/plugins`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use wcm_core::leader_gate::{GateState, LeaderGate};

/// Who holds a plugin's Lease, as this replica last read it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Holder {
    /// `holderIdentity`; empty when no replica holds it.
    pub identity: String,
    /// `leaseTransitions`: how often the plugin changed hands.
    pub transitions: i32,
}

/// One plugin's gate and what the election knows of it.
struct Entry {
    state: watch::Sender<GateState>,
    busy: Arc<AtomicUsize>,
    /// Alive while a controller of the plugin holds a gate.
    user: Weak<()>,
    holder: Option<Holder>,
}

/// The per-plugin gates of one replica, shared by the manager and the election, and
/// the plugins its membership Lease last named.
#[derive(Clone, Default)]
pub struct PluginGates(Arc<Mutex<BTreeMap<String, Entry>>>, Arc<Mutex<Announced>>);

/// Since when this replica's membership Lease names each plugin, and how long the
/// others take to read it (a retry period, jittered).
#[derive(Default)]
struct Announced {
    since: BTreeMap<String, Instant>,
    settle: Duration,
}

impl std::fmt::Debug for PluginGates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("PluginGates").field(&self.wanted()).finish()
    }
}

impl PluginGates {
    fn entries(&self) -> MutexGuard<'_, BTreeMap<String, Entry>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `plugin`'s gate, closed until the election acquires its Lease; the plugin is
    /// wanted here as long as a gate of it is kept.
    pub fn gate(&self, plugin: &str) -> LeaderGate {
        let mut entries = self.entries();
        let entry = entries.entry(plugin.to_string()).or_insert_with(|| Entry {
            state: watch::channel(GateState::Closed).0,
            busy: Arc::default(),
            user: Weak::new(),
            holder: None,
        });
        let user = entry.user.upgrade().unwrap_or_else(|| {
            let user = Arc::new(());
            entry.user = Arc::downgrade(&user);
            user
        });
        LeaderGate::of_plugin(entry.state.subscribe(), entry.busy.clone(), user)
    }

    /// Whether this replica may write for `plugin` now (it holds or drains it).
    pub fn holds(&self, plugin: &str) -> bool {
        (self.entries().get(plugin)).is_some_and(|e| *e.state.borrow() != GateState::Closed)
    }

    /// The plugins whose controllers run here, sorted.
    pub fn wanted(&self) -> Vec<String> {
        let entries = self.entries();
        let live = entries.iter().filter(|(_, e)| e.user.strong_count() > 0);
        live.map(|(name, _)| name.clone()).collect()
    }

    /// Sets `plugin`'s gate (a plugin no longer wanted keeps its entry until closed).
    pub fn set(&self, plugin: &str, state: GateState) {
        let mut entries = self.entries();
        if let Some(entry) = entries.get(plugin) {
            entry.state.send_replace(state);
            let unused = entry.user.strong_count() == 0;
            if state == GateState::Closed && unused {
                entries.remove(plugin);
            }
        }
    }

    /// Gates whose announcements count once the others had `settle` to read them.
    pub fn settling_for(settle: Duration) -> PluginGates {
        let gates = PluginGates::default();
        gates.announcements().settle = settle;
        gates
    }

    fn announcements(&self) -> MutexGuard<'_, Announced> {
        self.1.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Notes that this replica's membership Lease now names `plugins`.
    pub fn announced(&self, plugins: &[String]) {
        let mut announced = self.announcements();
        let now = Instant::now();
        let since = plugins
            .iter()
            .map(|p| (p.clone(), *announced.since.get(p).unwrap_or(&now)));
        announced.since = since.collect();
    }

    /// The plugins run here that the other replicas may not know of yet: not named
    /// by the membership Lease, or named less than the settling time ago.
    pub fn unannounced(&self) -> Vec<String> {
        let announced = self.announcements();
        let known = |p: &String| {
            let since = announced.since.get(p);
            since.is_some_and(|t| t.elapsed() >= announced.settle)
        };
        self.wanted().into_iter().filter(|p| !known(p)).collect()
    }

    /// Reconciles of `plugin` in flight here.
    pub fn busy(&self, plugin: &str) -> usize {
        (self.entries().get(plugin)).map_or(0, |e| e.busy.load(Ordering::SeqCst))
    }

    /// Notes who holds `plugin`'s Lease.
    pub fn set_holder(&self, plugin: &str, holder: Holder) {
        if let Some(entry) = self.entries().get_mut(plugin) {
            entry.holder = Some(holder);
        }
    }

    /// Who holds `plugin`'s Lease, as last read; `None` before the first read.
    pub fn holder(&self, plugin: &str) -> Option<Holder> {
        self.entries().get(plugin).and_then(|e| e.holder.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plugin_is_wanted_while_a_gate_of_it_is_kept() {
        let gates = PluginGates::default();
        let first = gates.gate("a");
        let upgrade = gates.gate("a");
        assert_eq!(gates.wanted(), ["a"]);
        assert!(!first.is_open(), "closed until its Lease is held");
        drop(first);
        assert_eq!(gates.wanted(), ["a"], "the upgraded version still runs");
        drop(upgrade);
        assert!(gates.wanted().is_empty());
    }

    #[test]
    fn the_election_opens_drains_and_closes_a_gate_and_counts_its_reconciles() {
        let gates = PluginGates::default();
        let gate = gates.gate("a");
        gates.set("a", GateState::Open);
        assert!(gate.is_open() && gates.holds("a"));
        let busy = gate.busy();
        assert_eq!(gates.busy("a"), 1);
        gates.set("a", GateState::Draining);
        assert!(gate.is_open(), "a draining plugin's reconciles still write");
        drop(busy);
        assert_eq!(gates.busy("a"), 0);
        gates.set("a", GateState::Closed);
        assert!(!gate.is_open() && !gates.holds("a"));
    }

    #[test]
    fn a_plugin_no_longer_run_is_forgotten_once_closed() {
        let gates = PluginGates::default();
        drop(gates.gate("a"));
        gates.set("a", GateState::Draining);
        assert!(gates.holds("a"), "kept while the election still holds it");
        gates.set("a", GateState::Closed);
        assert!(!gates.holds("a") && gates.holder("a").is_none());
    }

    #[test]
    fn a_plugin_counts_as_announced_once_the_others_had_time_to_read_it() {
        let gates = PluginGates::settling_for(Duration::from_millis(50));
        let _gate = gates.gate("a");
        assert_eq!(gates.unannounced(), ["a"]);
        gates.announced(&["a".to_string()]);
        assert_eq!(gates.unannounced(), ["a"], "just written: not read yet");
        std::thread::sleep(Duration::from_millis(60));
        gates.announced(&["a".to_string()]);
        assert!(gates.unannounced().is_empty());
    }
}
