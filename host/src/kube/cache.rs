//! The informer cache: every object of one watch, held once as ready-made JSON.
//!
//! Objects are stored with `metadata.managedFields` removed (it is ~40 % of a typical
//! object and no controller reads it) and serialised once, so a plugin's `get` is a
//! copy of bytes, not a re-serialisation. A relist builds a new map on the side and
//! swaps it in whole, so readers never see a half-rebuilt cache.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::DynamicObject;

/// Namespace (none for cluster-scoped) and name of a cached object.
pub type ObjectKey = (Option<String>, String);

/// One object as the cache holds it.
#[derive(Debug)]
pub struct CachedObject {
    /// The object's namespace; none if cluster-scoped.
    pub namespace: Option<String>,
    /// The object's name.
    pub name: String,
    /// The object's uid, for Event references.
    pub uid: Option<String>,
    /// The resource version it was stored with, to tell newer from older copies.
    pub resource_version: Option<String>,
    /// Labels, for selector matching on `list`.
    pub labels: BTreeMap<String, String>,
    /// Owner references, for owner key mapping.
    pub owners: Vec<OwnerReference>,
    /// The whole object as JSON, without managedFields.
    pub json: Arc<str>,
}

impl CachedObject {
    /// Converts a watched object; fails only if it cannot be serialised.
    pub fn from_dynamic(mut obj: DynamicObject) -> Result<CachedObject, serde_json::Error> {
        obj.metadata.managed_fields = None;
        let json: Arc<str> = serde_json::to_string(&obj)?.into();
        let meta = obj.metadata;
        Ok(CachedObject {
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
}

/// The objects of one watch, readable from any thread.
#[derive(Debug, Default)]
pub struct ObjectCache {
    objects: RwLock<HashMap<ObjectKey, Arc<CachedObject>>>,
}

/// What changed in the cache, for delivery to subscribers.
#[derive(Debug, Clone)]
pub enum Change {
    /// The object was added or modified.
    Applied(Arc<CachedObject>),
    /// The object is gone; this is its last known state.
    Deleted(Arc<CachedObject>),
}

impl ObjectCache {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<ObjectKey, Arc<CachedObject>>> {
        self.objects.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<ObjectKey, Arc<CachedObject>>> {
        self.objects.write().unwrap_or_else(|p| p.into_inner())
    }

    /// One object, if present.
    pub fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<CachedObject>> {
        self.read()
            .get(&(namespace.map(str::to_owned), name.to_owned()))
            .cloned()
    }

    /// Every object matching `filter`.
    pub fn list(&self, filter: impl Fn(&CachedObject) -> bool) -> Vec<Arc<CachedObject>> {
        self.read()
            .values()
            .filter(|o| filter(o))
            .cloned()
            .collect()
    }

    /// Number of objects held.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether the cache holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Inserts or replaces one object.
    pub fn apply(&self, obj: Arc<CachedObject>) -> Change {
        self.write().insert(obj.key(), obj.clone());
        Change::Applied(obj)
    }

    /// Replaces a cached object by a newer copy (a plugin's own write, returned by the
    /// API server before the watch delivers it), without telling subscribers: the
    /// watch event that follows does. Absent objects and copies that are not newer
    /// by resource version are left alone; returns whether the copy was stored.
    pub fn refresh(&self, obj: Arc<CachedObject>) -> bool {
        let mut objects = self.write();
        let Some(cached) = objects.get(&obj.key()) else {
            return false;
        };
        let version = |o: &CachedObject| o.resource_version.as_deref()?.parse::<u64>().ok();
        match (version(cached), version(&obj)) {
            (Some(old), Some(new)) if new > old => {
                objects.insert(obj.key(), obj);
                true
            }
            _ => false,
        }
    }

    /// Removes one object; returns the change if it was present.
    pub fn delete(&self, key: &ObjectKey) -> Option<Change> {
        self.write().remove(key).map(Change::Deleted)
    }

    /// Replaces the whole content after a (re)list; returns every object of the new
    /// content as applied and every vanished one as deleted.
    pub fn replace(&self, fresh: HashMap<ObjectKey, Arc<CachedObject>>) -> Vec<Change> {
        let old = std::mem::replace(&mut *self.write(), fresh.clone());
        let gone: Vec<Change> = old
            .into_iter()
            .filter(|(k, _)| !fresh.contains_key(k))
            .map(|(_, o)| Change::Deleted(o))
            .collect();
        fresh
            .into_values()
            .map(Change::Applied)
            .chain(gone)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(name: &str) -> Arc<CachedObject> {
        pod_at(name, "7")
    }

    fn pod_at(name: &str, version: &str) -> Arc<CachedObject> {
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "labels": {"app": "web"},
                         "resourceVersion": version,
                         "managedFields": [{"manager": "kubectl", "operation": "Apply"}]},
            "spec": {"containers": []},
        }))
        .expect("pod json");
        Arc::new(CachedObject::from_dynamic(obj).expect("serialise"))
    }

    #[test]
    fn cached_json_has_no_managed_fields() {
        let p = pod("a");
        assert!(!p.json.contains("managedFields"), "{}", p.json);
        assert!(p.json.contains("\"app\":\"web\""), "{}", p.json);
        assert_eq!(p.key(), (Some("ns".to_string()), "a".to_string()));
    }

    #[test]
    fn a_refresh_stores_only_newer_copies_of_cached_objects() {
        let cache = ObjectCache::default();
        assert!(
            !cache.refresh(pod_at("a", "9")),
            "absent objects come from the watch"
        );
        cache.apply(pod_at("a", "10"));
        assert!(
            !cache.refresh(pod_at("a", "9")),
            "an older copy must not win"
        );
        assert!(cache.refresh(pod_at("a", "11")));
        let stored = cache.get(Some("ns"), "a").expect("cached");
        assert_eq!(stored.resource_version.as_deref(), Some("11"));
    }

    #[test]
    fn a_relist_swaps_the_content_and_reports_what_vanished() {
        let cache = ObjectCache::default();
        cache.apply(pod("a"));
        cache.apply(pod("b"));
        let fresh = HashMap::from([(pod("b").key(), pod("b")), (pod("c").key(), pod("c"))]);
        let changes = cache.replace(fresh);
        let deleted: Vec<_> = changes
            .iter()
            .filter_map(|c| match c {
                Change::Deleted(o) => Some(o.name.as_str()),
                Change::Applied(_) => None,
            })
            .collect();
        assert_eq!(deleted, ["a"]);
        assert_eq!(changes.len(), 3);
        assert!(cache.get(Some("ns"), "a").is_none());
        assert!(cache.get(Some("ns"), "c").is_some());
    }
}
