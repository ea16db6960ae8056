//! client-go's Event spam filter: a token bucket per (reporting plugin, object), so
//! a plugin that records thousands of Events about one object reaches the API server
//! with a few dozen writes and the rest are dropped and counted.
//!
//! The numbers are client-go's (`EventSourceObjectSpamFilter`): a burst of 25 Events
//! per object, then one more every five minutes; the buckets of the 4,096 objects
//! seen last are kept (an evicted object starts again with a full bucket, which the
//! plugin's API budget still bounds).

use std::num::NonZeroUsize;
use std::sync::Mutex;
use std::time::Duration;

use lru::LruCache;
use tokio::time::Instant;

use crate::rate::TokenBucket;

/// Events allowed about one object before the refill rate applies.
pub const EVENT_BURST: u32 = 25;
/// One more Event per object is allowed every this long.
pub const EVENT_REFILL: Duration = Duration::from_secs(300);
/// Objects whose buckets are remembered.
const OBJECTS_REMEMBERED: NonZeroUsize = NonZeroUsize::new(4096).expect("not zero");

/// What identifies the object an Event is about: kind, namespace, name, uid.
pub type EventObject = (String, Option<String>, String, Option<String>);

/// The spam filter of one plugin.
#[derive(Debug)]
pub struct SpamFilter {
    buckets: Mutex<LruCache<EventObject, TokenBucket>>,
}

impl Default for SpamFilter {
    fn default() -> Self {
        SpamFilter {
            buckets: Mutex::new(LruCache::new(OBJECTS_REMEMBERED)),
        }
    }
}

impl SpamFilter {
    /// Whether one more Event about `object` may be written now.
    pub fn allow(&self, object: &EventObject) -> bool {
        let now = Instant::now();
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let bucket = buckets.get_or_insert_mut(object.clone(), || {
            TokenBucket::new(1.0 / EVENT_REFILL.as_secs_f64(), EVENT_BURST)
        });
        bucket.try_take(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str) -> EventObject {
        ("v1/Pod".into(), Some("ns".into()), name.into(), None)
    }

    #[tokio::test(start_paused = true)]
    async fn two_thousand_events_about_one_object_let_25_through() {
        let filter = SpamFilter::default();
        let allowed = (0..2000).filter(|_| filter.allow(&pod("a"))).count();
        assert_eq!(allowed, EVENT_BURST as usize);
        assert!(
            filter.allow(&pod("b")),
            "other objects have their own bucket"
        );
        tokio::time::advance(EVENT_REFILL).await;
        assert!(filter.allow(&pod("a")), "one more after five minutes");
        assert!(!filter.allow(&pod("a")));
    }
}
