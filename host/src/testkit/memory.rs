//! The in-memory cluster one plugin sees in `wasm-controller-manager test`: its
//! watches over the fixtures' objects (as its caches would hold them), reads from
//! them, and the keys its own writes wake. Writes are in `writes`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use kube::core::{GroupVersionKind, Selector, SelectorExt};
use serde_json::Value;

use super::fixtures::Scopes;
use super::report::{Event, Write};
use super::store::{Changed, ObjectId, Store};
use crate::capabilities::{CapabilityError, Declared, Target, list_call, list_selector, list_what};
use crate::contract::{ErrorCode, GuestError, Predicate, Verb};
use crate::keys::{KeyMapping, ReconcileKey};
use crate::kube::cache::{CachedObject, Change};
use crate::kube::field_selector::FieldSelector;
use crate::kube::predicates;

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
    pub(super) changes: Vec<(ObjectId, Changed)>,
    pub(super) writes: Vec<Write>,
    pub(super) events: Vec<Event>,
}

/// The in-memory cluster as one plugin sees it.
#[derive(Debug)]
pub struct MemoryCluster {
    pub(super) declared: Declared,
    watches: Vec<Watch>,
    pub(super) scopes: Scopes,
    world: Mutex<World>,
}

/// Objects as a plugin's watches hold them (JSON), by namespace and name.
type Views = BTreeMap<(Option<String>, String), String>;

impl MemoryCluster {
    /// The cluster of `store`'s objects, seen through `watches` by the plugin of
    /// `declared`.
    pub fn new(declared: Declared, watches: Vec<Watch>, scopes: Scopes, store: Store) -> Self {
        let world = World {
            store,
            ..World::default()
        };
        MemoryCluster {
            declared,
            watches,
            scopes,
            world: Mutex::new(world),
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
        let changes = std::mem::take(&mut self.world().changes);
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

    /// What the plugin wrote and recorded.
    pub fn journal(&self) -> (Vec<Write>, Vec<Event>) {
        let mut world = self.world();
        (
            std::mem::take(&mut world.writes),
            std::mem::take(&mut world.events),
        )
    }

    /// The watches of `gvk` that can hold `namespace`: `not_watched` if none.
    fn watches_of(
        &self,
        op: &str,
        what: &str,
        gvk: &GroupVersionKind,
        namespace: Option<&str>,
    ) -> Result<Vec<&Watch>, CapabilityError> {
        let found: Vec<&Watch> = (self.watches.iter())
            .filter(|w| w.covers(gvk, namespace))
            .collect();
        if found.is_empty() {
            return Err(self.declared.not_watched(op, what, gvk));
        }
        Ok(found)
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

    /// One object, if a watch of the plugin holds it, or from the store for a kind the
    /// plugin declared `get` on but does not watch (the live cluster's API read).
    pub fn read(&self, target: &Target) -> Result<Arc<str>, CapabilityError> {
        let what = target.to_string();
        let namespace = target.namespace.as_deref();
        let live = !self
            .watches
            .iter()
            .any(|w| w.covers(&target.gvk, namespace))
            && self.declared.allows(Verb::Get, &target.gvk);
        let watches = match live {
            true => Vec::new(),
            false => self.watches_of("get", &what, &target.gvk, namespace)?,
        };
        let id = self.id(target);
        let world = self.world();
        let json = (world.store.get(&id))
            .and_then(|o| match live {
                true => Some(o.to_string()),
                false => watches.iter().find(|w| w.holds(&id, o)).map(|w| w.view(o)),
            })
            .ok_or_else(|| not_found(target, live))?;
        self.declared
            .check_result_size(&format!("get {target}"), json.len())?;
        Ok(json.into())
    }

    /// Every object of `gvk` the plugin's watches hold in `namespace` (all if none)
    /// matching `selector`, by namespace and name: all, or the first `limit`.
    pub fn read_all(
        &self,
        gvk: &GroupVersionKind,
        namespace: Option<&str>,
        label_selector: Option<&str>,
        limit: Option<usize>,
    ) -> Result<Vec<Arc<str>>, CapabilityError> {
        let op = list_call(limit).name();
        let (what, found) = self.matching(op, gvk, namespace, label_selector)?;
        let found: Vec<String> = found
            .into_values()
            .take(limit.unwrap_or(usize::MAX))
            .collect();
        let bytes = found.iter().map(String::len).sum();
        self.declared
            .check_result_size(&format!("{op} {what}"), bytes)?;
        Ok(found.into_iter().map(Arc::from).collect())
    }

    /// The objects `op` (`list`, `list-first`, `count`) sees, as the plugin's watches hold them, by
    /// namespace and name; and the scope's description for errors.
    pub fn matching(
        &self,
        op: &str,
        gvk: &GroupVersionKind,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<(String, Views), CapabilityError> {
        let what = list_what(gvk, namespace);
        let watches = self.watches_of(op, &what, gvk, namespace)?;
        let selector = list_selector(op, &what, label_selector)?;
        let world = self.world();
        let mut found = BTreeMap::new();
        for (id, object) in world.store.objects() {
            let wanted = namespace.is_none_or(|ns| id.namespace.as_deref() == Some(ns))
                && selector.matches(&labels(object));
            let holder = watches.iter().find(|w| wanted && w.holds(id, object));
            if let Some(watch) = holder {
                found.insert((id.namespace.clone(), id.name.clone()), watch.view(object));
            }
        }
        Ok((what, found))
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
    let obj = serde_json::from_value(object.clone()).unwrap_or(kube::api::DynamicObject {
        types: None,
        metadata: Default::default(),
        data: object.clone(),
    });
    Arc::new(CachedObject::from_dynamic(obj).expect("a DynamicObject serialises"))
}

/// A missing object as the plugin is told: a cache miss, or the API server's 404.
fn not_found(target: &Target, live: bool) -> CapabilityError {
    if !live {
        return CapabilityError::NotFound(format!("get {target}: not in the cache"));
    }
    let message = format!(
        "get {target}: {} {:?} not found (404 NotFound)",
        target.gvk.kind, target.name
    );
    let mut error = GuestError::new(ErrorCode::NotFound, message);
    error.status = Some(404);
    CapabilityError::Api(Box::new(error))
}
