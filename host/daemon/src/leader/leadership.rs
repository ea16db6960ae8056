//! What the plugins of one replica act behind: the replica's one gate (no election,
//! or one Lease), or a gate per plugin (a Lease per plugin).

use super::plugin_gates::{Holder, PluginGates};
use wcm_core::leader_gate::LeaderGate;

/// This replica's leadership as the manager and its controllers see it.
#[derive(Debug, Clone)]
pub enum Leadership {
    /// One gate for every plugin: always open without election, else open while
    /// this replica holds the Lease.
    Replica(LeaderGate),
    /// A gate per plugin, open while this replica holds the plugin's Lease.
    PerPlugin(PluginGates),
}

impl Leadership {
    /// The gate `plugin`'s controller reconciles and writes behind. In per-plugin
    /// mode the plugin is wanted on this replica while the gate is kept.
    pub fn gate_for(&self, plugin: &str) -> LeaderGate {
        match self {
            Leadership::Replica(gate) => gate.clone(),
            Leadership::PerPlugin(gates) => gates.gate(plugin),
        }
    }

    /// Whether this replica reports on `plugin` (writes its `WasmPlugin`'s status):
    /// the leader with one Lease; with a Lease per plugin, the plugin's holder, or
    /// every replica while no replica holds it (it is not running anywhere: each
    /// reports the same pull or load failure, and writes only what changed).
    pub fn reports_on(&self, plugin: &str) -> bool {
        match self {
            Leadership::Replica(gate) => gate.is_open(),
            Leadership::PerPlugin(gates) => {
                let held_elsewhere = gates.holder(plugin).is_some_and(|h| !h.identity.is_empty());
                gates.holds(plugin) || !held_elsewhere
            }
        }
    }

    /// Whether this replica acts for every plugin: no election, or it holds the one
    /// Lease. False with a Lease per plugin (each plugin's gate says).
    pub fn leads_all(&self) -> bool {
        match self {
            Leadership::Replica(gate) => gate.is_open(),
            Leadership::PerPlugin(_) => false,
        }
    }

    /// The plugins run here that this replica's membership Lease does not name yet
    /// (per-plugin mode); none otherwise.
    pub fn unannounced(&self) -> Vec<String> {
        match self {
            Leadership::Replica(_) => Vec::new(),
            Leadership::PerPlugin(gates) => gates.unannounced(),
        }
    }

    /// Who holds `plugin`'s Lease, in per-plugin mode, as last read.
    pub fn holder(&self, plugin: &str) -> Option<Holder> {
        match self {
            Leadership::Replica(_) => None,
            Leadership::PerPlugin(gates) => gates.holder(plugin),
        }
    }
}
