//! The label sets and label values of the host's own (`wcm_`) series, and the fixed
//! lists of values a plugin's series can take (so they can all be dropped).

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};

/// Labels of per-plugin series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PluginLabels {
    /// The plugin's registered name.
    pub plugin: String,
}

/// A per-plugin limit that refused, dropped, cut, delayed or stopped something.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)] // label values are lower-case on the wire
pub enum Limit {
    /// A request waited for the plugin's API rate (`--plugin-api-qps`).
    api_rate,
    /// A `get` or `list` answer was larger than `--max-result-mib`.
    result_size,
    /// An Event was dropped by the per-object spam filter.
    events,
    /// A log line was dropped over the plugin's log rate.
    log_rate,
    /// A log line was cut at its maximum size.
    log_size,
    /// An instance hit its memory limit.
    memory,
    /// A call ran past its deadline.
    timeout,
    /// A call hit the bound on host handles or guest tables.
    handles,
    /// A metric update would have made one series more than the plugin's bound.
    metric_series,
}

impl Limit {
    /// Every limit, for removing a plugin's series.
    pub const ALL: [Limit; 9] = [
        Limit::api_rate,
        Limit::result_size,
        Limit::events,
        Limit::log_rate,
        Limit::log_size,
        Limit::memory,
        Limit::timeout,
        Limit::handles,
        Limit::metric_series,
    ];
}

/// How a host call ended, as the plugin saw it.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)] // label values are lower-case on the wire
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
}

impl HostCallResult {
    /// Every result, for removing a plugin's series.
    pub const ALL: [HostCallResult; 7] = [
        HostCallResult::ok,
        HostCallResult::not_found,
        HostCallResult::forbidden,
        HostCallResult::conflict,
        HostCallResult::invalid,
        HostCallResult::unavailable,
        HostCallResult::other,
    ];

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
    pub function: String,
    /// How it ended.
    pub result: HostCallResult,
}

/// Why a call into a plugin failed.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)] // label values are lower-case on the wire
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
}

impl FailureCause {
    /// Every cause, for removing a plugin's series.
    pub const ALL: [FailureCause; 6] = [
        FailureCause::trap,
        FailureCause::timeout,
        FailureCause::memory,
        FailureCause::handles,
        FailureCause::instantiate,
        FailureCause::guest_error,
    ];
}

/// Why a reused plugin instance was retired (`--plugin-override NAME:reuse-instance-calls=N`).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)] // label values are lower-case on the wire
pub enum Recycle {
    /// It served its number of reconciles.
    calls,
    /// Its linear memory grew past the bound since its first reconcile.
    memory,
    /// A call trapped, timed out or hit a limit: its state is unknown.
    failure,
    /// A new version of the plugin replaced the one it runs.
    upgrade,
}

impl Recycle {
    /// Every reason, for removing a plugin's series.
    pub const ALL: [Recycle; 4] = [
        Recycle::calls,
        Recycle::memory,
        Recycle::failure,
        Recycle::upgrade,
    ];
}

/// Labels of the recycled-instance counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RecycleLabels {
    /// The plugin's registered name.
    pub plugin: String,
    /// Why its instance was retired.
    pub reason: Recycle,
}

/// The WIT functions of `cluster`, as `wcm_host_calls_total` names them.
pub const HOST_FUNCTIONS: [&str; 12] = [
    "get",
    "list",
    "patch-labels",
    "patch-finalizers",
    "metrics",
    "create",
    "patch",
    "update",
    "record-event",
    "apply",
    "patch-status",
    "delete",
];

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
    /// `running`, `degraded`, `crash-looping` or `forbidden`.
    pub state: String,
}

/// The states of a running plugin, as the state gauge names them.
pub const PLUGIN_STATES: [&str; 4] = ["running", "degraded", "crash-looping", "forbidden"];

/// Labels of the access review counter: whose rights, and what the API server said.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AccessReviewLabels {
    /// The plugin whose ServiceAccount was reviewed.
    pub plugin: String,
    /// `allowed`, `denied` or `error`.
    pub result: String,
}

/// The results an access review counts under.
pub(super) const REVIEW_RESULTS: [&str; 3] = ["allowed", "denied", "error"];

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
