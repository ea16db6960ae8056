//! What a plugin may do in the cluster: the logic behind the WIT `cluster` imports,
//! written once over two backends.
//!
//! Every import runs one pipeline in [`ClusterAccess`]: the target checked (in
//! `host_state`, before anything else) → the declared verb → the body's shape →
//! the kind served → admission (this replica leads, the plugin's API rate) → the
//! [`Backend`] →
//! read-your-writes → the result's size. Reads take the plugin's watches of a kind that
//! RBAC leaves open. The backend is the live cluster ([`LiveCluster`]) in the daemon and
//! the in-memory one in `wasm-controller-manager test`; since only the backend differs,
//! a plugin meets the same refusals, worded the same, in both. Failures are
//! [`CapabilityError`]s, which the plugin receives as the WIT `error`.

mod backend;
pub mod bounds;
mod declared;
mod error;
mod head;
mod live;
mod object_writes;
mod op;
mod reads;
mod target;
mod writes;

pub use backend::{
    Asked, AskedWrite, Backend, Checked, FinalizerChange, FinalizerList, Form, LabelChange,
    LabelPatch, Regarding, Selection, Write,
};
pub use declared::{Declared, grants, list_call, list_selector, list_what};
pub use error::CapabilityError;
pub(crate) use error::from_kube;
pub use live::LiveCluster;
pub use op::Op;
pub use target::{Target, check_kind, check_namespace};

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube::core::GroupVersionKind;

use crate::contract::Verb;
use crate::kube::informer::{Informer, InformerRegistry};
use crate::tape::Recorder;

use crate::budget::PluginBudget;
use crate::leader_gate::LeaderGate;
use crate::metrics::plugin::PluginMetrics;
use crate::rights::Granted;

/// The cluster as one plugin sees it: what it declared, what RBAC grants it, whether
/// this replica leads, and the backend its calls reach.
pub struct ClusterAccess {
    /// The plugin's name, declared verbs, budgets and metrics.
    declared: Declared,
    /// Which of its watches RBAC lets it read (by watch index); a `403` from the
    /// backend asks for a review of it at once.
    granted: Arc<Granted>,
    /// Writes are made only while this replica leads.
    leader: LeaderGate,
    /// Where reads come from and writes go.
    backend: Arc<dyn Backend>,
    /// Writes a transcript of each reconcile's calls, if the operator asked.
    recorder: Option<Arc<Recorder>>,
}

impl std::fmt::Debug for ClusterAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterAccess")
            .field("plugin", &self.declared.plugin)
            .field("backend", &self.backend)
            .finish()
    }
}

impl ClusterAccess {
    /// The live cluster as the plugin of `budget` sees it: its informers (readable as
    /// `granted` says) and declared grants; writes go through `client` only while
    /// `leader` is open, each within the budget. `instance` names this replica in the
    /// Events it records.
    pub fn live(
        budget: Arc<PluginBudget>,
        instance: &str,
        registry: Arc<InformerRegistry>,
        client: Client,
        (informers, granted): (Vec<Arc<Informer>>, Arc<Granted>),
        grants: HashMap<GroupVersionKind, HashSet<Verb>>,
        leader: LeaderGate,
    ) -> ClusterAccess {
        let backend = LiveCluster::new(budget.clone(), instance, registry, client, informers);
        let declared = Declared::new(budget, grants);
        ClusterAccess::over(declared, granted, leader, Arc::new(backend))
    }

    /// The plugin of `declared` over `backend`, reading the watches `granted` leaves
    /// open and writing while `leader` is open.
    pub fn over(
        declared: Declared,
        granted: Arc<Granted>,
        leader: LeaderGate,
        backend: Arc<dyn Backend>,
    ) -> ClusterAccess {
        ClusterAccess {
            declared,
            granted,
            leader,
            backend,
            recorder: None,
        }
    }

    /// This access with each reconcile's calls recorded by `recorder`, if any.
    pub fn with_recorder(mut self, recorder: Option<Arc<Recorder>>) -> ClusterAccess {
        self.recorder = recorder;
        self
    }

    /// What records this plugin's reconciles, if anything does.
    pub fn recorder(&self) -> Option<&Arc<Recorder>> {
        self.recorder.as_ref()
    }

    /// This access writing only while `leader` is open.
    pub fn with_leader(mut self, leader: LeaderGate) -> ClusterAccess {
        self.leader = leader;
        self
    }

    /// The plugin this access belongs to.
    pub fn plugin(&self) -> &str {
        &self.declared.plugin
    }

    /// This access with the plugin's declared metrics.
    pub fn with_metrics(mut self, metrics: Arc<PluginMetrics>) -> ClusterAccess {
        self.declared = self.declared.with_metrics(metrics);
        self
    }

    /// The plugin's declared metrics.
    pub fn plugin_metrics(&self) -> &Arc<PluginMetrics> {
        &self.declared.metrics
    }

    /// What RBAC last granted the plugin.
    pub fn granted(&self) -> &Arc<Granted> {
        &self.granted
    }

    /// The plugin's budgets (host-call counters, API and log rates, result size).
    pub fn budget(&self) -> &Arc<PluginBudget> {
        &self.declared.budget
    }

    /// The time the plugin's wall clock shows if it stands still (the test kit's);
    /// none for the real clock.
    pub fn fixed_clock(&self) -> Option<Duration> {
        self.backend.fixed_clock()
    }
}
