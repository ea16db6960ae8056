//! The in-memory cluster one plugin sees in `wasm-controller-manager test`: its
//! watches over the fixtures' objects (as its caches would hold them), reads from
//! them, and the keys its own writes wake. It is a capability [`Backend`] (in
//! `backend`), so the plugin's calls pass the same pipeline as in a live cluster;
//! writes are in `writes`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use kube::api::DynamicObject;
use kube::core::{GroupVersionKind, Selector, SelectorExt};
use serde::Deserialize;
use serde_json::Value;

use super::faults::Fault;
use super::fixtures::Scopes;
use super::injection::{Injection, Pending};
use super::report::{Event, Write};
use super::store::{CLOCK_SINCE_EPOCH, Changed, ObjectId, Store};
use wcm_core::capabilities::{CapabilityError, Op, Selection, Target};
use wcm_core::contract::Predicate;
use wcm_core::keys::{KeyMapping, ReconcileKey};
use wcm_core::kube::cache::{CachedObject, Change};
use wcm_core::kube::field_selector::FieldSelector;
use wcm_core::kube::predicates;

/// One watch of the plugin, as an informer would hold it.
#[derive(Debug)]
pub struct Watch {
    /// The watched kind.
    pub gvk: GroupVersionKind,
    /// Only this namespace, if set.
    pub namespace: Option<String>,
    /// Only objects matching this label selector.
    pub selector: Selector,
    /// Only objects matching this field selector.
    pub fields: FieldSelector,
    /// Whether the cache holds only apiVersion, kind and metadata.
    pub metadata_only: bool,
    /// Which updates queue a key.
    pub predicates: Vec<Predicate>,
    /// How a change becomes a key.
    pub mapping: KeyMapping,
}

impl Watch {
    /// A watch of every object of `gvk` in `namespace` (all if none), each queueing
    /// its own key.
    pub fn of(gvk: GroupVersionKind, namespace: Option<String>) -> Watch {
        Watch {
            mapping: KeyMapping::Object(gvk.clone()),
            gvk,
            namespace,
            selector: Selector::default(),
            fields: FieldSelector::default(),
            metadata_only: false,
            predicates: Vec::new(),
        }
    }

    /// Whether this watch's cache holds `object` (stored at `id`).
    fn holds(&self, id: &ObjectId, object: &Value) -> bool {
        id.group == self.gvk.group
            && id.kind == self.gvk.kind
            && (self.namespace.is_none() || self.namespace == id.namespace)
            && self.selector.matches(&labels(object))
            && self.fields.matches(object)
    }

    /// `object` as this watch's cache holds it: whole, or its metadata only.
    fn view(&self, object: &Value) -> String {
        if !self.metadata_only {
            return object.to_string();
        }
        let mut held = serde_json::Map::new();
        for field in ["apiVersion", "kind", "metadata"] {
            if let Some(value) = object.get(field) {
                held.insert(field.to_string(), value.clone());
            }
        }
        Value::Object(held).to_string()
    }

    /// Whether this watch is of `gvk` and can hold objects of `namespace`.
    fn covers(&self, gvk: &GroupVersionKind, namespace: Option<&str>) -> bool {
        self.gvk.group == gvk.group
            && self.gvk.kind == gvk.kind
            && match (&self.namespace, namespace) {
                (Some(watched), Some(ns)) => watched == ns,
                _ => true,
            }
    }
}

/// The objects, and what the plugin did to them so far.
#[derive(Debug, Default)]
pub(super) struct World {
    pub(super) store: Store,
    /// Changes the watches have not turned into keys yet.
    pub(super) changes: Pending,
    pub(super) writes: Vec<Write>,
    pub(super) events: Vec<Event>,
    /// The run's fault, if any, and what it counted.
    pub(super) injection: Injection,
}

/// The in-memory cluster as one plugin sees it.
#[derive(Debug)]
pub struct MemoryCluster {
    /// The plugin: the field manager of its writes.
    pub(super) plugin: String,
    watches: Vec<Watch>,
    pub(super) scopes: Scopes,
    world: Mutex<World>,
    /// The plugin's wall clock, standing still, in seconds since the Unix epoch.
    clock: std::sync::atomic::AtomicU64,
}

impl MemoryCluster {
    /// The cluster of `store`'s objects, seen through `watches` by `plugin`.
    pub fn new(plugin: &str, watches: Vec<Watch>, scopes: Scopes, store: Store) -> Self {
        let world = World {
            store,
            ..World::default()
        };
        MemoryCluster {
            plugin: plugin.to_string(),
            watches,
            scopes,
            world: Mutex::new(world),
            clock: CLOCK_SINCE_EPOCH.as_secs().into(),
        }
    }

    pub(super) fn world(&self) -> MutexGuard<'_, World> {
        self.world.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The keys of every object the watches hold, as when informers first list.
    pub fn initial_keys(&self) -> Vec<ReconcileKey> {
        let world = self.world();
        let mut keys = Vec::new();
        for watch in &self.watches {
            for (id, object) in world.store.objects() {
                if watch.holds(id, object) {
                    keys.extend(watch.mapping.key_for(&cached(object)));
                }
            }
        }
        keys
    }

    /// The keys the writes since the last call woke, as informers would deliver them.
    pub fn woken_keys(&self) -> Vec<ReconcileKey> {
        let changes =
            self.with_faults(|faults, pending, holding| faults.deliverable(pending, holding));
        let mut keys = Vec::new();
        for (id, changed) in &changes {
            // As the cache holds them: converted once, whichever watches hold them.
            let before = changed.before.as_ref().map(|o| (o, cached(o)));
            let after = changed.after.as_ref().map(|o| (o, cached(o)));
            for watch in &self.watches {
                let held = |side: &Option<(&Value, Arc<CachedObject>)>| {
                    (side.as_ref())
                        .filter(|(o, _)| watch.holds(id, o))
                        .map(|(_, c)| c.clone())
                };
                let change = match (held(&before), held(&after)) {
                    (old, Some(new)) => Change::Applied { new, old },
                    (Some(old), None) => Change::Deleted(old),
                    (None, None) => continue,
                };
                if predicates::passes(&watch.predicates, &change) {
                    keys.extend(watch.mapping.keys_for(&change));
                }
            }
        }
        keys
    }

    /// Where the plugin's wall clock stands (a replayed reconcile's, as recorded).
    pub(super) fn set_clock(&self, since_epoch: std::time::Duration) {
        let seconds = since_epoch.as_secs();
        self.clock
            .store(seconds, std::sync::atomic::Ordering::Relaxed);
    }

    /// The plugin's wall clock, since the Unix epoch.
    pub(super) fn clock(&self) -> std::time::Duration {
        let seconds = self.clock.load(std::sync::atomic::Ordering::Relaxed);
        std::time::Duration::from_secs(seconds)
    }

    /// Injects `fault` into the run on this cluster (none: an unperturbed run that
    /// still counts its writes, changes and calls).
    pub fn inject(&self, fault: Option<Fault>) {
        self.world().injection = Injection::of(fault);
    }

    /// Runs `step` of the run's fault on the changes pending, with which watches hold
    /// what a change changed.
    fn with_faults<T>(
        &self,
        step: impl FnOnce(&mut Injection, &mut Pending, &dyn Fn(&ObjectId, &Changed) -> Vec<usize>) -> T,
    ) -> T {
        let mut world = self.world();
        let World {
            injection, changes, ..
        } = &mut *world;
        step(injection, changes, &|id, changed| self.holding(id, changed))
    }

    /// Before an API call: the error the fault answers it with, if any.
    pub(super) fn before_call(&self, op: &Op) -> Option<CapabilityError> {
        self.world().injection.before_call(op)
    }

    /// A host fault if the host has crashed.
    pub(super) fn after_crash(&self, op: &Op) -> Option<CapabilityError> {
        self.world().injection.after_crash(op)
    }

    /// After a write or deletion the cluster made: what the fault makes of it.
    pub(super) fn after_write(&self, op: &Op) -> Option<CapabilityError> {
        self.with_faults(|faults, pending, holding| faults.after_write(op, pending, holding))
    }

    /// Whether the host crashed in the reconcile that just ended.
    pub(super) fn take_crash(&self) -> bool {
        self.with_faults(|faults, pending, _| faults.take_crash(pending))
    }

    /// Nothing is ready to run: whether held and late events came.
    pub(super) fn release_held(&self, last: bool) -> bool {
        self.with_faults(|faults, pending, _| faults.release_held(last, pending))
    }

    /// A reconcile ended.
    pub(super) fn reconciled(&self) {
        self.with_faults(|faults, pending, _| faults.reconciled(pending))
    }

    /// Notes a line of the run's trace (a reconcile beginning).
    pub(super) fn trace(&self, line: String) {
        self.world().injection.trace.push(line);
    }

    /// The writes, changes and calls counted so far.
    pub(super) fn counted(&self) -> (usize, usize, usize) {
        let faults = &self.world().injection;
        (faults.writes, faults.changes, faults.calls)
    }

    /// The run's trace: each reconcile and the calls it made.
    pub(super) fn take_trace(&self) -> Vec<String> {
        std::mem::take(&mut self.world().injection.trace)
    }

    /// What the plugin wrote and recorded.
    pub fn journal(&self) -> (Vec<Write>, Vec<Event>) {
        let mut world = self.world();
        (
            std::mem::take(&mut world.writes),
            std::mem::take(&mut world.events),
        )
    }

    /// The plugin's watches of `gvk` that can hold objects of `namespace`, by index.
    pub(super) fn watches_of(&self, gvk: &GroupVersionKind, namespace: Option<&str>) -> Vec<usize> {
        (self.watches.iter().enumerate())
            .filter(|(_, w)| w.covers(gvk, namespace))
            .map(|(index, _)| index)
            .collect()
    }

    /// The plugin's watches that hold the object `changed` changed, before or after.
    pub(super) fn holding(&self, id: &ObjectId, changed: &Changed) -> Vec<usize> {
        let sides = [changed.before.as_ref(), changed.after.as_ref()];
        (self.watches.iter().enumerate())
            .filter(|(_, w)| sides.iter().flatten().any(|o| w.holds(id, o)))
            .map(|(index, _)| index)
            .collect()
    }

    /// The kind the first of `watches` watches, as the report names kinds.
    pub(super) fn watched_kind(&self, watches: &[usize]) -> String {
        let first = watches.first().and_then(|index| self.watches.get(*index));
        first.map_or_else(String::new, |w| {
            wcm_core::kube::discovery::display_gvk(&w.gvk)
        })
    }

    /// The address of a target, as the store keys it.
    pub(super) fn id(&self, target: &Target) -> ObjectId {
        ObjectId {
            group: target.gvk.group.clone(),
            kind: target.gvk.kind.clone(),
            namespace: target.namespace.clone(),
            name: target.name.clone(),
        }
    }

    /// `target` as the first of `watches` holding it holds it.
    pub(super) fn cached(&self, target: &Target, watches: &[usize]) -> Option<Arc<str>> {
        let id = self.id(target);
        let world = self.world();
        let object = world.injection.cache_get(&world.store, &id)?;
        let holder = (watches.iter())
            .filter_map(|index| self.watches.get(*index))
            .find(|w| w.holds(&id, object))?;
        Some(holder.view(object).into())
    }

    /// The uid of `target` if a watch of the plugin holds it.
    pub(super) fn uid(&self, target: &Target) -> Option<String> {
        let id = self.id(target);
        let world = self.world();
        let object = world.injection.cache_get(&world.store, &id)?;
        self.watches.iter().find(|w| w.holds(&id, object))?;
        let uid = object.pointer("/metadata/uid").and_then(Value::as_str);
        uid.map(str::to_string)
    }

    /// The objects of `selection`, as the first watch holding each holds it, sorted
    /// by namespace and name.
    pub(super) fn matching(
        &self,
        selection: Selection<'_>,
    ) -> BTreeMap<(Option<String>, String), String> {
        let Selection {
            watches,
            namespace,
            selector,
        } = selection;
        let watches: Vec<&Watch> = (watches.iter())
            .filter_map(|index| self.watches.get(*index))
            .collect();
        let world = self.world();
        let mut found = BTreeMap::new();
        for (id, object) in world.injection.cache_objects(&world.store) {
            let wanted = namespace.is_none_or(|ns| id.namespace.as_deref() == Some(ns))
                && selector.matches(&labels(object));
            let holder = watches.iter().find(|w| wanted && w.holds(id, object));
            if let Some(watch) = holder {
                found.insert((id.namespace.clone(), id.name.clone()), watch.view(object));
            }
        }
        found
    }
}

fn labels(object: &Value) -> BTreeMap<String, String> {
    (object.pointer("/metadata/labels"))
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// An object as an informer cache holds it, for the key mappings and predicates
/// (fixtures are checked to be Kubernetes objects when they are read).
fn cached(object: &Value) -> Arc<CachedObject> {
    let obj = as_dynamic(object.clone());
    Arc::new(CachedObject::from_dynamic(obj).expect("a DynamicObject serialises"))
}

/// A stored object as the API server's client would decode it.
pub(super) fn as_dynamic(object: Value) -> DynamicObject {
    // Decoded from a reference: the object is kept, not copied, for the fallback.
    DynamicObject::deserialize(&object).unwrap_or(DynamicObject {
        types: None,
        metadata: Default::default(),
        data: object,
    })
}
