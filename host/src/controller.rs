//! One running plugin: its watches feed its queue, its workers reconcile the keys.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use kube::Client;
use kube::core::GroupVersionKind;
use tokio::task::{JoinHandle, JoinSet};

use crate::bindings::{Action, KeyMapping as WitMapping, Registration, Verb};
use crate::capabilities::ClusterAccess;
use crate::keys::{KeyMapping, ReconcileKey, from_wit_gvk};
use crate::kube::cache::Change;
use crate::kube::discovery::DiscoveryError;
use crate::kube::informer::{Informer, InformerRegistry, WatchScope};
use crate::metrics::{Metrics, Outcome, PluginLabels};
use crate::queue::{Backoff, WorkQueue};
use crate::runtime::PluginCode;

/// Why a registered plugin could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The registration breaks a rule (name, empty watches, ...).
    #[error("invalid registration: {0}")]
    Registration(String),
    /// A watched or owner kind is not served by the API server.
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
}

/// Counters of one plugin's reconciles, for logs, status and tests.
#[derive(Debug, Default)]
pub struct ReconcileStats {
    /// Reconciles that returned `done` or `requeue-after`.
    pub succeeded: AtomicU64,
    /// Reconciles that trapped, timed out, hit the memory limit or returned an error.
    pub failed: AtomicU64,
}

/// Shared parts every plugin controller is started with.
#[derive(Clone)]
pub struct ControllerContext {
    /// API client for writes and Events.
    pub client: Client,
    /// Shared informers.
    pub registry: Arc<InformerRegistry>,
    /// This host's identity, the `reportingInstance` of Events.
    pub instance: String,
    /// Host cap on concurrent reconciles per plugin.
    pub max_concurrent_reconciles: u32,
    /// Retry policy of every plugin's queue.
    pub retry: Backoff,
    /// Where reconcile, queue and informer counters go.
    pub metrics: Arc<Metrics>,
}

/// A plugin whose watches and workers are running.
pub struct PluginController {
    /// The plugin's registration.
    pub registration: Registration,
    /// Reconcile counters.
    pub stats: Arc<ReconcileStats>,
    queue: WorkQueue<ReconcileKey>,
    subscriptions: Vec<Subscription>,
    workers: JoinSet<()>,
    /// The periodic resync task, if the plugin asked for one.
    resync: Option<JoinHandle<()>>,
    metrics: Arc<Metrics>,
}

/// One watch of a plugin: its (shared) informer, the subscription id, the mapping.
struct Subscription {
    informer: Arc<Informer>,
    id: u64,
    mapping: KeyMapping,
}

impl PluginController {
    /// Starts the plugin's informers (shared where possible), subscribes its key
    /// mappings, and starts its workers once every informer has synced.
    pub async fn start(
        code: PluginCode,
        registration: Registration,
        ctx: &ControllerContext,
    ) -> Result<PluginController, StartError> {
        validate(&registration)?;
        let queue = WorkQueue::new(ctx.retry);
        let subscriptions = subscribe(&registration, &queue, ctx).await?;
        let informers: Vec<_> = subscriptions.iter().map(|s| s.informer.clone()).collect();
        let access = Arc::new(ClusterAccess::new(
            &registration.name,
            &ctx.instance,
            ctx.registry.clone(),
            ctx.client.clone(),
            informers.clone(),
            grants(&registration),
        ));
        let concurrency = match registration.max_concurrent_reconciles {
            0 => ctx.max_concurrent_reconciles,
            n => n.min(ctx.max_concurrent_reconciles),
        };
        let stats = Arc::new(ReconcileStats::default());
        let mut workers = JoinSet::new();
        for _ in 0..concurrency.max(1) {
            let worker = Worker {
                code: code.clone(),
                access: access.clone(),
                queue: queue.clone(),
                stats: stats.clone(),
                metrics: ctx.metrics.clone(),
                labels: PluginLabels {
                    plugin: registration.name.clone(),
                },
            };
            workers.spawn(worker.run_after_sync(informers.clone()));
        }
        let resync = registration.resync_period_ms.map(|ms| {
            let watches = subscriptions
                .iter()
                .map(|s| (s.informer.clone(), s.mapping.clone()))
                .collect();
            tokio::spawn(resync(
                Duration::from_millis(ms.max(1)),
                watches,
                queue.clone(),
            ))
        });
        Ok(PluginController {
            registration,
            stats,
            queue,
            subscriptions,
            workers,
            resync,
            metrics: ctx.metrics.clone(),
        })
    }

    /// Stops taking work, waits up to `grace` for in-flight reconciles, then
    /// releases the plugin's informers.
    pub async fn stop(mut self, grace: Duration) {
        for s in &self.subscriptions {
            s.informer.unsubscribe(s.id);
        }
        if let Some(resync) = self.resync.take() {
            resync.abort();
        }
        self.queue.shut_down();
        let drained = tokio::time::timeout(grace, async {
            while self.workers.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::warn!(plugin = %self.registration.name, ?grace,
                "in-flight reconciles did not finish within the grace period; abandoned");
            self.workers.abort_all();
        }
        self.metrics.forget_plugin(&self.registration.name);
    }
}

/// One worker: takes keys and reconciles them until the queue shuts down.
struct Worker {
    code: PluginCode,
    access: Arc<ClusterAccess>,
    queue: WorkQueue<ReconcileKey>,
    stats: Arc<ReconcileStats>,
    metrics: Arc<Metrics>,
    labels: PluginLabels,
}

impl Worker {
    /// Dispatch waits until every informer the plugin needs has its first full list.
    async fn run_after_sync(self, informers: Vec<Arc<Informer>>) {
        for informer in &informers {
            informer.wait_synced().await;
        }
        self.run().await;
    }

    async fn run(self) {
        let plugin = self.labels.plugin.as_str();
        let depth = self.metrics.queue_depth.get_or_create(&self.labels).clone();
        while let Some(key) = self.queue.next().await {
            depth.set(self.queue.len() as i64);
            let started = Instant::now();
            let result = self.code.reconcile(self.access.clone(), &key).await;
            let outcome = match result {
                Ok(action) => {
                    self.stats.succeeded.fetch_add(1, Ordering::Relaxed);
                    self.queue.forget(&key);
                    if let Action::RequeueAfter(ms) = action {
                        self.queue.add_after(key.clone(), Duration::from_millis(ms));
                    }
                    tracing::debug!(plugin, key = %key, ?action, "reconciled");
                    Outcome::success
                }
                Err(error) => {
                    self.stats.failed.fetch_add(1, Ordering::Relaxed);
                    self.metrics.queue_retries.get_or_create(&self.labels).inc();
                    let retry_in = self.queue.add_rate_limited(key.clone());
                    tracing::error!(plugin, key = %key, %error, ?retry_in, "reconcile failed");
                    Outcome::error
                }
            };
            self.metrics.reconciled(plugin, outcome, started.elapsed());
            self.queue.done(&key);
        }
    }
}

/// Acquires an informer per watch and subscribes the watch's key mapping to it.
async fn subscribe(
    registration: &Registration,
    queue: &WorkQueue<ReconcileKey>,
    ctx: &ControllerContext,
) -> Result<Vec<Subscription>, StartError> {
    let mut subscriptions = Vec::new();
    for watch in &registration.watches {
        let gvk = from_wit_gvk(&watch.kind);
        let mapping = resolve_mapping(&watch.maps_to, &gvk, &ctx.registry).await?;
        let scope = WatchScope {
            gvk,
            namespace: watch.namespace.clone(),
            label_selector: watch.label_selector.clone(),
        };
        let informer = ctx.registry.acquire(scope).await?;
        let (q, m) = (queue.clone(), mapping.clone());
        let labels = PluginLabels {
            plugin: registration.name.clone(),
        };
        let events = ctx.metrics.plugin_events.get_or_create(&labels).clone();
        let depth = ctx.metrics.queue_depth.get_or_create(&labels).clone();
        let id = informer.subscribe(Arc::new(move |change: &Change| {
            events.inc();
            let (Change::Applied(obj) | Change::Deleted(obj)) = change;
            if let Some(key) = m.key_for(obj) {
                q.add(key);
                depth.set(q.len() as i64);
            }
        }));
        subscriptions.push(Subscription {
            informer,
            id,
            mapping,
        });
    }
    Ok(subscriptions)
}

/// Every `period`, queues the key of every object in the plugin's caches (the queue
/// collapses them with pending work), until the queue shuts down.
async fn resync(
    period: Duration,
    watches: Vec<(Arc<Informer>, KeyMapping)>,
    queue: WorkQueue<ReconcileKey>,
) {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    while !queue.is_shut_down() {
        ticks.tick().await;
        for (informer, mapping) in &watches {
            for obj in informer.cache().list(|_| true) {
                if let Some(key) = mapping.key_for(&obj) {
                    queue.add(key);
                }
            }
        }
    }
}

/// Declared verbs per kind; watched kinds are always readable.
fn grants(registration: &Registration) -> HashMap<GroupVersionKind, HashSet<Verb>> {
    let mut grants: HashMap<GroupVersionKind, HashSet<Verb>> = HashMap::new();
    for watch in &registration.watches {
        let verbs = grants.entry(from_wit_gvk(&watch.kind)).or_default();
        verbs.extend([Verb::Get, Verb::List]);
    }
    for p in &registration.permissions {
        let verbs = grants.entry(from_wit_gvk(&p.kind)).or_default();
        verbs.extend(p.verbs.iter().copied());
    }
    grants
}

/// Plugin names become field managers and Event reporters: DNS-1123 labels.
fn validate(reg: &Registration) -> Result<(), StartError> {
    let name = &reg.name;
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if !ok {
        return Err(StartError::Registration(format!(
            "name {name:?} must be a DNS-1123 label (lower-case alphanumeric or '-', at most 63)"
        )));
    }
    if reg.watches.is_empty() {
        return Err(StartError::Registration(
            "no watches: nothing would ever be reconciled".into(),
        ));
    }
    Ok(())
}

async fn resolve_mapping(
    mapping: &WitMapping,
    watched: &GroupVersionKind,
    registry: &InformerRegistry,
) -> Result<KeyMapping, StartError> {
    Ok(match mapping {
        WitMapping::Object => KeyMapping::Object(watched.clone()),
        WitMapping::Fixed(key) => KeyMapping::Fixed(key.clone()),
        WitMapping::ControllerOwner(owner) => {
            let owner = from_wit_gvk(owner);
            let namespaced = registry.resolver().resolve(&owner).await?.namespaced;
            KeyMapping::ControllerOwner { owner, namespaced }
        }
    })
}
