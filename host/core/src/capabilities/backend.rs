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

/// A write on one object: the one list of writes there is. It takes two forms — as
/// the plugin asked for it ([`Asked`], what a journal records, refused or not) and as
/// the pipeline checked and parsed it for a backend ([`Checked`]) — so a new write is
/// one variant, and every match on it (the pipeline's, each backend's, the test kit's
/// journal) is one the compiler holds to it.
#[derive(Debug)]
pub enum Write<'a, F: Form<'a>> {
    /// `patch-labels`: a merge patch of `metadata.labels`.
    Labels(F::Labels),
    /// `patch-finalizers`.
    Finalizers(F::Finalizers),
    /// `patch-status`: merged into the status subresource.
    Status(F::Json),
    /// `apply`: a whole object, server-side applied.
    Apply {
        /// The object.
        object: F::Json,
        /// Whether to take fields other managers own.
        force: bool,
    },
    /// `create`: an object, named or with `metadata.generateName`.
    Create(F::Object),
    /// `patch`: the object or its `status` or `scale` subresource.
    Patch {
        /// The patch and its kind.
        body: F::Patch,
        /// The subresource, if any.
        subresource: Option<&'a str>,
    },
    /// `update`: an object still at the resourceVersion it carries.
    Update(F::Object),
    /// `delete`.
    Delete(F::Delete),
}

/// What a [`Write`]'s arguments are in one of its forms.
pub trait Form<'a>: std::fmt::Debug {
    /// A change of labels.
    type Labels: std::fmt::Debug;
    /// A JSON document: a status, an applied object.
    type Json: std::fmt::Debug;
    /// A whole object: created or updated.
    type Object: std::fmt::Debug;
    /// A patch and its kind.
    type Patch: std::fmt::Debug;
    /// A change of finalizers.
    type Finalizers: std::fmt::Debug;
    /// A deletion's options.
    type Delete: std::fmt::Debug;
}

/// A write as the plugin asked for it: its JSON as text, its finalizers to add and
/// remove.
#[derive(Debug)]
pub struct Asked;

impl<'a> Form<'a> for Asked {
    type Labels = LabelChange<'a>;
    type Json = &'a str;
    type Object = &'a str;
    type Patch = (PatchKind, &'a str);
    type Finalizers = FinalizerChange<'a>;
    type Delete = &'a DeleteOptions;
}

/// A write as a backend makes it: parsed and shaped, its finalizers the whole new list
/// at the resourceVersion they were read at. A deletion is not one ([`Backend::delete`]
/// makes it), so this form has none.
#[derive(Debug)]
pub struct Checked;

impl<'a> Form<'a> for Checked {
    type Labels = LabelPatch<'a>;
    type Json = &'a Value;
    type Object = &'a DynamicObject;
    type Patch = PatchBody;
    type Finalizers = FinalizerList<'a>;
    type Delete = std::convert::Infallible;
}

/// Labels a plugin sets and removes, leaving the others alone.
#[derive(Debug, Clone, Copy)]
pub struct LabelChange<'a> {
    /// Labels to set.
    pub set: &'a [(String, String)],
    /// Label keys to remove.
    pub remove: &'a [String],
}

/// A change of labels, every key and value checked, and the merge patch of
/// `metadata.labels` that makes it, built once.
#[derive(Debug, Clone)]
pub struct LabelPatch<'a> {
    /// The change, key by key (what a store that owns fields per label applies).
    pub change: LabelChange<'a>,
    /// The merge patch (what the API server is sent).
    pub patch: Value,
}

/// Finalizers a plugin adds and removes, leaving the others alone.
#[derive(Debug, Clone, Copy)]
pub struct FinalizerChange<'a> {
    /// Finalizers to add.
    pub add: &'a [String],
    /// Finalizers to remove.
    pub remove: &'a [String],
}

/// The whole new list of an object's finalizers, written only if the object is still
/// at `resource_version`.
#[derive(Debug, Clone, Copy)]
pub struct FinalizerList<'a> {
    /// The resourceVersion the finalizers were read at.
    pub resource_version: &'a str,
    /// The whole new list.
    pub finalizers: &'a [String],
}

/// A write as the plugin asked for it.
pub type AskedWrite<'a> = Write<'a, Asked>;

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
        write: Write<'a, Checked>,
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
    fn journal(
        &self,
        _target: &Target,
        _request: AskedWrite<'_>,
        _error: Option<&CapabilityError>,
    ) {
    }
}
