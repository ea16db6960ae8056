//! Leader election on `coordination.k8s.io/v1` Leases, following client-go's
//! algorithm: several replicas run, and either one acts (one Lease) or each plugin
//! runs on one of them (a Lease per plugin).
//!
//! The decision rules (`record`), the settings (`config`), one candidate's reads and
//! writes of a Lease (`elector`), the single campaign that acquires, renews and
//! reports loss (`campaign`), the gate workers and writes consult (`gate`); for the
//! per-plugin mode the replicas' membership (`members`), who should hold which plugin
//! (`assign`), the plugins' gates (`plugin_gates`), the election that drives them
//! (`per_plugin`), its plugin Leases (`plugin_leases`) and the watch through which it
//! sees the group's Leases (`lease_watch`). Both elections run on a
//! thread of their own (`thread`).

mod assign;
mod campaign;
mod config;
mod elector;
mod leadership;
mod lease_watch;
mod members;
mod per_plugin;
mod plugin_gates;
mod plugin_leases;
mod record;
mod thread;

pub use assign::assign;
pub use campaign::{Campaign, Lost};
pub use config::{ConfigError, ElectionConfig, ElectionMode, JITTER_FACTOR};
pub use elector::{Attempt, Elector};
pub use leadership::Leadership;
pub use members::{
    MEMBER_LABEL, PLUGINS_ANNOTATION, SETTLED_ANNOTATION, lease_name as member_lease_name,
};
pub use per_plugin::PluginElection;
pub use plugin_gates::{Holder, PluginGates};
pub use plugin_leases::PLUGIN_LABEL;
pub use record::{Decision, LeaseRecord, Observation, decide, observe, released};
