//! The cluster behind a plugin's `cluster` imports, as one trait: the live cluster
//! ([`ClusterAccess`]) in the daemon, an in-memory one in `wasm-controller-manager
//! test` ([`crate::testkit`]). The sandbox, the input checks and the error cases are
//! the same for both; only where objects come from and where writes go differs.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use kube::core::GroupVersionKind;

use super::{CapabilityError, ClusterAccess, Target};
use crate::budget::PluginBudget;
use crate::contract::{DeleteOptions, EventRecord, PatchKind};
use crate::metrics::plugin::PluginMetrics;

/// One plugin's view of a cluster. Reads answer from caches at once; writes may wait
/// (for the API server, for the plugin's API rate), so they return futures.
pub trait PluginCluster: Send + Sync + std::fmt::Debug {
    /// The plugin this view belongs to.
    fn plugin(&self) -> &str;

    /// The plugin's budgets (host-call counters, log rate, result size).
    fn budget(&self) -> &Arc<PluginBudget>;

    /// The metrics the plugin declared.
    fn plugin_metrics(&self) -> &PluginMetrics;

    /// The time the plugin's wall clock shows, since the Unix epoch, if it stands
    /// still (the test kit's, so reports do not change from run to run); none for
    /// the real clock.
    fn fixed_clock(&self) -> Option<Duration> {
        None
    }

    /// One object's JSON: from a cache, or live for a kind declared `get` but not
    /// watched.
    fn get<'a>(&'a self, target: &'a Target) -> BoxFuture<'a, Result<Arc<str>, CapabilityError>>;

    /// JSON of the objects of `gvk` in `namespace` (all if none) matching
    /// `label_selector`, sorted by namespace and name: all, or the first `limit`.
    /// A future: matching thousands of objects gives the thread back between slices.
    fn list<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
        namespace: Option<&'a str>,
        label_selector: Option<&'a str>,
        limit: Option<usize>,
    ) -> BoxFuture<'a, Result<Vec<Arc<str>>, CapabilityError>>;

    /// How many objects `list` would return.
    fn count<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
        namespace: Option<&'a str>,
        label_selector: Option<&'a str>,
    ) -> BoxFuture<'a, Result<usize, CapabilityError>>;

    /// Sets and removes labels as the plugin's field manager.
    fn patch_labels<'a>(
        &'a self,
        target: &'a Target,
        set: &'a [(String, String)],
        remove: &'a [String],
    ) -> BoxFuture<'a, Result<(), CapabilityError>>;

    /// Adds and removes finalizers, leaving the others alone.
    fn patch_finalizers<'a>(
        &'a self,
        target: &'a Target,
        add: &'a [String],
        remove: &'a [String],
    ) -> BoxFuture<'a, Result<(), CapabilityError>>;

    /// Server-side applies a whole object (JSON); returns the stored object's JSON.
    fn apply<'a>(
        &'a self,
        object: &'a str,
        force: bool,
    ) -> BoxFuture<'a, Result<String, CapabilityError>>;

    /// Creates an object (JSON); returns it as stored.
    fn create<'a>(&'a self, object: &'a str) -> BoxFuture<'a, Result<String, CapabilityError>>;

    /// Patches `target` or its subresource; returns it as stored.
    fn patch<'a>(
        &'a self,
        target: &'a Target,
        kind: PatchKind,
        patch: &'a str,
        subresource: Option<&'a str>,
    ) -> BoxFuture<'a, Result<String, CapabilityError>>;

    /// Replaces an object still at the resourceVersion it carries.
    fn update<'a>(&'a self, object: &'a str) -> BoxFuture<'a, Result<String, CapabilityError>>;

    /// Merges `status` (JSON of `.status`) into the status of `target`.
    fn patch_status<'a>(
        &'a self,
        target: &'a Target,
        status: &'a str,
    ) -> BoxFuture<'a, Result<(), CapabilityError>>;

    /// Deletes `target` if the preconditions of `options` hold.
    fn delete<'a>(
        &'a self,
        target: &'a Target,
        options: &'a DeleteOptions,
    ) -> BoxFuture<'a, Result<(), CapabilityError>>;

    /// Records `event` about `regarding` (and `related`), as the plugin; the event's
    /// own references are what the plugin passed, the targets their checked forms.
    fn record_event<'a>(
        &'a self,
        regarding: &'a Target,
        related: Option<&'a Target>,
        event: &'a EventRecord,
    ) -> BoxFuture<'a, Result<(), CapabilityError>>;
}

impl PluginCluster for ClusterAccess {
    fn plugin(&self) -> &str {
        ClusterAccess::plugin(self)
    }

    fn budget(&self) -> &Arc<PluginBudget> {
        ClusterAccess::budget(self)
    }

    fn plugin_metrics(&self) -> &PluginMetrics {
        ClusterAccess::plugin_metrics(self)
    }

    fn get<'a>(&'a self, target: &'a Target) -> BoxFuture<'a, Result<Arc<str>, CapabilityError>> {
        Box::pin(ClusterAccess::get(self, target))
    }

    fn list<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
        namespace: Option<&'a str>,
        label_selector: Option<&'a str>,
        limit: Option<usize>,
    ) -> BoxFuture<'a, Result<Vec<Arc<str>>, CapabilityError>> {
        Box::pin(ClusterAccess::list(
            self,
            gvk,
            namespace,
            label_selector,
            limit,
        ))
    }

    fn count<'a>(
        &'a self,
        gvk: &'a GroupVersionKind,
        namespace: Option<&'a str>,
        label_selector: Option<&'a str>,
    ) -> BoxFuture<'a, Result<usize, CapabilityError>> {
        Box::pin(ClusterAccess::count(self, gvk, namespace, label_selector))
    }

    fn patch_labels<'a>(
        &'a self,
        target: &'a Target,
        set: &'a [(String, String)],
        remove: &'a [String],
    ) -> BoxFuture<'a, Result<(), CapabilityError>> {
        Box::pin(ClusterAccess::patch_labels(self, target, set, remove))
    }

    fn patch_finalizers<'a>(
        &'a self,
        target: &'a Target,
        add: &'a [String],
        remove: &'a [String],
    ) -> BoxFuture<'a, Result<(), CapabilityError>> {
        Box::pin(ClusterAccess::patch_finalizers(self, target, add, remove))
    }

    fn apply<'a>(
        &'a self,
        object: &'a str,
        force: bool,
    ) -> BoxFuture<'a, Result<String, CapabilityError>> {
        Box::pin(ClusterAccess::apply(self, object, force))
    }

    fn create<'a>(&'a self, object: &'a str) -> BoxFuture<'a, Result<String, CapabilityError>> {
        Box::pin(ClusterAccess::create(self, object))
    }

    fn patch<'a>(
        &'a self,
        target: &'a Target,
        kind: PatchKind,
        patch: &'a str,
        subresource: Option<&'a str>,
    ) -> BoxFuture<'a, Result<String, CapabilityError>> {
        Box::pin(ClusterAccess::patch(self, target, kind, patch, subresource))
    }

    fn update<'a>(&'a self, object: &'a str) -> BoxFuture<'a, Result<String, CapabilityError>> {
        Box::pin(ClusterAccess::update(self, object))
    }

    fn patch_status<'a>(
        &'a self,
        target: &'a Target,
        status: &'a str,
    ) -> BoxFuture<'a, Result<(), CapabilityError>> {
        Box::pin(ClusterAccess::patch_status(self, target, status))
    }

    fn delete<'a>(
        &'a self,
        target: &'a Target,
        options: &'a DeleteOptions,
    ) -> BoxFuture<'a, Result<(), CapabilityError>> {
        Box::pin(ClusterAccess::delete(self, target, options))
    }

    fn record_event<'a>(
        &'a self,
        regarding: &'a Target,
        related: Option<&'a Target>,
        event: &'a EventRecord,
    ) -> BoxFuture<'a, Result<(), CapabilityError>> {
        Box::pin(ClusterAccess::record_event(self, regarding, related, event))
    }
}
