//! Leader election on a `coordination.k8s.io/v1` Lease, following client-go's
//! algorithm: several replicas run, one acts.
//!
//! The decision rules (`record`), the settings (`config`), one candidate's reads and
//! writes of the Lease (`elector`), and the campaign that acquires, renews and reports
//! loss (`campaign`); gating dispatch on leadership builds on them.

mod campaign;
mod config;
mod elector;
mod record;

pub use campaign::{Campaign, Lost};
pub use config::{ConfigError, ElectionConfig, JITTER_FACTOR};
pub use elector::{Attempt, Elector};
pub use record::{Decision, LeaseRecord, Observation, decide, observe, released};
