//! The objects of one informer it cannot decode: each reported once per version (a
//! warning naming its kind, namespace, name and the cause), counted in
//! `wcm_informer_undecodable_objects`, and forgotten once it decodes again, is
//! deleted, or is no longer listed.
//!
//! What the cache does with one: an object that decoded before keeps its last
//! decodable version (as client-go's cache keeps a whole kind when its list cannot
//! be decoded, but for that object alone), one never decoded is left out; a plugin
//! sees the object stale or absent, and every other object as it is.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use prometheus_client::metrics::gauge::Gauge;

use super::ObjectKey;
use crate::kube::decoded::Undecodable;

/// The undecodable objects of one informer.
#[derive(Debug)]
pub(super) struct Undecodables {
    state: Mutex<State>,
    /// `wcm_informer_undecodable_objects` of the informer.
    gauge: Gauge,
}

#[derive(Debug, Default)]
struct State {
    /// Each undecodable object and the resourceVersion last reported.
    known: HashMap<ObjectKey, Option<String>>,
    /// The keys a (re)list in progress found undecodable.
    listing: Option<HashSet<ObjectKey>>,
}

impl Undecodables {
    /// None yet, counted in `gauge`.
    pub fn new(gauge: Gauge) -> Undecodables {
        Undecodables {
            state: Mutex::new(State::default()),
            gauge,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Notes `object`, of `kind`; logs it once per version. Its key, if it has a name,
    /// and whether this version is new (to report).
    pub fn saw(&self, kind: &str, object: &Undecodable) -> Option<(ObjectKey, bool)> {
        let name = object.meta.name.clone()?;
        let key = (object.meta.namespace.clone(), name);
        let version = object.meta.resource_version.clone();
        let mut state = self.lock();
        if let Some(listing) = &mut state.listing {
            listing.insert(key.clone());
        }
        let previous = state.known.insert(key.clone(), version.clone());
        let new = previous != Some(version);
        if new {
            let (namespace, name) = (key.0.as_deref().unwrap_or(""), &key.1);
            let name = crate::logs::shorten(name);
            tracing::warn!(kind, namespace, name, cause = %object.cause,
                "an object this host cannot decode: left out of the cache (or kept at its \
                 last decodable version); the other objects of its kind are served");
        }
        self.gauge.set(state.known.len() as i64);
        Some((key, new))
    }

    /// The object of `key` decoded, or is gone.
    pub fn forget(&self, key: &ObjectKey) {
        let mut state = self.lock();
        if state.known.remove(key).is_some() {
            self.gauge.set(state.known.len() as i64);
        }
    }

    /// A (re)list begins.
    pub fn listing(&self) {
        self.lock().listing = Some(HashSet::new());
    }

    /// The (re)list ended: objects it did not find undecodable are forgotten.
    pub fn listed(&self) {
        let mut state = self.lock();
        let found = state.listing.take().unwrap_or_default();
        state.known.retain(|key, _| found.contains(key));
        self.gauge.set(state.known.len() as i64);
    }

    /// How many there are.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.lock().known.len()
    }
}

#[cfg(test)]
mod tests {
    use kube::api::ObjectMeta;

    use super::*;

    fn undecodable(name: &str, version: &str) -> Undecodable {
        Undecodable {
            meta: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                resource_version: Some(version.into()),
                ..ObjectMeta::default()
            },
            cause: "recursion limit exceeded".into(),
        }
    }

    #[test]
    fn an_object_is_counted_until_it_decodes_is_deleted_or_is_no_longer_listed() {
        let gauge = Gauge::default();
        let found = Undecodables::new(gauge.clone());
        let (key, new) = (found.saw("v1/ConfigMap", &undecodable("a", "1"))).expect("a key");
        assert!(new);
        let (_, again) = (found.saw("v1/ConfigMap", &undecodable("a", "1"))).expect("a key");
        assert!(!again, "one version is reported once");
        found.saw("v1/ConfigMap", &undecodable("a", "2"));
        found.saw("v1/ConfigMap", &undecodable("b", "1"));
        assert_eq!(gauge.get(), 2);
        found.forget(&key);
        assert_eq!(gauge.get(), 1);
        found.listing();
        found.saw("v1/ConfigMap", &undecodable("c", "1"));
        found.listed();
        assert_eq!((found.len(), gauge.get()), (1, 1), "b was not in the list");
        let nameless = Undecodable {
            meta: ObjectMeta::default(),
            cause: "x".into(),
        };
        assert_eq!(found.saw("v1/ConfigMap", &nameless), None);
    }
}
