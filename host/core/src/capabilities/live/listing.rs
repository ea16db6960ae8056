//! What one `list`, `list-first` or `count` reads: the plugin's readable caches of a
//! kind, and which of their objects match the namespace and label selector.
//!
//! The selector is the plugin's and each object is matched against all its terms, so
//! the work grows with the selector as well as the cache. A cache of up to 4,096
//! objects is matched in place under its read lock (a few hundred microseconds at
//! most; only the objects kept are pointed to). A larger one is matched on a snapshot
//! of pointers taken under the read lock (a few nanoseconds an object, whatever the
//! selector), never under the lock the informer writes with and other plugins read
//! with, and in slices that give the thread back, so a large cache holds no worker
//! thread for long and the call's deadline can stop it. A count without a selector is
//! the cache's length.

use std::sync::Arc;

use kube::core::{Selector, SelectorExt};

use crate::kube::cache::CachedObject;
use crate::kube::informer::Informer;

/// Objects matched between two yields of the thread.
const SLICE: usize = 1024;

/// Caches of at most this many objects are matched in place under their read lock
/// (a few hundred microseconds at most), larger ones on a snapshot.
const IN_PLACE: usize = 4096;

/// One listing over the caches a plugin may read.
pub(super) struct Listing<'a> {
    /// The readable caches of the kind (several when two watches hold it).
    pub caches: Vec<&'a Arc<Informer>>,
    /// Only objects of this namespace, if any.
    pub namespace: Option<&'a str>,
    /// Only objects whose labels match.
    pub selector: &'a Selector,
}

impl Listing<'_> {
    /// The wanted objects by namespace and name: all, or the first `limit`.
    pub async fn first(&self, limit: Option<usize>) -> Vec<Arc<CachedObject>> {
        let mut found = self.wanted().await;
        first_by_key(&mut found, limit);
        found
    }

    /// How many objects are wanted; from one cache, counted without keeping them, and
    /// without matching when the selector selects all (a recount per event of a
    /// burst is then a length, not a pass over the cache).
    pub async fn count(&self) -> usize {
        match self.caches.as_slice() {
            [one] if self.selector.selects_all() => one.cache().count_in(self.namespace),
            [one] => {
                let mut count = 0;
                self.each_wanted(one, |_| count += 1).await;
                count
            }
            _ => self.wanted().await.len(),
        }
    }

    /// The wanted objects of every cache, each once (two watches may hold the same
    /// object), in no particular order.
    async fn wanted(&self) -> Vec<Arc<CachedObject>> {
        let mut found = Vec::new();
        for informer in &self.caches {
            self.each_wanted(informer, |o| found.push(o.clone())).await;
        }
        if self.caches.len() > 1 {
            found.sort_unstable_by(|a, b| by_key(a, b));
            found.dedup_by(|a, b| by_key(a, b).is_eq());
        }
        found
    }

    /// Hands every wanted object of `informer`'s cache to `take`: matched in place
    /// for a small cache, else on a snapshot, a slice at a time, giving the thread
    /// back between slices.
    async fn each_wanted(&self, informer: &Informer, mut take: impl FnMut(&Arc<CachedObject>)) {
        let cache = informer.cache();
        let matched = |o: &Arc<CachedObject>| {
            if self.selector.matches(&o.labels) {
                take(o)
            }
        };
        if cache.visit_if_small(self.namespace, IN_PLACE, matched) {
            return;
        }
        let objects = cache.snapshot(self.namespace);
        for (i, slice) in objects.chunks(SLICE).enumerate() {
            if i > 0 {
                tokio::task::yield_now().await;
            }
            slice
                .iter()
                .filter(|o| self.selector.matches(&o.labels))
                .for_each(&mut take);
        }
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
