//! The label sets and label values of the host's own (`wcm_`) series, and the fixed
//! lists of values a plugin's series can take (so they can all be dropped).

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};

use crate::contract::Capability;
use crate::limits::{Limit, Recycle, label_values};

/// Labels of per-plugin series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PluginLabels {
    /// The plugin's registered name.
    pub plugin: String,
}

label_values! {
    /// How a host call ended, as the plugin saw it.
    pub enum HostCallResult {
        /// It succeeded.
        ok,
        /// `not-found`.
        not_found,
        /// `forbidden`.
        forbidden,
        /// `conflict`.
        conflict,
        /// `invalid`.
        invalid,
        /// `unavailable`.
        unavailable,
        /// `other`.
        other,
        /// The host failed at its own part: the plugin's call trapped.
        host_fault,
    }
}

impl HostCallResult {
    /// The result of a call's outcome.
    pub fn of<T>(result: &Result<T, crate::contract::GuestError>) -> HostCallResult {
        use crate::contract::ErrorCode as E;
        let Err(e) = result else {
            return HostCallResult::ok;
        };
        match e.code {
            E::NotFound => HostCallResult::not_found,
            E::Forbidden => HostCallResult::forbidden,
            E::Conflict | E::AlreadyExists => HostCallResult::conflict,
            E::Invalid => HostCallResult::invalid,
            E::Unavailable => HostCallResult::unavailable,
            E::Other => HostCallResult::other,
        }
    }
}

/// Labels of the host-call counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HostCallLabels {
    /// The plugin's registered name.
    pub plugin: String,
    /// The WIT function: `get`, `list`, `patch-labels`, ...
    pub function: Capability,
    /// How it ended.
    pub result: HostCallResult,
}

label_values! {
    /// Why a call into a plugin failed.
    pub enum FailureCause {
        /// A trap: panic, `unreachable`, out-of-bounds access, stack exhaustion.
        trap,
        /// Past its deadline.
        timeout,
        /// Past its memory limit.
        memory,
        /// Past its bound on host handles or table elements.
        handles,
        /// The instance could not be created.
        instantiate,
        /// The plugin returned an error.
        guest_error,
        /// The host failed at its own part of a host call (not counted against the
        /// plugin's health).
        host_fault,
    }
}

/// Labels of the recycled-instance counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RecycleLabels {
    /// The plugin's registered name.
    pub plugin: String,
    /// Why its instance was retired.
    pub reason: Recycle,
}

/// A capability's series are labelled with its name (`function="patch-labels"`).
impl EncodeLabelValue for Capability {
    fn encode(
        &self,
        encoder: &mut prometheus_client::encoding::LabelValueEncoder,
    ) -> Result<(), std::fmt::Error> {
        std::fmt::Write::write_str(encoder, self.name())
    }
}

/// Labels of the call-failure counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FailureLabels {
    /// The plugin's registered name.
    pub plugin: String,
    /// Why the call failed.
    pub cause: FailureCause,
}

/// Labels of the load-time histogram.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LoadStepLabels {
    /// `read`, `compile`, `link` or `register`.
    pub step: String,
}

/// Labels of the limit counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LimitLabels {
    /// The plugin's registered name.
    pub plugin: String,
    /// Which limit.
    pub limit: Limit,
}

/// Labels of the plugin-state gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabels {
    /// The plugin's registered name.
    pub plugin: String,
    /// `running`, `degraded`, `crash-looping`, `failed`, `waiting` or `forbidden`.
    pub state: String,
}

/// Labels of the access review counter: whose rights, and what the API server said.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AccessReviewLabels {
    /// The plugin whose ServiceAccount was reviewed.
    pub plugin: String,
    /// What the API server said.
    pub result: ReviewResult,
}

label_values! {
    /// What a SubjectAccessReview of a plugin's rule said.
    pub enum ReviewResult {
        /// The rule is granted.
        allowed,
        /// It is not.
        denied,
        /// The review failed (the API server unreachable, the host not allowed to ask).
        error,
    }
}

/// Labels of per-informer series: what the watch covers.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct InformerLabels {
    /// `group/version/Kind` (`v1/Pod` for the core group).
    pub kind: String,
    /// The namespace, or empty for all.
    pub namespace: String,
    /// The label selector, or empty for none.
    pub selector: String,
    /// The field selector, or empty for none.
    pub fields: String,
    /// `object` for whole objects, `metadata` for a metadata-only informer.
    pub view: &'static str,
}

/// Labels of the leader-identity series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LeaderLabels {
    /// The Lease holder's identity; empty when the Lease is free.
    pub identity: String,
}
