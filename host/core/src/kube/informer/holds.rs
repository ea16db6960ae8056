//! Whether an informer watches: only while something holds it. The last hold
//! dropped stops the watch and empties the cache; the first one taken starts it again
//! with a full list.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use kube::api::DynamicObject;
use kube::core::PartialObjectMeta;
use kube::runtime::watcher::{self, Event};
use tokio::task::JoinHandle;

use super::stream::{api, run_watch};
use super::{CachedObject, Health, Informer, ObjectKey};
use crate::kube::decoded::Decoded;

/// Whether an informer's watch runs: while anything holds it.
#[derive(Default)]
pub(super) struct Running {
    holds: usize,
    task: Option<JoinHandle<()>>,
    /// Bumped each time the watch stops, so events a stopped task was still
    /// delivering change nothing.
    generation: u64,
}

impl Running {
    /// Stops the watch task, if one runs.
    pub(super) fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Keeps an informer's watch running while it exists (see [`Informer::hold`]).
/// It does not keep the informer itself alive.
#[must_use = "the informer's watch stops when its last hold is dropped"]
pub struct InformerHold(Weak<Informer>);

impl Drop for InformerHold {
    fn drop(&mut self) {
        if let Some(informer) = self.0.upgrade() {
            informer.release();
        }
    }
}

impl Informer {
    /// Keeps the watch running (starting it, with a full list, if it was not) until
    /// the hold, and every other, is dropped.
    pub fn hold(self: &Arc<Self>) -> InformerHold {
        let mut running = self.running();
        running.holds += 1;
        if running.holds == 1 {
            tracing::info!(kind = %self.labels.kind, namespace = ?self.scope.namespace,
                selector = ?self.scope.label_selector, fields = ?self.scope.field_selector,
                metadata_only = self.scope.metadata_only, "informer started");
            running.task = Some(self.spawn_watch(running.generation));
            self.watching.set(1);
        }
        InformerHold(Arc::downgrade(self))
    }

    /// Whether the watch runs (something holds it).
    pub fn is_running(&self) -> bool {
        self.running().holds > 0
    }

    fn spawn_watch(self: &Arc<Self>, generation: u64) -> JoinHandle<()> {
        let (weak, config) = (Arc::downgrade(self), self.config.clone());
        match self.scope.metadata_only {
            false => tokio::spawn(run_watch(
                api::<Decoded<DynamicObject>>(self.client.clone(), self),
                config,
                (weak, generation),
            )),
            true => {
                let api =
                    api::<Decoded<PartialObjectMeta<DynamicObject>>>(self.client.clone(), self);
                tokio::spawn(run_watch(api, config, (weak, generation)))
            }
        }
    }

    /// A hold was dropped; the last one stops the watch and empties the cache (no
    /// subscriber is told: none of them acts while nothing holds the informer).
    fn release(&self) {
        let mut running = self.running();
        running.holds = running.holds.saturating_sub(1);
        if running.holds > 0 {
            return;
        }
        running.generation += 1;
        running.stop();
        let _ = self.cache.replace(HashMap::new());
        self.synced.send_replace(false);
        *self.health() = Health::default();
        self.objects.set(0);
        self.bytes.set(0);
        self.watching.set(0);
        tracing::info!(kind = %self.labels.kind, namespace = ?self.scope.namespace,
            "informer suspended: nothing running here needs it");
    }

    pub(super) fn running(&self) -> std::sync::MutexGuard<'_, Running> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Applies what the watch of `generation` saw, unless that watch was stopped.
    pub(super) fn on_watch_item(
        &self,
        generation: u64,
        item: Result<Event<Decoded<DynamicObject>>, watcher::Error>,
        relist: &mut Option<HashMap<ObjectKey, Arc<CachedObject>>>,
    ) {
        // Held while the item applies, so a release cannot empty the cache in between.
        let running = self.running();
        if running.generation != generation {
            return;
        }
        match item {
            Ok(event) => self.on_event(event, relist),
            Err(e) => {
                tracing::warn!(kind = %self.labels.kind, error = %e, "watch failed; retrying");
                self.failed(&e);
            }
        }
    }
}
