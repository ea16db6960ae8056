//! Which Events one plugin published recently, so that a repeat extends the Event's
//! series instead of creating another (events.k8s.io/v1 semantics, as client-go's
//! event recorder folds isomorphic Events).
//!
//! Not kube-runtime's `Recorder`: that one scans its whole cache on every publish to
//! drop old entries, so a burst of N distinct Events costs O(N²) (at 10,000 Pods it
//! was a fifth of the host's CPU; docs/benchmarks.md), and its cache has no bound.
//! This one is an LRU of bounded size whose entries expire when looked up.

use std::num::NonZeroUsize;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use lru::LruCache;
use tokio::time::Instant;

/// How long after an Event was last seen a repeat still extends its series.
pub const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);
/// Distinct Events remembered per plugin; beyond it the least recently seen is
/// forgotten, and a repeat of it becomes a new Event rather than a series.
pub const SERIES_CAPACITY: NonZeroUsize = NonZeroUsize::new(16_384).expect("not zero");

/// The object an Event is about, as far as telling two Events apart goes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ReferenceKey {
    api_version: Option<String>,
    kind: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
    uid: Option<String>,
    field_path: Option<String>,
}

impl From<&ObjectReference> for ReferenceKey {
    fn from(r: &ObjectReference) -> ReferenceKey {
        ReferenceKey {
            api_version: r.api_version.clone(),
            kind: r.kind.clone(),
            namespace: r.namespace.clone(),
            name: r.name.clone(),
            uid: r.uid.clone(),
            field_path: r.field_path.clone(),
        }
    }
}

/// What makes two Events of one reporter the same Event (the note does not).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EventKey {
    /// Whether it is a Warning (else Normal).
    pub warning: bool,
    /// The Event's action.
    pub action: String,
    /// The Event's reason.
    pub reason: String,
    /// The object it is about.
    pub regarding: ReferenceKey,
    /// Its second object, if any.
    pub related: Option<ReferenceKey>,
}

/// An Event as published: its name and how many times it has been seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    /// The Event object's name.
    pub name: String,
    /// How many times it was seen (1 before it has a series).
    pub count: i32,
    /// When its series window closes.
    until: Instant,
}

/// The recently published Events of one reporter.
#[derive(Debug)]
pub struct SeriesCache {
    entries: LruCache<EventKey, Published>,
}

impl Default for SeriesCache {
    fn default() -> Self {
        SeriesCache {
            entries: LruCache::new(SERIES_CAPACITY),
        }
    }
}

impl SeriesCache {
    /// The Event `key` would extend if it is seen at `now`: its name and the count the
    /// series has with this observation. None if it was not seen within the window.
    pub fn repeat_of(&mut self, key: &EventKey, now: Instant) -> Option<(String, i32)> {
        let published = self.entries.get(key)?;
        if published.until <= now {
            self.entries.pop(key);
            return None;
        }
        Some((published.name.clone(), published.count.saturating_add(1)))
    }

    /// Notes that the Event `key` was published (created or extended) as `name`, seen
    /// `count` times, at `now`.
    pub fn published(&mut self, key: EventKey, name: String, count: i32, now: Instant) {
        let until = now + SERIES_WINDOW;
        self.entries.put(key, Published { name, count, until });
    }

    /// Forgets `key` (the API server no longer has its Event).
    pub fn forget(&mut self, key: &EventKey) {
        self.entries.pop(key);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> EventKey {
        let regarding = ObjectReference {
            kind: Some("Pod".into()),
            name: Some(name.into()),
            namespace: Some("ns".into()),
            ..ObjectReference::default()
        };
        EventKey {
            warning: false,
            action: "Count".into(),
            reason: "Counted".into(),
            regarding: (&regarding).into(),
            related: None,
        }
    }

    #[test]
    fn a_repeat_within_the_window_extends_the_series_and_restarts_the_window() {
        let mut cache = SeriesCache::default();
        let t0 = Instant::now();
        assert_eq!(cache.repeat_of(&key("a"), t0), None);
        cache.published(key("a"), "a.1".into(), 1, t0);
        let t1 = t0 + SERIES_WINDOW - Duration::from_secs(1);
        assert_eq!(cache.repeat_of(&key("a"), t1), Some(("a.1".into(), 2)));
        cache.published(key("a"), "a.1".into(), 2, t1);
        // Past the first window, within the second: still the same series.
        let t2 = t0 + SERIES_WINDOW + Duration::from_secs(1);
        assert_eq!(cache.repeat_of(&key("a"), t2), Some(("a.1".into(), 3)));
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn an_event_not_seen_for_the_window_is_forgotten() {
        let mut cache = SeriesCache::default();
        let t0 = Instant::now();
        cache.published(key("a"), "a.1".into(), 1, t0);
        cache.published(key("b"), "b.1".into(), 1, t0 + Duration::from_secs(60));
        let later = t0 + SERIES_WINDOW;
        assert_eq!(cache.repeat_of(&key("a"), later), None);
        assert_eq!(cache.repeat_of(&key("b"), later), Some(("b.1".into(), 2)));
        assert_eq!(
            cache.len(),
            1,
            "the expired entry is dropped when looked up"
        );
    }

    #[test]
    fn other_reasons_or_objects_are_other_events_and_the_note_is_not_part_of_it() {
        let mut cache = SeriesCache::default();
        let now = Instant::now();
        cache.published(key("a"), "a.1".into(), 1, now);
        let mut other_reason = key("a");
        other_reason.reason = "Checked".into();
        assert_eq!(cache.repeat_of(&other_reason, now), None);
        assert_eq!(cache.repeat_of(&key("b"), now), None);
    }

    #[test]
    fn beyond_its_capacity_the_least_recently_seen_are_forgotten() {
        let mut cache = SeriesCache::default();
        let now = Instant::now();
        cache.published(key("first"), "first.1".into(), 1, now);
        cache.published(key("seen again"), "again.1".into(), 1, now);
        let capacity = SERIES_CAPACITY.get();
        for i in 0..capacity - 2 {
            cache.published(key(&i.to_string()), format!("{i}.1"), 1, now);
        }
        assert!(cache.repeat_of(&key("first"), now).is_some(), "still held");
        for i in capacity - 2..capacity {
            cache.published(key(&i.to_string()), format!("{i}.1"), 1, now);
        }
        assert_eq!(cache.len(), capacity);
        assert!(
            cache.repeat_of(&key("first"), now).is_some(),
            "looked up, so kept"
        );
        assert_eq!(
            cache.repeat_of(&key("seen again"), now),
            None,
            "least recent"
        );
        assert_eq!(cache.repeat_of(&key("0"), now), None, "next least recent");
        assert!(cache.repeat_of(&key("1"), now).is_some());
    }

    #[test]
    fn a_forgotten_event_is_created_anew() {
        let mut cache = SeriesCache::default();
        let now = Instant::now();
        cache.published(key("a"), "a.1".into(), 3, now);
        cache.forget(&key("a"));
        assert_eq!(cache.repeat_of(&key("a"), now), None);
    }
}
