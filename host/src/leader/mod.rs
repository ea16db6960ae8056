//! Leader election on a `coordination.k8s.io/v1` Lease, following client-go's
//! algorithm: several replicas run, one acts.
//!
//! The decision rules (`record`), the settings (`config`), one candidate's reads and
//! writes of the Lease (`elector`), the campaign that acquires, renews and reports
//! loss (`campaign`), and the gate workers and writes consult (`gate`).

mod campaign;
mod config;
mod elector;
mod gate;
mod record;

pub use campaign::{Campaign, Lost};
pub use config::{ConfigError, ElectionConfig, JITTER_FACTOR};
pub use elector::{Attempt, Elector};
pub use gate::LeaderGate;
pub use record::{Decision, LeaseRecord, Observation, decide, observe, released};
