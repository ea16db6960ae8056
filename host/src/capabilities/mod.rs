//! What a plugin may do in the cluster: the logic behind the WIT `cluster` imports.
//!
//! Each capability checks the plugin's declared permissions, validates its input, and
//! delegates to [`crate::kube`]. Reads come from the plugin's informer caches; writes go
//! to the API server under the plugin's own field manager. Failures are returned as
//! [`CapabilityError`], which the plugin receives as the WIT `error`. Reads are here;
//! writes, made only while this replica leads, are in `writes`.

pub mod bounds;
mod declared;
mod error;
mod granted;
mod head;
mod listing;
mod object_writes;
mod plugin_cluster;
mod target;
mod writes;

pub use declared::{Declared, grants, list_call, list_selector, list_what};
pub use error::CapabilityError;
pub(crate) use error::from_kube;
pub use granted::{Granted, Review};
use listing::Listing;
pub(crate) use object_writes::{object_target, patch_value, patch_verb, require_version};
pub use plugin_cluster::PluginCluster;
pub use target::{Target, check_kind, check_namespace};
pub(crate) use writes::applied_target;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use kube::Client;
use kube::core::GroupVersionKind;

use crate::budget::PluginBudget;
use crate::contract::Verb;
use crate::kube::events::PluginRecorder;
use crate::kube::informer::{Informer, InformerRegistry};
use crate::leader::LeaderGate;
use crate::metrics::plugin::PluginMetrics;

/// The cluster as one plugin sees it: its caches, its permissions, its identity.
pub struct ClusterAccess {
    /// The plugin's name, declared verbs and budgets.
    declared: Declared,
    client: Client,
    registry: Arc<InformerRegistry>,
    /// The informers of the plugin's watches; `get` and `list` read their caches.
    informers: Vec<Arc<Informer>>,
    /// Which of those RBAC lets the plugin read (by watch index).
    granted: Arc<Granted>,
    recorder: PluginRecorder,
    /// Writes are made only while this replica leads.
    leader: LeaderGate,
}

impl std::fmt::Debug for ClusterAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterAccess")
            .field("plugin", &self.declared.plugin)
            .finish()
    }
}

impl ClusterAccess {
    /// Access for the plugin of `budget` with its informers (readable as `granted`
    /// says) and declared grants; writes go through only while `leader` is open,
    /// each within the budget.
    pub fn new(
        budget: Arc<PluginBudget>,
        instance: &str,
        registry: Arc<InformerRegistry>,
        client: Client,
        (informers, granted): (Vec<Arc<Informer>>, Arc<Granted>),
        grants: HashMap<GroupVersionKind, HashSet<Verb>>,
        leader: LeaderGate,
    ) -> ClusterAccess {
        ClusterAccess {
            leader,
            recorder: PluginRecorder::new(client.clone(), &budget.plugin, instance),
            declared: Declared::new(budget, grants),
            client,
            registry,
            informers,
            granted,
        }
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
    pub fn plugin_metrics(&self) -> &PluginMetrics {
        &self.declared.metrics
    }

    /// What RBAC last granted the plugin.
    pub fn granted(&self) -> &Arc<Granted> {
        &self.granted
    }

    /// The plugin's budgets.
    pub fn budget(&self) -> &Arc<PluginBudget> {
        &self.declared.budget
    }

    /// Informers of `gvk` whose scope can hold objects of `namespace` (any, if none)
    /// and that RBAC lets the plugin read: an error naming the missing rule when every
    /// such watch is closed, and `not_watched` when there is none.
    fn readable_caches<'a>(
        &'a self,
        op: &str,
        what: &str,
        gvk: &'a GroupVersionKind,
        namespace: Option<&'a str>,
    ) -> Result<Vec<&'a Arc<Informer>>, CapabilityError> {
        let matching: Vec<(usize, &Arc<Informer>)> = self.caches_of(gvk, namespace).collect();
        let Some((first, _)) = matching.first() else {
            return Err(self.declared.not_watched(op, what, gvk));
        };
        let open: Vec<&Arc<Informer>> = (matching.iter())
            .filter(|(index, _)| self.granted.is_open(*index))
            .map(|(_, informer)| *informer)
            .collect();
        if open.is_empty() {
            let lacking: Vec<String> = (self.granted.lacking(*first).iter())
                .map(ToString::to_string)
                .collect();
            return Err(CapabilityError::Forbidden(format!(
                "{op} {what}: plugin {}'s ServiceAccount is not granted: {} (the host does \
                 not serve it this kind until RBAC grants it)",
                self.declared.plugin,
                lacking.join("; ")
            )));
        }
        Ok(open)
    }

    /// Informers of `gvk` whose scope can hold objects of `namespace` (any, if none),
    /// with their watch index, whether RBAC lets the plugin read them or not.
    fn caches_of<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
        namespace: Option<&'a str>,
    ) -> impl Iterator<Item = (usize, &'a Arc<Informer>)> + 'a {
        self.informers.iter().enumerate().filter(move |(_, i)| {
            let scope = i.scope();
            scope.gvk == *gvk
                && match (&scope.namespace, namespace) {
                    (Some(watched), Some(ns)) => watched == ns,
                    _ => true,
                }
        })
    }

    /// One object's JSON: from the cache of a watched kind, else straight from the
    /// API server if the plugin declared `get` on the kind (as the plugin, within its
    /// API rate).
    pub async fn get(&self, target: &Target) -> Result<Arc<str>, CapabilityError> {
        let namespace = target.namespace.as_deref();
        let watched = self.caches_of(&target.gvk, namespace).next().is_some();
        if !watched && self.declared.allows(Verb::Get, &target.gvk) {
            return self.get_live(target).await;
        }
        let what = target.to_string();
        let caches = self.readable_caches("get", &what, &target.gvk, namespace)?;
        let json = (caches.iter())
            .find_map(|i| i.cache().get(target.namespace.as_deref(), &target.name))
            .map(|o| o.json.clone())
            .ok_or_else(|| CapabilityError::NotFound(format!("get {target}: not in the cache")))?;
        self.declared
            .check_result_size(&format!("get {target}"), json.len())?;
        Ok(json)
    }

    /// A live read of a kind the plugin does not watch: counted against its API rate
    /// like a write, answered without managedFields, bounded by its result size.
    async fn get_live(&self, target: &Target) -> Result<Arc<str>, CapabilityError> {
        let op = format!("get {target}");
        self.declared.budget.api_request().await;
        let kind = self.resolve(&op, &target.gvk).await?;
        let (ns, name) = (target.namespace.as_deref(), &target.name);
        let mut found = (crate::kube::writes::get(&self.client, &kind, ns, name).await)
            .map_err(|e| self.refused(&op, e))?;
        found.metadata.managed_fields = None;
        let json = serde_json::to_string(&found)
            .map_err(|e| CapabilityError::Other(format!("{op}: {e}")))?;
        self.declared.check_result_size(&op, json.len())?;
        Ok(json.into())
    }

    /// JSON of the cached objects of `gvk` in `namespace` (all if none) matching
    /// `label_selector`, by namespace and name: all of them, or the first `limit`.
    pub async fn list(
        &self,
        gvk: &GroupVersionKind,
        namespace: Option<&str>,
        label_selector: Option<&str>,
        limit: Option<usize>,
    ) -> Result<Vec<Arc<str>>, CapabilityError> {
        let op = list_call(limit).name();
        let listing = self.listing(op, gvk, namespace, label_selector)?;
        let found = listing.first(limit).await;
        let bytes = found.iter().map(|o| o.json.len()).sum();
        self.declared
            .check_result_size(&format!("{op} {}", listing.what), bytes)?;
        Ok(found.into_iter().map(|o| o.json.clone()).collect())
    }

    /// How many objects `list` would return, copying none.
    pub async fn count(
        &self,
        gvk: &GroupVersionKind,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<usize, CapabilityError> {
        let listing = self.listing("count", gvk, namespace, label_selector)?;
        Ok(listing.count().await)
    }

    /// What a `list`, `list-first` or `count` (`op`) reads: the readable caches of
    /// `gvk` and which of their objects it wants.
    fn listing<'a>(
        &'a self,
        op: &str,
        gvk: &'a GroupVersionKind,
        namespace: Option<&'a str>,
        label_selector: Option<&str>,
    ) -> Result<Listing<'a>, CapabilityError> {
        let what = list_what(gvk, namespace);
        let caches = self.readable_caches(op, &what, gvk, namespace)?;
        let selector = list_selector(op, &what, label_selector)?;
        Ok(Listing {
            what,
            caches,
            namespace,
            selector,
        })
    }
}
