//! A plugin's watches: informers acquired for its registration, its key mappings
//! subscribed to them, and the periodic resync.
//! The registration has been validated (`super::validate`) before it gets here.

use std::sync::Arc;
use std::time::Duration;

use kube::core::GroupVersionKind;
use tokio::task::JoinHandle;

use super::StartError;
use crate::capabilities::Granted;
use crate::contract::{KeyMapping as WitMapping, Registration};
use crate::keys::{KeyMapping, ReconcileKey, from_wit_gvk};
use crate::kube::cache::Change;
use crate::kube::informer::{Informer, InformerRegistry, WatchScope};
use crate::metrics::{Metrics, PluginLabels};
use crate::queue::WorkQueue;

/// The informers and key mappings of one registration, not yet feeding a queue.
pub struct Watches {
    watches: Vec<(Arc<Informer>, KeyMapping)>,
    /// Subscription ids while attached to a queue.
    attached: Vec<u64>,
    resync: Option<JoinHandle<()>>,
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
            let scope = WatchScope {
                gvk,
                namespace: watch.namespace.clone(),
                label_selector: watch.label_selector.clone(),
            };
            watches.push((registry.acquire(scope).await?, mapping));
        }
        Ok(Watches {
            watches,
            attached: Vec::new(),
            resync: None,
        })
    }

    /// The informers, for the plugin's cache reads.
    pub fn informers(&self) -> Vec<Arc<Informer>> {
        self.watches.iter().map(|(i, _)| i.clone()).collect()
    }

    /// Waits until every informer has its first full list.
    pub async fn synced(&self) {
        for (informer, _) in &self.watches {
            informer.wait_synced().await;
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
        for (index, (informer, mapping)) in self.watches.iter().enumerate() {
            let (q, m) = (queue.clone(), mapping.clone());
            let events = metrics.plugin_events.get_or_create(&labels).clone();
            let granted = granted.clone();
            let id = informer.subscribe(Arc::new(move |change: &Change| {
                if !granted.is_open(index) {
                    return; // RBAC does not let the plugin read this kind now
                }
                events.inc();
                for key in m.keys_for(change) {
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

    /// Stops feeding the queue; the informers are released when this is dropped.
    pub fn detach(&mut self) {
        for ((informer, _), id) in self.watches.iter().zip(self.attached.drain(..)) {
            informer.unsubscribe(id);
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
    watches: Vec<(Arc<Informer>, KeyMapping)>,
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
        for (_, (informer, mapping)) in open {
            for obj in informer.cache().list(|_| true) {
                if let Some(key) = mapping.key_for(&obj) {
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
