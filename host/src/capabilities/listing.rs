//! What one `list`, `list-first` or `count` reads: the plugin's readable caches of a
//! kind, and which of their objects match the namespace and label selector.

use std::sync::Arc;

use kube::core::{Selector, SelectorExt};

use crate::kube::cache::CachedObject;
use crate::kube::informer::Informer;

/// One listing over the caches a plugin may read.
pub(super) struct Listing<'a> {
    /// What it names in errors (`v1/Pod in shop`).
    pub what: String,
    /// The readable caches of the kind (several when two watches hold it).
    pub caches: Vec<&'a Arc<Informer>>,
    /// Only objects of this namespace, if any.
    pub namespace: Option<&'a str>,
    /// Only objects whose labels match.
    pub selector: Selector,
}

impl Listing<'_> {
    fn wants(&self, o: &CachedObject) -> bool {
        self.namespace
            .is_none_or(|ns| o.namespace.as_deref() == Some(ns))
            && self.selector.matches(&o.labels)
    }

    /// The wanted objects by namespace and name: all, or the first `limit`. From one
    /// cache, they are selected by reference under its read lock and only those kept
    /// are cloned.
    pub fn first(&self, limit: Option<usize>) -> Vec<Arc<CachedObject>> {
        match self.caches.as_slice() {
            [one] => one.cache().with_objects(|objects| {
                let mut found: Vec<&Arc<CachedObject>> =
                    objects.filter(|o| self.wants(o)).collect();
                first_by_key(&mut found, limit);
                found.into_iter().cloned().collect()
            }),
            _ => {
                let mut found = self.merged();
                first_by_key(&mut found, limit);
                found
            }
        }
    }

    /// How many objects are wanted, cloning none from a single cache.
    pub fn count(&self) -> usize {
        match self.caches.as_slice() {
            [one] => {
                (one.cache()).with_objects(|objects| objects.filter(|o| self.wants(o)).count())
            }
            _ => self.merged().len(),
        }
    }

    /// The wanted objects of several caches, each once (two watches may hold the same
    /// object), by namespace and name.
    fn merged(&self) -> Vec<Arc<CachedObject>> {
        let mut found: Vec<Arc<CachedObject>> = (self.caches.iter())
            .flat_map(|informer| informer.cache().list(|o| self.wants(o)))
            .collect();
        found.sort_unstable_by(|a, b| by_key(a, b));
        found.dedup_by(|a, b| by_key(a, b).is_eq());
        found
    }
}

/// Orders cached objects by namespace, then name.
fn by_key(a: &CachedObject, b: &CachedObject) -> std::cmp::Ordering {
    (a.namespace.as_deref(), a.name.as_str()).cmp(&(b.namespace.as_deref(), b.name.as_str()))
}

/// Keeps the first `limit` of `objects` by namespace and name (all if none), sorted:
/// a batch of a few out of thousands is selected, not the thousands sorted.
fn first_by_key<T: AsRef<CachedObject>>(objects: &mut Vec<T>, limit: Option<usize>) {
    let order = |a: &T, b: &T| by_key(a.as_ref(), b.as_ref());
    if let Some(limit) = limit.filter(|&l| l < objects.len()) {
        if limit == 0 {
            objects.clear();
            return;
        }
        objects.select_nth_unstable_by(limit - 1, order);
        objects.truncate(limit);
    }
    objects.sort_unstable_by(order);
}

#[cfg(test)]
mod tests {
    use kube::api::{ApiResource, DynamicObject};

    use super::*;

    fn pods(names: &[(&str, &str)]) -> Vec<Arc<CachedObject>> {
        let resource = ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&());
        let pod = |(ns, name): &(&str, &str)| {
            let obj = DynamicObject::new(name, &resource).within(ns);
            Arc::new(CachedObject::from_dynamic(obj).expect("serialisable"))
        };
        names.iter().map(pod).collect()
    }

    fn keys(objects: &[Arc<CachedObject>]) -> Vec<String> {
        let key =
            |o: &Arc<CachedObject>| format!("{}/{}", o.namespace.as_deref().unwrap_or(""), o.name);
        objects.iter().map(key).collect()
    }

    const UNSORTED: [(&str, &str); 5] = [
        ("b", "p1"),
        ("a", "p9"),
        ("a", "p10"),
        ("c", "p0"),
        ("a", "p2"),
    ];

    #[test]
    fn the_first_few_are_the_smallest_keys_in_order() {
        let mut objects = pods(&UNSORTED);
        first_by_key(&mut objects, Some(3));
        assert_eq!(keys(&objects), ["a/p10", "a/p2", "a/p9"]);
    }

    #[test]
    fn no_limit_or_a_large_one_sorts_all_and_zero_keeps_none() {
        let all = ["a/p10", "a/p2", "a/p9", "b/p1", "c/p0"];
        for limit in [None, Some(5), Some(1_000)] {
            let mut objects = pods(&UNSORTED);
            first_by_key(&mut objects, limit);
            assert_eq!(keys(&objects), all, "{limit:?}");
        }
        let mut objects = pods(&UNSORTED);
        first_by_key(&mut objects, Some(0));
        assert!(objects.is_empty());
    }
}
