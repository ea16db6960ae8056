//! The narrow interface between the capability pipeline and a cluster: where objects
//! are read from and where writes go, nothing else.
//!
//! Two clusters implement it: the live one ([`super::LiveCluster`]: informer caches,
//! the API server as the plugin) and the test kit's in-memory one
//! ([`crate::testkit`]). Everything a plugin can be refused for before a request is
//! made — the target, the declared verb, the body's shape, leadership, the API rate,
//! RBAC's closed watches, result sizes — is decided above it, once, in
//! [`super::ClusterAccess`], as controller-runtime's fake client implements the real
//! client's interface so that nothing above it can differ. A backend answers only
//! what the API server (or its stand-in) answers, and words that itself.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use kube::api::DynamicObject;
use kube::core::{GroupVersionKind, Selector};
use serde_json::Value;

use super::{CapabilityError, Op, Target};
use crate::contract::{DeleteOptions, EventRecord, PatchKind};
use crate::kube::object_writes::PatchBody;

/// A write on one object, its arguments checked and parsed by the pipeline.
#[derive(Debug)]
pub enum Write<'a> {
    /// Sets and removes labels (a merge patch of `metadata.labels`).
    Labels {
        /// Labels to set.
        set: &'a [(String, String)],
        /// Label keys to remove.
        remove: &'a [String],
    },
    /// Replaces the finalizers, if the object is still at `resource_version`.
    Finalizers {
        /// The resourceVersion the finalizers were read at.
        resource_version: &'a str,
        /// The whole new list.
        finalizers: &'a [String],
    },
    /// Merges a status into the status subresource.
    Status(&'a Value),
    /// Server-side applies a whole object.
    Apply {
        /// The object.
        object: &'a Value,
        /// Whether to take fields other managers own.
        force: bool,
    },
    /// Creates an object (named, or with `metadata.generateName`).
    Create(&'a DynamicObject),
    /// Patches the object or its `status` or `scale` subresource.
    Patch {
        /// The patch, parsed as its kind says.
        body: PatchBody,
        /// The subresource, if any.
        subresource: Option<&'a str>,
    },
    /// Replaces an object still at the resourceVersion it carries.
    Update(&'a DynamicObject),
}

/// A write as the plugin asked for it, unparsed: what a backend that keeps a journal
/// (the test kit's report) records, refused or not.
#[derive(Debug, Clone, Copy)]
pub enum Request<'a> {
    /// `patch-labels`.
    PatchLabels {
        /// Labels to set.
        set: &'a [(String, String)],
        /// Label keys to remove.
        remove: &'a [String],
    },
    /// `patch-finalizers`.
    PatchFinalizers {
        /// Finalizers to add.
        add: &'a [String],
        /// Finalizers to remove.
        remove: &'a [String],
    },
    /// `patch-status`, with the status as JSON text.
    PatchStatus(&'a str),
    /// `apply`, with the object as JSON text.
    Apply {
        /// The object.
        object: &'a str,
        /// Whether to force.
        force: bool,
    },
    /// `create`, with the object as JSON text.
    Create(&'a str),
    /// `patch`.
    Patch {
        /// The patch's kind.
        kind: PatchKind,
        /// The patch as JSON text.
        patch: &'a str,
        /// The subresource, if any.
        subresource: Option<&'a str>,
    },
    /// `update`, with the object as JSON text.
    Update(&'a str),
    /// `delete`.
    Delete(&'a DeleteOptions),
}

/// Which cached objects a `list`, `list-first` or `count` reads: the plugin's watches
/// that may hold them (by index, in registration order), the namespace (all if none)
/// and the label selector.
#[derive(Debug, Clone, Copy)]
pub struct Selection<'a> {
    /// The watches to read, their RBAC leaves open.
    pub watches: &'a [usize],
    /// The namespace, or all.
    pub namespace: Option<&'a str>,
    /// The label selector, parsed.
    pub selector: &'a Selector,
}

/// One object an Event names, and its uid if a cache holds it.
pub type Regarding<'a> = (&'a Target, Option<String>);

/// Where one plugin's objects are read from and its writes go.
///
/// Reads are by watch: `watches_of` says which of the plugin's watches (by index, in
/// registration order) can hold a kind; the pipeline keeps those RBAC leaves open and
/// reads only them. Writes and live reads are made as the plugin; their errors are
/// the backend's answer, prefixed with `op`.
pub trait Backend: Send + Sync + std::fmt::Debug {
    /// The time the plugin's wall clock shows, since the Unix epoch, if it stands
    /// still (the test kit's, so reports do not change between runs); none for the
    /// real clock.
    fn fixed_clock(&self) -> Option<Duration> {
        None
    }

    /// The plugin's watches of `gvk` whose scope can hold objects of `namespace`
    /// (any, if none), by index.
    fn watches_of(&self, gvk: &GroupVersionKind, namespace: Option<&str>) -> Vec<usize>;

    /// The JSON of `target` as the first of `watches` holding it holds it.
    fn cached(&self, target: &Target, watches: &[usize]) -> Option<Arc<str>>;

    /// The uid of `target` if any of the plugin's watches holds it (Events name it).
    fn uid(&self, target: &Target) -> Option<String>;

    /// JSON of the objects of `selection`, each once, sorted by namespace and name:
    /// all, or the first `limit`.
    fn select<'a>(
        &'a self,
        selection: Selection<'a>,
        limit: Option<usize>,
    ) -> BoxFuture<'a, Vec<Arc<str>>>;

    /// How many objects `select` would return.
    fn count<'a>(&'a self, selection: Selection<'a>) -> BoxFuture<'a, usize>;

    /// Refuses a kind the cluster does not serve, before any request for it is
    /// admitted (and counted against the plugin's API rate). A lookup a backend must
    /// make to know is its own business.
    fn served<'a>(
        &'a self,
        _op: &'a Op,
        _gvk: &'a GroupVersionKind,
    ) -> BoxFuture<'a, Result<(), CapabilityError>> {
        Box::pin(std::future::ready(Ok(())))
    }

    /// Reads `target` as the plugin, past the caches.
    fn get<'a>(
        &'a self,
        op: &'a Op,
        target: &'a Target,
    ) -> BoxFuture<'a, Result<DynamicObject, CapabilityError>>;

    /// Makes `write` on `target` as the plugin; returns what was stored (a Scale for
    /// the scale subresource).
    fn write<'a>(
        &'a self,
        op: &'a Op,
        target: &'a Target,
        write: Write<'a>,
    ) -> BoxFuture<'a, Result<DynamicObject, CapabilityError>>;

    /// Deletes `target` if the preconditions of `options` hold.
    fn delete<'a>(
        &'a self,
        op: &'a Op,
        target: &'a Target,
        options: &'a DeleteOptions,
    ) -> BoxFuture<'a, Result<(), CapabilityError>>;

    /// Records `event` about `regarding` (and `related`), as the plugin.
    fn record_event<'a>(
        &'a self,
        op: &'a Op,
        regarding: Regarding<'a>,
        related: Option<Regarding<'a>>,
        event: &'a EventRecord,
    ) -> BoxFuture<'a, Result<(), CapabilityError>>;

    /// Read-your-writes: `written`, just stored at `target`, goes into the caches that
    /// hold it before its watch event arrives.
    fn remember(&self, _target: &Target, _written: &DynamicObject) {}

    /// Notes a write the plugin asked for on `target` and how it ended; called for
    /// every write whose target is known, refused or made.
    fn journal(&self, _target: &Target, _request: Request<'_>, _error: Option<&CapabilityError>) {}
}
