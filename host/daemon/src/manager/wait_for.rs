//! Why a registered plugin cannot start yet, as a load finds it and as the waiting
//! plugins are shown: a kind not served, rules its ServiceAccount lacks, or a review
//! that could not be made.

use crate::controller::ForbiddenError;
use crate::status::State;
use wcm_core::kube::discovery::DiscoveryError;
use wcm_core::rights::access::ReviewError;

/// What a registered plugin waits for.
#[derive(Debug)]
pub(super) enum WaitFor {
    /// A kind the API server does not serve.
    Kind(DiscoveryError),
    /// Rules its ServiceAccount lacks.
    Rights(Box<ForbiddenError>),
    /// A review of its rights that could not be made.
    Review(Box<ReviewError>),
}

impl WaitFor {
    /// What the log says, before the details.
    pub(super) fn summary(&self) -> &'static str {
        match self {
            WaitFor::Kind(_) => "plugin waits for a kind the API server does not serve",
            WaitFor::Rights(_) => "plugin does not start yet: its ServiceAccount lacks a rule",
            WaitFor::Review(_) => "plugin waits: its rights cannot be reviewed",
        }
    }

    /// The table's state and reason.
    pub(super) fn row(&self) -> (State, String) {
        match self {
            WaitFor::Kind(e) => (
                State::Waiting,
                format!(
                    "waiting for {}: not served by the API server (is its CRD installed?)",
                    e.gvk
                ),
            ),
            WaitFor::Rights(e) => (State::Forbidden, e.to_string()),
            WaitFor::Review(e) => (State::Waiting, e.to_string()),
        }
    }
}
