//! Shared informers: one watch and cache per (kind, namespace, label selector, field
//! selector, metadata-only), shared by every plugin that asks for the same and stopped
//! when the last one lets go. An informer watches only while it is held
//! ([`Informer::hold`]): a plugin another replica runs keeps its informers, but not
//! their watches or caches.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use kube::core::Selector;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use std::sync::{Arc, Mutex, RwLock, Weak};

use kube::Client;
use kube::api::DynamicObject;
use kube::core::{GroupVersionKind, SelectorExt};
use kube::runtime::watcher;
use tokio::sync::watch;

use super::cache::{CachedObject, Change, ObjectCache, ObjectKey};

mod events;
mod holds;
mod reports;
mod stream;
mod undecodable;

use super::discovery::{DiscoveryError, KindResolver, ResolvedKind, display_gvk};
use super::field_selector::FieldSelector;
use crate::metrics::{InformerLabels, Metrics};
pub use holds::InformerHold;
use holds::Running;
pub use reports::Reporter;
pub use stream::metadata_of;
use undecodable::Undecodables;

/// What one informer watches; two plugins asking for the same scope share one watch.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WatchScope {
    /// The kind.
    pub gvk: GroupVersionKind,
    /// One namespace, or all.
    pub namespace: Option<String>,
    /// Server-side label selector, if any.
    pub label_selector: Option<String>,
    /// Server-side field selector, if any.
    pub field_selector: Option<String>,
    /// Whether only apiVersion, kind and metadata are listed, watched and held.
    pub metadata_only: bool,
}

impl WatchScope {
    /// The metric labels of this scope.
    fn metric_labels(&self) -> InformerLabels {
        InformerLabels {
            kind: display_gvk(&self.gvk),
            namespace: self.namespace.clone().unwrap_or_default(),
            selector: self.label_selector.clone().unwrap_or_default(),
            fields: self.field_selector.clone().unwrap_or_default(),
            view: if self.metadata_only {
                "metadata"
            } else {
                "object"
            },
        }
    }
}

/// Called for every change an informer sees; must be quick (it only enqueues keys).
pub type Subscriber = Arc<dyn Fn(&Change) + Send + Sync>;

/// A running watch with its cache.
pub struct Informer {
    scope: WatchScope,
    kind: ResolvedKind,
    cache: ObjectCache,
    /// True once the first full list is in the cache.
    synced: watch::Sender<bool>,
    subscribers: RwLock<Vec<(u64, Subscriber)>>,
    next_subscriber: AtomicU64,
    /// The scope's label and field selectors, parsed once, for checking a plugin's
    /// own writes.
    selector: Option<Selector>,
    fields: Option<FieldSelector>,
    metrics: Arc<Metrics>,
    labels: InformerLabels,
    /// This informer's series, looked up once rather than on every event.
    events: Counter,
    lists: Counter,
    objects: Gauge,
    bytes: Gauge,
    watching: Gauge,
    /// The objects of the watch it cannot decode.
    undecodable: Undecodables,
    /// Where Events about them are recorded, if anywhere.
    reporter: Option<Reporter>,
    /// What the watch is restarted with when it is held again.
    client: Client,
    config: watcher::Config,
    running: Mutex<Running>,
    /// Why the watch is not working, while it is not: see [`Informer::problem`].
    problem: Mutex<Health>,
}

/// Whether an informer's list and watch work.
#[derive(Debug, Default)]
struct Health {
    /// Failures since the last event that arrived.
    failures: u32,
    /// The API's last error, once it counts as a problem.
    problem: Option<String>,
}

/// Failures in a row after which a synced informer counts as broken (one failure is
/// usually an expired watch that the next list repairs).
const FAILURES_BEFORE_PROBLEM: u32 = 3;

impl std::fmt::Debug for Informer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Informer")
            .field("scope", &self.scope)
            .field("objects", &self.cache.len())
            .finish()
    }
}

impl Informer {
    /// An informer of `scope`; its watch starts when it is first held.
    fn new(
        client: Client,
        kind: ResolvedKind,
        scope: WatchScope,
        (metrics, reporter): (Arc<Metrics>, Option<Reporter>),
    ) -> Arc<Informer> {
        let mut config = watcher::Config::default();
        if let Some(sel) = &scope.label_selector {
            config = config.labels(sel);
        }
        if let Some(fields) = &scope.field_selector {
            config = config.fields(fields);
        }
        let labels = scope.metric_labels();
        let selector = super::selector::parse(scope.label_selector.as_deref().unwrap_or("")).ok();
        let fields = super::field_selector::parse(scope.field_selector.as_deref().unwrap_or(""));
        let events = metrics.informer_events.get_or_create(&labels).clone();
        let lists = metrics.informer_lists.get_or_create(&labels).clone();
        let objects = metrics.informer_objects.get_or_create(&labels).clone();
        let bytes = metrics.informer_bytes.get_or_create(&labels).clone();
        let watching = metrics.informer_watching.get_or_create(&labels).clone();
        let undecodable = metrics.informer_undecodable.get_or_create(&labels).clone();
        Arc::new(Informer {
            undecodable: Undecodables::new(undecodable),
            reporter,
            events,
            lists,
            objects,
            bytes,
            watching,
            labels,
            selector,
            fields: fields.ok(),
            metrics,
            scope,
            kind,
            cache: ObjectCache::default(),
            synced: watch::channel(false).0,
            subscribers: RwLock::new(Vec::new()),
            next_subscriber: AtomicU64::new(0),
            client,
            config,
            running: Mutex::new(Running::default()),
            problem: Mutex::new(Health::default()),
        })
    }

    /// What this informer watches.
    pub fn scope(&self) -> &WatchScope {
        &self.scope
    }

    /// The resolved kind (resource name, scope).
    pub fn kind(&self) -> &ResolvedKind {
        &self.kind
    }

    /// The cache this informer keeps.
    pub fn cache(&self) -> &ObjectCache {
        &self.cache
    }

    /// Whether the first full list has completed.
    pub fn is_synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// Why this informer's list or watch keeps failing (the API server's error), or
    /// `None` while it works. An informer that has not completed its first list has
    /// a problem from its first failure on; a synced one after several in a row.
    pub fn problem(&self) -> Option<String> {
        self.health().problem.clone()
    }

    fn health(&self) -> std::sync::MutexGuard<'_, Health> {
        self.problem.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn failed(&self, error: &watcher::Error) {
        let mut health = self.health();
        health.failures += 1;
        if !self.is_synced() || health.failures >= FAILURES_BEFORE_PROBLEM {
            let text = crate::logs::escape(&error.to_string());
            health.problem = Some(format!("{} {text}", self.labels.kind));
        }
    }

    fn working(&self) {
        let mut health = self.health();
        if health.problem.take().is_some() {
            tracing::info!(kind = %self.labels.kind, namespace = ?self.scope.namespace,
                "informer works again");
        }
        health.failures = 0;
    }

    /// Waits until the first full list is in the cache.
    pub async fn wait_synced(&self) {
        let mut rx = self.synced.subscribe();
        let _ = rx.wait_for(|s| *s).await;
    }

    /// Adds a subscriber; it first receives every object already cached.
    pub fn subscribe(&self, subscriber: Subscriber) -> u64 {
        let id = self.next_subscriber.fetch_add(1, Ordering::Relaxed);
        let mut subs = self.subscribers.write().unwrap_or_else(|p| p.into_inner());
        for obj in self.cache.list(|_| true) {
            subscriber(&Change::added(obj));
        }
        subs.push((id, subscriber));
        id
    }

    /// Stores a plugin's freshly written copy of an object, if this informer holds
    /// the object and the copy still matches its selector, so the plugin's next
    /// reconcile reads its own write even before the watch event arrives.
    pub fn refresh(&self, obj: &DynamicObject) {
        let (Some(selector), Some(fields)) = (&self.selector, &self.fields) else {
            return;
        };
        if !fields.is_empty() && !fields.matches(&serde_json::to_value(obj).unwrap_or_default()) {
            return;
        }
        let obj = match self.scope.metadata_only {
            // The metadata alone is copied: a written Pod's spec and status are most of it.
            true => metadata_of(obj.metadata.clone(), &self.scope.gvk),
            false => obj.clone(),
        };
        match CachedObject::from_dynamic(obj) {
            Ok(o) if selector.matches(&o.labels) => {
                self.cache.refresh(Arc::new(o));
            }
            _ => {}
        }
    }

    /// Removes a subscriber.
    pub fn unsubscribe(&self, id: u64) {
        let mut subs = self.subscribers.write().unwrap_or_else(|p| p.into_inner());
        subs.retain(|(i, _)| *i != id);
    }

    fn publish(&self, changes: &[Change]) {
        let subs = self.subscribers.read().unwrap_or_else(|p| p.into_inner());
        for change in changes {
            for (_, s) in subs.iter() {
                s(change);
            }
        }
    }

    /// How many subscribers its changes are delivered to: the plugins (versions)
    /// that use it, among whom its cost is divided.
    pub fn subscribers(&self) -> usize {
        let subs = self.subscribers.read().unwrap_or_else(|p| p.into_inner());
        subs.len()
    }
}

impl Drop for Informer {
    fn drop(&mut self) {
        self.running
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .stop();
        self.metrics.informer_events.remove(&self.labels);
        self.metrics.informer_lists.remove(&self.labels);
        self.metrics.informer_objects.remove(&self.labels);
        self.metrics.informer_bytes.remove(&self.labels);
        self.metrics.informer_watching.remove(&self.labels);
        self.metrics.informer_undecodable.remove(&self.labels);
        tracing::info!(kind = %display_gvk(&self.scope.gvk), namespace = ?self.scope.namespace, "informer stopped");
    }
}

/// Hands out shared informers, starting one on first use.
pub struct InformerRegistry {
    client: Client,
    metrics: Arc<Metrics>,
    resolver: KindResolver,
    live: Mutex<HashMap<WatchScope, Weak<Informer>>>,
    /// Where informers record Events about objects they cannot decode.
    reporter: Option<Reporter>,
}

impl InformerRegistry {
    /// A registry whose informers use `client` and report to `metrics`.
    pub fn new(client: Client, metrics: Arc<Metrics>) -> InformerRegistry {
        InformerRegistry {
            resolver: KindResolver::new(client.clone()),
            client,
            metrics,
            live: Mutex::new(HashMap::new()),
            reporter: None,
        }
    }

    /// This registry, its informers recording an Event on each object they cannot
    /// decode, as the host `instance`.
    pub fn reporting(mut self, instance: &str) -> InformerRegistry {
        self.reporter = Some(Reporter::start(self.client.clone(), instance));
        self
    }

    /// The kind resolver informers are started with.
    pub fn resolver(&self) -> &KindResolver {
        &self.resolver
    }

    /// The informer for `scope`: the one in use, or a new one (whose watch starts
    /// when it is held).
    pub async fn acquire(&self, scope: WatchScope) -> Result<Arc<Informer>, DiscoveryError> {
        if let Some(running) = self.lock().get(&scope).and_then(Weak::upgrade) {
            return Ok(running);
        }
        let kind = self.resolver.resolve(&scope.gvk).await?;
        let mut live = self.lock();
        if let Some(running) = live.get(&scope).and_then(Weak::upgrade) {
            return Ok(running);
        }
        live.retain(|_, w| w.strong_count() > 0);
        let informer = Informer::new(
            self.client.clone(),
            kind,
            scope.clone(),
            (self.metrics.clone(), self.reporter.clone()),
        );
        live.insert(scope, Arc::downgrade(&informer));
        Ok(informer)
    }

    /// Number of informers whose watch runs now.
    pub fn running(&self) -> usize {
        (self.lock().values())
            .filter_map(Weak::upgrade)
            .filter(|i| i.is_running())
            .count()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<WatchScope, Weak<Informer>>> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }
}
