//! The per-plugin work queue of reconcile keys, with client-go's work queue contract.
//!
//! Written here rather than taken from kube-runtime: its scheduler and runner are
//! private to its `Controller`, keyed on typed object references, and cannot be fed
//! keys from several dynamic informers nor drained on a plugin's removal. The contract:
//!
//! - a key is never handed to two workers at once ([`WorkQueue::next`] / [`WorkQueue::done`]);
//! - adding a key many times before it is processed processes it once;
//! - adding a key while it is processed processes it exactly once more, afterwards;
//! - [`WorkQueue::add_rate_limited`] delays a failing key with per-key exponential
//!   backoff, which [`WorkQueue::forget`] resets after a success, and by an overall
//!   token bucket on retries (the larger delay wins, as in client-go's default
//!   controller rate limiter);
//! - [`WorkQueue::add_after`] schedules a key; an earlier `add` still runs it earlier;
//! - [`WorkQueue::shut_down`] stops intake and hands out nothing more; keys being
//!   processed finish, and the caller bounds how long it waits for them.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// How failed reconciles are retried (client-go's defaults).
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    /// Per-key delay after the first failure.
    pub base: Duration,
    /// Upper bound of the per-key delay.
    pub max: Duration,
    /// Retries per second allowed over all keys, in the long run.
    pub retry_rate: f64,
    /// Retries allowed in a burst before `retry_rate` applies.
    pub retry_burst: u32,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            base: Duration::from_millis(5),
            max: Duration::from_secs(1000),
            retry_rate: 10.0,
            retry_burst: 100,
        }
    }
}

impl Backoff {
    /// The delay after `failures` earlier consecutive failures: base × 2^failures, capped.
    pub fn delay(&self, failures: u32) -> Duration {
        let factor = 2u32.saturating_pow(failures.min(31));
        self.base.saturating_mul(factor).min(self.max)
    }
}

/// A queue of keys for one plugin's workers. Cheap to clone; clones share the queue.
#[derive(Debug)]
pub struct WorkQueue<K> {
    inner: Arc<Inner<K>>,
}

impl<K> Clone for WorkQueue<K> {
    fn clone(&self) -> Self {
        WorkQueue {
            inner: self.inner.clone(),
        }
    }
}

#[derive(Debug)]
struct Inner<K> {
    state: Mutex<State<K>>,
    /// Wakes workers waiting in `next` when a key becomes ready or on shutdown.
    ready: Notify,
    /// Wakes everyone waiting in `closed` on shutdown (kept apart from `ready`, whose
    /// single wake-ups are meant for workers taking keys).
    closed: Notify,
    backoff: Backoff,
}

#[derive(Debug)]
struct State<K> {
    /// Keys ready to be handed out, in arrival order.
    ready: VecDeque<K>,
    /// Keys that need processing: in `ready`, or to be re-queued when their current
    /// processing ends. Its membership test is what collapses repeated adds.
    dirty: HashSet<K>,
    /// Keys a worker holds right now.
    processing: HashSet<K>,
    /// Consecutive failures per key, for backoff.
    failures: HashMap<K, u32>,
    /// The overall retry budget.
    bucket: TokenBucket,
    shutting_down: bool,
}

/// A token bucket that hands out reservations: when empty, a retry is not refused but
/// scheduled for when its token will have been refilled.
#[derive(Debug)]
struct TokenBucket {
    /// Tokens available now; negative when future tokens are already reserved.
    tokens: f64,
    /// When `tokens` was last brought up to date.
    updated: Instant,
}

impl TokenBucket {
    /// Reserves one token; returns how long to wait until it exists.
    fn reserve(&mut self, rate: f64, burst: u32, now: Instant) -> Duration {
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        self.tokens = (self.tokens + elapsed * rate).min(f64::from(burst));
        self.updated = now;
        self.tokens -= 1.0;
        if self.tokens >= 0.0 || rate <= 0.0 {
            return Duration::ZERO;
        }
        Duration::from_secs_f64(-self.tokens / rate)
    }
}

impl<K: Clone + Eq + Hash + Send + 'static> WorkQueue<K> {
    /// An empty queue with the given retry backoff.
    pub fn new(backoff: Backoff) -> Self {
        let state = State {
            ready: VecDeque::new(),
            dirty: HashSet::new(),
            processing: HashSet::new(),
            failures: HashMap::new(),
            bucket: TokenBucket {
                tokens: f64::from(backoff.retry_burst),
                updated: Instant::now(),
            },
            shutting_down: false,
        };
        WorkQueue {
            inner: Arc::new(Inner {
                state: Mutex::new(state),
                ready: Notify::new(),
                closed: Notify::new(),
                backoff,
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State<K>> {
        // A panic while holding this lock cannot leave the sets inconsistent in a way
        // that matters more than stopping the host, so poisoning is ignored.
        self.inner
            .state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Marks `key` as needing a reconcile now.
    pub fn add(&self, key: K) {
        let mut s = self.state();
        if s.shutting_down || !s.dirty.insert(key.clone()) {
            return;
        }
        if !s.processing.contains(&key) {
            s.ready.push_back(key);
            drop(s);
            self.inner.ready.notify_one();
        }
    }

    /// Adds `key` after `delay` (immediately if zero). The pending timer holds the
    /// queue weakly: a plugin removed meanwhile frees its queue at once instead of
    /// when its longest backoff (up to 1000 s) runs out.
    pub fn add_after(&self, key: K, delay: Duration) {
        if delay.is_zero() {
            return self.add(key);
        }
        if self.state().shutting_down {
            return;
        }
        let inner = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            if let Some(inner) = inner.upgrade() {
                WorkQueue { inner }.add(key);
            }
        });
    }

    /// Re-adds a key whose reconcile failed, after the longer of its own backoff and
    /// the overall retry budget's wait; returns that delay.
    pub fn add_rate_limited(&self, key: K) -> Duration {
        let backoff = &self.inner.backoff;
        let delay = {
            let mut s = self.state();
            let failures = s.failures.entry(key.clone()).or_insert(0);
            let per_key = backoff.delay(*failures);
            *failures = failures.saturating_add(1);
            let now = Instant::now();
            let overall = s
                .bucket
                .reserve(backoff.retry_rate, backoff.retry_burst, now);
            per_key.max(overall)
        };
        self.add_after(key, delay);
        delay
    }

    /// Clears the failure count of `key` after a successful reconcile.
    pub fn forget(&self, key: &K) {
        self.state().failures.remove(key);
    }

    /// Waits for the next ready key and marks it as processing. `None` once the queue
    /// is shut down.
    pub async fn next(&self) -> Option<K> {
        loop {
            let notified = self.inner.ready.notified();
            {
                let mut s = self.state();
                if s.shutting_down {
                    self.inner.ready.notify_one();
                    return None;
                }
                if let Some(key) = s.ready.pop_front() {
                    s.dirty.remove(&key);
                    s.processing.insert(key.clone());
                    if !s.ready.is_empty() {
                        self.inner.ready.notify_one();
                    }
                    return Some(key);
                }
            }
            notified.await;
        }
    }

    /// Ends the processing of `key`; if it was added meanwhile, it is queued again.
    pub fn done(&self, key: &K) {
        let mut s = self.state();
        s.processing.remove(key);
        if s.dirty.contains(key) {
            s.ready.push_back(key.clone());
            drop(s);
            self.inner.ready.notify_one();
        }
    }

    /// Stops intake; every waiting and later `next` gets `None`. Keys being processed
    /// are not interrupted.
    pub fn shut_down(&self) {
        self.state().shutting_down = true;
        self.inner.ready.notify_waiters();
        self.inner.ready.notify_one();
        self.inner.closed.notify_waiters();
    }

    /// Resolves once the queue is shut down: for a worker that waits for something
    /// else before it asks for a key.
    pub async fn closed(&self) {
        let notified = self.inner.closed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if self.is_shut_down() {
            return;
        }
        notified.await;
    }

    /// Whether [`WorkQueue::shut_down`] was called.
    pub fn is_shut_down(&self) -> bool {
        self.state().shutting_down
    }

    /// Number of keys waiting to be processed.
    pub fn len(&self) -> usize {
        self.state().ready.len()
    }

    /// Whether no key is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests;
