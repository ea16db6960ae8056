//! The contract as the host's core sees it, whichever WIT version a plugin was built
//! against: plain Rust types that each served version's bindings convert to and from
//! at the edge (`crate::bindings`), so the informers, queues, capability checks and
//! the test kit never depend on one version's generated code.

mod capability;
mod error;
mod predicate;
mod verb;

pub use capability::{Capability, Descriptor};
pub use error::{Cause, ErrorCode, GuestError};
pub use predicate::{Predicate, PredicateError, parse_predicate};
pub use verb::{Verb, VerbError, api_verbs, parse_verb};

/// A Kubernetes object type; the core group is the empty string.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Gvk {
    /// API group, for example `apps`; empty for the core group.
    pub group: String,
    /// API version within the group.
    pub version: String,
    /// Kind.
    pub kind: String,
}

/// One Kubernetes object, as a plugin names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectRef {
    /// The object's type.
    pub kind: Gvk,
    /// Its namespace; none for cluster-scoped objects.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
}

/// How a change to a watched object becomes a reconcile key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum KeyMapping {
    /// The changed object itself.
    Object,
    /// The object's controller owner, if of this kind.
    ControllerOwner(Gvk),
    /// One fixed key, whatever changed.
    Fixed(String),
}

/// One kind a plugin wants to be told about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Watch {
    /// The kind to watch.
    pub kind: Gvk,
    /// Only objects in these namespaces (an informer each); empty watches all.
    pub namespaces: Vec<String>,
    /// Only objects matching this label selector.
    pub label_selector: Option<String>,
    /// Only objects matching this field selector (evaluated by the API server).
    pub field_selector: Option<String>,
    /// Hold only apiVersion, kind and metadata.
    pub metadata_only: bool,
    /// Update predicates as the contract spells them; checked at load.
    pub predicates: Vec<String>,
    /// How a change maps to a reconcile key.
    pub maps_to: KeyMapping,
}

impl Watch {
    /// The namespace of each of its informers, in order: each namespace it names, or
    /// one for all namespaces when it names none. Everything the host keeps per
    /// informer (caches, read rules, RBAC findings) follows this order.
    pub fn informer_namespaces(&self) -> Vec<Option<String>> {
        match self.namespaces.is_empty() {
            true => vec![None],
            false => self.namespaces.iter().cloned().map(Some).collect(),
        }
    }
}

/// The verbs a plugin declared on one kind, as the contract spells them (`get`,
/// `patch/status`); checked whole at load by `plugin::validate`, parsed into
/// [`Verb`]s by `capabilities::grants`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Permission {
    /// The kind.
    pub kind: Gvk,
    /// The verbs, unparsed: a verb this host does not know refuses the plugin at load
    /// with its name, rather than the whole component failing to link.
    pub verbs: Vec<String>,
}

impl Permission {
    /// The verbs this host knows; an unknown one grants nothing (registrations that
    /// have one are refused at load, naming it).
    pub fn known_verbs(&self) -> impl Iterator<Item = Verb> + '_ {
        self.verbs.iter().filter_map(|v| Verb::parse(v))
    }
}

/// How a `patch` describes its change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PatchKind {
    /// A JSON merge patch (RFC 7386).
    Merge,
    /// A JSON patch (RFC 6902).
    Json,
}

/// What a plugin metric measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetricKind {
    /// Only goes up.
    Counter,
    /// Goes up and down.
    Gauge,
    /// A distribution in buckets.
    Histogram,
}

/// A metric a plugin declared; checked at load by `plugin::validate`.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricDeclaration {
    /// Its name within the plugin.
    pub name: String,
    /// What it measures.
    pub help: String,
    /// Counter, gauge or histogram.
    pub kind: MetricKind,
    /// Label names, in the order updates give values.
    pub labels: Vec<String>,
    /// A histogram's bucket bounds; empty for the default.
    pub buckets: Vec<f64>,
}

/// What a plugin's `register` returned: its needs, under the identity the operator
/// gave it.
#[derive(Debug, Clone, PartialEq)]
pub struct Registration {
    /// The plugin's identity: ServiceAccount, field manager, Event reporting
    /// controller, metric label, budgets. What `register` returned until the host
    /// puts it [`under`](Registration::under) the name the operator chose.
    pub name: String,
    /// The name `register` returned, when it differs from the identity: shown in the
    /// plugin table and the log, never acted on.
    pub registered_as: Option<String>,
    /// The plugin's own version.
    pub version: String,
    /// The kinds it watches.
    pub watches: Vec<Watch>,
    /// What else it may do.
    pub permissions: Vec<Permission>,
    /// How many keys may be reconciled at once; 0 lets the host choose.
    pub max_concurrent_reconciles: u32,
    /// Resync period in milliseconds, if any.
    pub resync_period_ms: Option<u64>,
    /// The plugin's own metrics.
    pub metrics: Vec<MetricDeclaration>,
}

impl Registration {
    /// This registration under `identity`, the name the operator gave the plugin (its
    /// file's name): the plugin's code does not choose whom it acts as. A different
    /// name it registered is kept in `registered_as`, to be shown.
    pub fn under(mut self, identity: &str) -> Registration {
        if self.name != identity {
            let claimed = std::mem::replace(&mut self.name, identity.to_string());
            self.registered_as = Some(claimed);
        }
        self
    }
}

/// The key a plugin reconciles.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Request {
    /// The kind of the named object; none for a fixed key.
    pub kind: Option<Gvk>,
    /// Its namespace.
    pub namespace: Option<String>,
    /// Its name, or the fixed key.
    pub name: String,
}

/// What to do after a successful reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Nothing until something changes.
    Done,
    /// Reconcile again after this many milliseconds.
    RequeueAfter(u64),
    /// Reconcile again after the key's backoff, without an error.
    Requeue,
}

/// Why a reconcile did not succeed, as the plugin said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// What went wrong.
    pub error: GuestError,
    /// Retrying will not help: do not retry until the key is queued again.
    pub terminal: bool,
}

/// What happens to the dependents of a deleted object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Propagation {
    /// The object goes at once; dependents after.
    Background,
    /// Dependents first.
    Foreground,
    /// Dependents are kept.
    Orphan,
}

/// Preconditions and propagation of a delete.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DeleteOptions {
    /// What happens to dependents.
    pub propagation: Propagation,
    /// Delete only the object with this uid.
    pub uid: Option<String>,
    /// Delete only at this resourceVersion.
    pub resource_version: Option<String>,
}

impl DeleteOptions {
    /// A delete without preconditions (the only kind 0.2 plugins can make).
    pub fn unconditional(propagation: Propagation) -> DeleteOptions {
        DeleteOptions {
            propagation,
            uid: None,
            resource_version: None,
        }
    }
}

/// An Event a plugin records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRecord {
    /// What it is about.
    pub regarding: ObjectRef,
    /// A second object involved.
    pub related: Option<ObjectRef>,
    /// Warning rather than normal.
    pub warning: bool,
    /// Why (PascalCase).
    pub reason: String,
    /// What was done (PascalCase); empty uses the reason.
    pub action: String,
    /// For humans.
    pub note: String,
}

/// Severity of a plugin's log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Very detailed tracing.
    Trace,
    /// Debugging detail.
    Debug,
    /// Normal operation.
    Info,
    /// Unexpected but handled.
    Warn,
    /// A failure.
    Error,
}
