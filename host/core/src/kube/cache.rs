//! The informer cache: every object of one watch, held once as ready-made JSON.
//!
//! Objects are stored with `metadata.managedFields` removed (it is ~40 % of a typical
//! object and no controller reads it) and serialised once, so a plugin's `get` is a
//! copy of bytes, not a re-serialisation. A relist builds a new map on the side and
//! swaps it in whole, so readers never see a half-rebuilt cache.
//!
//! A plugin's own write is stored before the watch delivers it (read-your-writes).
//! Resource versions are opaque: they are only compared for equality. The watch
//! delivers changes in order, so a written version the watch has not delivered yet is
//! newer than anything cached, and until the watch reaches it the older events it
//! still delivers for that object must not replace it.

use std::collections::{BTreeMap, HashMap};
use std::num::NonZeroUsize;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::DynamicObject;
use lru::LruCache;
use tokio::time::Instant;

/// Namespace (none for cluster-scoped) and name of a cached object.
pub type ObjectKey = (Option<String>, String);

/// How many (object, version) pairs the watch delivered are remembered, to tell a
/// written copy the watch has already passed from one it has not reached yet.
const SEEN_VERSIONS: NonZeroUsize = NonZeroUsize::new(4096).expect("not zero");
/// How long a written copy holds off older watch events; after that the watch wins
/// again, whatever happened to the write's own event.
const WRITTEN_COPY_TTL: Duration = Duration::from_secs(10);

/// One object as the cache holds it.
#[derive(Debug)]
pub struct CachedObject {
    /// The object's namespace; none if cluster-scoped.
    pub namespace: Option<String>,
    /// The object's name.
    pub name: String,
    /// The object's uid, for Event references.
    pub uid: Option<String>,
    /// The resource version it was stored with (opaque: compared for equality only).
    pub resource_version: Option<String>,
    /// Labels, for selector matching on `list`.
    pub labels: BTreeMap<String, String>,
    /// Owner references, for owner key mapping.
    pub owners: Vec<OwnerReference>,
    /// What the watches' predicates compare between two versions of the object.
    pub marks: Marks,
    /// The whole object as JSON, without managedFields.
    pub json: Arc<str>,
}

/// The parts of an object's metadata update predicates compare, held small: the
/// generation as is, annotations and finalizers as hashes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Marks {
    /// `metadata.generation`, if the kind keeps one.
    pub generation: Option<i64>,
    /// A hash of the annotations.
    pub annotations: u64,
    /// A hash of the finalizers, in order.
    pub finalizers: u64,
    /// Whether the deletion timestamp is set.
    pub deleting: bool,
}

impl Marks {
    fn of(meta: &kube::api::ObjectMeta) -> Marks {
        Marks {
            generation: meta.generation,
            annotations: hash(&meta.annotations),
            finalizers: hash(&meta.finalizers),
            deleting: meta.deletion_timestamp.is_some(),
        }
    }
}

/// A hash that is stable within one process, which is all comparisons need.
fn hash(value: &impl std::hash::Hash) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
    BuildHasherDefault::<DefaultHasher>::default().hash_one(value)
}

impl CachedObject {
    /// Converts a watched object; fails only if it cannot be serialised.
    pub fn from_dynamic(mut obj: DynamicObject) -> Result<CachedObject, serde_json::Error> {
        obj.metadata.managed_fields = None;
        let json: Arc<str> = serde_json::to_string(&obj)?.into();
        let meta = obj.metadata;
        Ok(CachedObject {
            marks: Marks::of(&meta),
            namespace: meta.namespace,
            name: meta.name.unwrap_or_default(),
            uid: meta.uid,
            resource_version: meta.resource_version,
            labels: meta.labels.unwrap_or_default(),
            owners: meta.owner_references.unwrap_or_default(),
            json,
        })
    }

    /// The cache key of this object.
    pub fn key(&self) -> ObjectKey {
        (self.namespace.clone(), self.name.clone())
    }

    /// Whether it is of `namespace` (any, if none).
    pub fn is_in(&self, namespace: Option<&str>) -> bool {
        namespace.is_none_or(|ns| self.namespace.as_deref() == Some(ns))
    }
}

/// What changed in the cache, for delivery to subscribers.
#[derive(Debug, Clone)]
pub enum Change {
    /// The object was added or modified.
    Applied {
        /// Its state now.
        new: Arc<CachedObject>,
        /// Its state before, if it was cached (owner mappings wake a former owner).
        old: Option<Arc<CachedObject>>,
    },
    /// The object is gone; this is its last known state.
    Deleted(Arc<CachedObject>),
}

impl Change {
    /// A change that adds `obj` with nothing known before.
    pub fn added(obj: Arc<CachedObject>) -> Change {
        Change::Applied {
            new: obj,
            old: None,
        }
    }
}

/// A plugin's write the watch has not delivered yet.
#[derive(Debug)]
struct WrittenCopy {
    version: String,
    stored: Instant,
    /// What the watch last delivered before the write: the "before" of the change the
    /// write's own event makes, so predicates see the write whether its event or its
    /// response arrived first.
    delivered: Arc<CachedObject>,
}

#[derive(Debug)]
struct Entries {
    objects: HashMap<ObjectKey, Arc<CachedObject>>,
    /// Bytes of JSON of `objects`, kept with every change.
    bytes: usize,
    /// Written copies waiting for their watch event, by object.
    written: HashMap<ObjectKey, WrittenCopy>,
    /// The last (object, version) pairs the watch delivered; the oldest is forgotten
    /// first. A plugin's write asks whether its version was delivered: a lookup, not
    /// a scan (scanning thousands of pairs per write was a hot spot in bursts).
    seen: LruCache<(ObjectKey, String), ()>,
}

impl Default for Entries {
    fn default() -> Self {
        Entries {
            objects: HashMap::new(),
            bytes: 0,
            written: HashMap::new(),
            seen: LruCache::new(SEEN_VERSIONS),
        }
    }
}

impl Entries {
    /// Stores `obj` under `key`, keeping the byte count; returns what it replaced.
    fn insert(&mut self, key: ObjectKey, obj: Arc<CachedObject>) -> Option<Arc<CachedObject>> {
        self.bytes += obj.json.len();
        let replaced = self.objects.insert(key, obj);
        self.bytes -= replaced.as_ref().map_or(0, |o| o.json.len());
        replaced
    }

    /// Removes `key`'s object, keeping the byte count.
    fn remove(&mut self, key: &ObjectKey) -> Option<Arc<CachedObject>> {
        let removed = self.objects.remove(key);
        self.bytes -= removed.as_ref().map_or(0, |o| o.json.len());
        removed
    }

    fn saw(&mut self, obj: &CachedObject) {
        let Some(version) = &obj.resource_version else {
            return;
        };
        let pair = (obj.key(), version.clone());
        // Kept in delivery order: a relist delivering a pair again does not renew it.
        if !self.seen.contains(&pair) {
            self.seen.put(pair, ());
        }
    }

    fn has_seen(&self, key: &ObjectKey, version: &str) -> bool {
        self.seen.contains(&(key.clone(), version.to_string()))
    }
}

/// The objects of one watch, readable from any thread.
#[derive(Debug, Default)]
pub struct ObjectCache {
    entries: RwLock<Entries>,
}

impl ObjectCache {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Entries> {
        self.entries.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Entries> {
        self.entries.write().unwrap_or_else(|p| p.into_inner())
    }

    /// One object, if present.
    pub fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<CachedObject>> {
        self.read()
            .objects
            .get(&(namespace.map(str::to_owned), name.to_owned()))
            .cloned()
    }

    /// Every object matching `filter`.
    pub fn list(&self, filter: impl Fn(&CachedObject) -> bool) -> Vec<Arc<CachedObject>> {
        self.read()
            .objects
            .values()
            .filter(|o| filter(o))
            .cloned()
            .collect()
    }

    /// The objects held (of `namespace` only, if given), as pointers taken under the
    /// read lock: whatever a caller then does with them — a plugin's label selector
    /// over thousands of objects — runs without the lock, so neither the informer's
    /// writes nor other plugins' reads wait for it.
    pub fn snapshot(&self, namespace: Option<&str>) -> Vec<Arc<CachedObject>> {
        let entries = self.read();
        (entries.objects.values())
            .filter(|o| o.is_in(namespace))
            .cloned()
            .collect()
    }

    /// Hands each object of `namespace` (all if none) to `visit` under the read lock,
    /// if the cache holds at most `max` objects (then `true`); holds the lock for
    /// nothing and returns `false` otherwise. A small cache is matched in place, with
    /// no pointer taken but for the objects a caller keeps: taking one for every
    /// object and dropping it again was most of a selection's cost, and the lock is
    /// held for at most `max` objects' matching.
    pub fn visit_if_small(
        &self,
        namespace: Option<&str>,
        max: usize,
        mut visit: impl FnMut(&Arc<CachedObject>),
    ) -> bool {
        let entries = self.read();
        if entries.objects.len() > max {
            return false;
        }
        (entries.objects.values())
            .filter(|o| o.is_in(namespace))
            .for_each(&mut visit);
        true
    }

    /// Number of objects held of `namespace` (all if none), counted under the read
    /// lock without taking pointers: a namespace's count compares one string an
    /// object, all of them none.
    pub fn count_in(&self, namespace: Option<&str>) -> usize {
        let entries = self.read();
        match namespace {
            None => entries.objects.len(),
            Some(_) => (entries.objects.values())
                .filter(|o| o.is_in(namespace))
                .count(),
        }
    }

    /// Number of objects held.
    pub fn len(&self) -> usize {
        self.read().objects.len()
    }

    /// Bytes of JSON held: what the cache costs, within a few percent.
    pub fn bytes(&self) -> usize {
        self.read().bytes
    }

    /// Whether the cache holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stores one object the watch delivered. While a plugin's written copy of it
    /// waits for its own event, the older events before it do not replace it.
    pub fn apply(&self, obj: Arc<CachedObject>) -> Change {
        let mut entries = self.write();
        entries.saw(&obj);
        let key = obj.key();
        let mut before = None;
        if let Some(written) = entries.written.get(&key) {
            let reached = obj.resource_version.as_deref() == Some(written.version.as_str());
            let held = entries.objects.get(&key).cloned();
            if let Some(held) = held
                && !reached
                && written.stored.elapsed() < WRITTEN_COPY_TTL
            {
                return Change::Applied {
                    new: held.clone(),
                    old: Some(held),
                };
            }
            before = entries.written.remove(&key).map(|w| w.delivered);
        }
        let replaced = entries.insert(key, obj.clone());
        Change::Applied {
            new: obj,
            old: before.or(replaced),
        }
    }

    /// Stores a plugin's freshly written copy of a cached object (the API server
    /// returned it before the watch delivered it), without telling subscribers: the
    /// watch event that follows does. Absent objects are left to the watch, and a
    /// version the cache holds or the watch has already delivered is not stored
    /// again; returns whether the copy was stored.
    pub fn refresh(&self, obj: Arc<CachedObject>) -> bool {
        let Some(version) = obj.resource_version.clone() else {
            return false;
        };
        let mut entries = self.write();
        let key = obj.key();
        let Some(cached) = entries.objects.get(&key).cloned() else {
            return false;
        };
        if cached.resource_version.as_deref() == Some(version.as_str())
            || entries.has_seen(&key, &version)
        {
            return false;
        }
        let delivered = match entries.written.remove(&key) {
            Some(earlier) => earlier.delivered,
            None => cached,
        };
        let copy = WrittenCopy {
            version,
            stored: Instant::now(),
            delivered,
        };
        entries.written.insert(key.clone(), copy);
        entries.insert(key, obj);
        true
    }

    /// Removes one object; returns the change if it was present.
    pub fn delete(&self, key: &ObjectKey) -> Option<Change> {
        let mut entries = self.write();
        entries.written.remove(key);
        entries.remove(key).map(Change::Deleted)
    }

    /// Replaces the whole content after a (re)list; returns every object of the new
    /// content as applied (with its previous state) and every vanished one as deleted.
    pub fn replace(&self, fresh: HashMap<ObjectKey, Arc<CachedObject>>) -> Vec<Change> {
        let mut old = {
            let mut entries = self.write();
            entries.written.clear();
            for obj in fresh.values() {
                entries.saw(obj);
            }
            entries.bytes = fresh.values().map(|o| o.json.len()).sum();
            std::mem::replace(&mut entries.objects, fresh.clone())
        };
        let mut changes: Vec<Change> = fresh
            .into_iter()
            .map(|(key, new)| Change::Applied {
                old: old.remove(&key),
                new,
            })
            .collect();
        changes.extend(old.into_values().map(Change::Deleted));
        changes
    }
}

#[cfg(test)]
mod tests;
