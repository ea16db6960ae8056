//! A plugin's watches: informers acquired for its registration, its key mappings and
//! update predicates subscribed to them, and the periodic resync.
//! The registration has been validated (`super::validate`) before it gets here.

use std::sync::Arc;
use std::time::Duration;

use kube::core::GroupVersionKind;
use tokio::task::JoinHandle;

use super::StartError;
use wcm_core::contract::{KeyMapping as WitMapping, Predicate, Registration};
use wcm_core::keys::{KeyMapping, ReconcileKey, from_wit_gvk};
use wcm_core::kube::cache::Change;
use wcm_core::kube::informer::{Informer, InformerHold, InformerRegistry, WatchScope};
use wcm_core::kube::{field_selector, predicates, selector};
use wcm_core::metrics::{Metrics, PluginLabels};
use wcm_core::queue::WorkQueue;
use wcm_core::rights::Granted;

/// One informer of a watch and what its changes become.
#[derive(Clone)]
struct Feed {
    informer: Arc<Informer>,
    mapping: KeyMapping,
    predicates: Arc<[Predicate]>,
}

/// The informers and key mappings of one registration, not yet feeding a queue: one
/// per namespace a watch names (one for all when it names none), in that order, which
/// is the order RBAC findings are kept in (`Granted`).
pub struct Watches {
    watches: Vec<Feed>,
    /// Subscription ids while attached to a queue.
    attached: Vec<u64>,
    resync: Option<JoinHandle<()>>,
    /// Per watch: whether the plugin was served it at the last look (see
    /// [`Watches::replay_reopened`]).
    served: Vec<bool>,
}

impl Watches {
    /// Acquires (starting or sharing) an informer per watch of `registration`.
    pub async fn acquire(
        registration: &Registration,
        registry: &InformerRegistry,
    ) -> Result<Watches, StartError> {
        let mut watches = Vec::new();
        for watch in &registration.watches {
            let gvk = from_wit_gvk(&watch.kind);
            let mapping = resolve_mapping(&watch.maps_to, &gvk, registry).await?;
            let predicates: Arc<[Predicate]> = Predicate::parse_known(&watch.predicates).into();
            for namespace in watch.informer_namespaces() {
                // Selectors written one way, so watches that say the same share.
                let canonical = |s: &Option<String>, f: fn(&str) -> String| {
                    s.as_deref().map(f).filter(|s| !s.is_empty())
                };
                let scope = WatchScope {
                    gvk: gvk.clone(),
                    namespace,
                    label_selector: canonical(&watch.label_selector, selector::canonical),
                    field_selector: canonical(&watch.field_selector, field_selector::canonical),
                    metadata_only: watch.metadata_only,
                };
                watches.push(Feed {
                    informer: registry.acquire(scope).await?,
                    mapping: mapping.clone(),
                    predicates: predicates.clone(),
                });
            }
        }
        Ok(Watches {
            served: vec![true; watches.len()],
            watches,
            attached: Vec::new(),
            resync: None,
        })
    }

    /// Bytes of the host's caches these watches hold: each informer's divided among
    /// its subscriptions, of this plugin and others (a plugin subscribed twice to one
    /// informer pays for it twice over; one informer shared with another plugin,
    /// half).
    pub fn cache_bytes(&self) -> usize {
        (self.watches.iter())
            .map(|f| f.informer.cache().bytes() / f.informer.subscribers().max(1))
            .sum()
    }

    /// The informers, for the plugin's cache reads.
    pub fn informers(&self) -> Vec<Arc<Informer>> {
        self.watches.iter().map(|f| f.informer.clone()).collect()
    }

    /// Keeps every informer's watch running while the holds are kept.
    pub fn hold(&self) -> Vec<InformerHold> {
        self.watches.iter().map(|f| f.informer.hold()).collect()
    }

    /// Waits until every informer has its first full list.
    pub async fn synced(&self) {
        for feed in &self.watches {
            feed.informer.wait_synced().await;
        }
    }

    /// Starts feeding `queue`: every cached object's key now, every change's later,
    /// and a resync of all keys every `resync` if set.
    pub fn attach(
        &mut self,
        queue: &WorkQueue<ReconcileKey>,
        plugin: &str,
        metrics: &Metrics,
        resync: Option<Duration>,
        granted: Arc<Granted>,
    ) {
        let labels = PluginLabels {
            plugin: plugin.to_string(),
        };
        for (index, feed) in self.watches.iter().enumerate() {
            let (q, f) = (queue.clone(), feed.clone());
            let events = metrics.plugin_events.get_or_create(&labels).clone();
            let granted = granted.clone();
            let id = feed.informer.subscribe(Arc::new(move |change: &Change| {
                if !granted.is_open(index) {
                    return; // RBAC does not let the plugin read this kind now
                }
                events.inc();
                if !predicates::passes(&f.predicates, change) {
                    return;
                }
                for key in f.mapping.keys_for(change) {
                    q.add(key);
                }
            }));
            self.attached.push(id);
        }
        self.resync = resync.map(|period| {
            let watches = self.watches.clone();
            tokio::spawn(run_resync(period, watches, queue.clone(), granted))
        });
    }

    /// Queues, through its key mappings, every cached object of each watch the plugin
    /// is served again since the last look: its read right came back, or its informer
    /// works again. While a watch was closed its changes queued nothing, so a
    /// level-based plugin must look at everything once, as after a relist; its
    /// predicates are not asked (nothing is compared with a version it missed).
    pub fn replay_reopened(&mut self, queue: &WorkQueue<ReconcileKey>, granted: &Granted) {
        for (index, feed) in self.watches.iter().enumerate() {
            let served = granted.is_open(index) && feed.informer.problem().is_none();
            let was = std::mem::replace(&mut self.served[index], served);
            if !served || was {
                continue;
            }
            let objects = feed.informer.cache().list(|_| true);
            tracing::info!(kind = %feed.informer.scope().gvk.kind, objects = objects.len(),
                "served a watch again: every cached object goes through its mappings once");
            for obj in objects {
                for key in feed.mapping.keys_for(&Change::added(obj)) {
                    queue.add(key);
                }
            }
        }
    }

    /// Stops feeding the queue; the informers are released when this is dropped.
    pub fn detach(&mut self) {
        for (feed, id) in self.watches.iter().zip(self.attached.drain(..)) {
            feed.informer.unsubscribe(id);
        }
        if let Some(resync) = self.resync.take() {
            resync.abort();
        }
    }
}

impl Drop for Watches {
    fn drop(&mut self) {
        self.detach();
    }
}

/// Every `period`, queues the key of every object in the plugin's caches (the queue
/// collapses them with pending work), until the queue shuts down.
async fn run_resync(
    period: Duration,
    watches: Vec<Feed>,
    queue: WorkQueue<ReconcileKey>,
    granted: Arc<Granted>,
) {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    while !queue.is_shut_down() {
        ticks.tick().await;
        let open = watches
            .iter()
            .enumerate()
            .filter(|(i, _)| granted.is_open(*i));
        for (_, feed) in open {
            for obj in feed.informer.cache().list(|_| true) {
                if let Some(key) = feed.mapping.key_for(&obj) {
                    queue.add(key);
                }
            }
        }
    }
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
