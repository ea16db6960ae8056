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
//! - [`WorkQueue::add_after`] schedules a key; a key has at most one pending deadline
//!   and the earlier one wins (a plain `add` is the earliest and replaces it), as in
//!   kube-runtime's scheduler; one timer task per queue serves every deadline;
//! - [`WorkQueue::shut_down`] stops intake and hands out nothing more; keys being
//!   processed finish, and the caller bounds how long it waits for them.

mod delayed;
mod requeue;

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::metrics::QueueMetrics;
use crate::rate::TokenBucket;
use delayed::DelayedKeys;
pub use requeue::Requeue;

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
    /// Wakes the timer task: a new earliest deadline, or the queue is gone. Outside
    /// `Inner` so the sleeping task holds the queue only weakly.
    timer: Arc<Notify>,
    backoff: Backoff,
    /// client-go's work-queue series (depth, adds, retries, durations), if kept.
    metrics: Option<QueueMetrics>,
}

impl<K> Drop for Inner<K> {
    fn drop(&mut self) {
        // The timer task sees the queue gone and ends.
        self.timer.notify_one();
    }
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
    /// Keys waiting for a deadline; never also in `dirty` (an `add` cancels the
    /// deadline, and a key already pending now ignores a later one).
    delayed: DelayedKeys<K>,
    /// Whether the timer task has been started.
    timer_running: bool,
    /// When each pending key was first added since it was last taken.
    added: HashMap<K, Instant>,
    /// When each key being processed was taken, and how long it had waited for it.
    started: HashMap<K, (Instant, Duration)>,
    /// Consecutive failures per key, for backoff.
    failures: HashMap<K, u32>,
    /// The overall retry budget.
    bucket: TokenBucket,
    shutting_down: bool,
}

impl<K: Clone + Eq + Hash + Send + 'static> WorkQueue<K> {
    /// An empty queue with the given retry backoff.
    pub fn new(backoff: Backoff) -> Self {
        Self::build(backoff, None)
    }

    /// An empty queue that keeps client-go's work-queue series in `metrics`: depth
    /// (ready and delayed keys), adds, retries, time queued and time worked.
    pub fn with_metrics(backoff: Backoff, metrics: QueueMetrics) -> Self {
        Self::build(backoff, Some(metrics))
    }

    fn build(backoff: Backoff, metrics: Option<QueueMetrics>) -> Self {
        let state = State {
            ready: VecDeque::new(),
            dirty: HashSet::new(),
            processing: HashSet::new(),
            delayed: DelayedKeys::default(),
            timer_running: false,
            added: HashMap::new(),
            started: HashMap::new(),
            failures: HashMap::new(),
            bucket: TokenBucket::new(backoff.retry_rate, backoff.retry_burst),
            shutting_down: false,
        };
        WorkQueue {
            inner: Arc::new(Inner {
                state: Mutex::new(state),
                ready: Notify::new(),
                closed: Notify::new(),
                timer: Arc::new(Notify::new()),
                backoff,
                metrics,
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

    /// Marks `key` as needing a reconcile now (replacing a later deadline).
    pub fn add(&self, key: K) {
        let mut s = self.state();
        self.add_locked(&mut s, key);
        self.publish_depth(&s);
    }

    fn add_locked(&self, s: &mut State<K>, key: K) {
        if s.shutting_down || !s.dirty.insert(key.clone()) {
            return;
        }
        s.added.insert(key.clone(), Instant::now());
        if let Some(m) = &self.inner.metrics {
            m.adds.inc();
        }
        s.delayed.cancel(&key);
        if !s.processing.contains(&key) {
            s.ready.push_back(key);
            self.inner.ready.notify_one();
        }
    }

    /// Adds `key` after `delay` (immediately if zero), unless it is pending now or
    /// already waits for an earlier deadline. One timer task per queue serves every
    /// deadline and holds the queue weakly: a plugin removed meanwhile frees its queue
    /// at once instead of when its longest backoff (up to 1000 s) runs out.
    pub fn add_after(&self, key: K, delay: Duration) {
        if delay.is_zero() {
            return self.add(key);
        }
        let mut s = self.state();
        if s.shutting_down || s.dirty.contains(&key) {
            return;
        }
        // A delay past the clock's range waits "forever" (a year is as good).
        let now = Instant::now();
        let deadline = now
            .checked_add(delay)
            .unwrap_or_else(|| now + Duration::from_secs(365 * 24 * 3600));
        if s.delayed.schedule(key, deadline) {
            self.wake_timer(&mut s);
        }
        self.publish_depth(&s);
    }

    /// Tells the timer task about a new earliest deadline, starting it on first use.
    fn wake_timer(&self, s: &mut State<K>) {
        if s.timer_running {
            self.inner.timer.notify_one();
            return;
        }
        s.timer_running = true;
        let inner = Arc::downgrade(&self.inner);
        tokio::spawn(run_timer(inner, self.inner.timer.clone()));
    }

    /// Adds every key whose deadline has come; returns the next deadline, or `Err`
    /// once the queue is shut down.
    fn fire_due(&self) -> Result<Option<Instant>, ()> {
        let mut s = self.state();
        if s.shutting_down {
            return Err(());
        }
        for key in s.delayed.take_due(Instant::now()) {
            self.add_locked(&mut s, key);
        }
        self.publish_depth(&s);
        Ok(s.delayed.next_deadline())
    }

    fn publish_depth(&self, s: &State<K>) {
        if let Some(m) = &self.inner.metrics {
            m.depth.set((s.ready.len() + s.delayed.len()) as i64);
        }
    }

    /// Brings `workqueue_unfinished_work_seconds` and
    /// `workqueue_longest_running_processor_seconds` up to now; called whenever a
    /// key is taken or done, and by whoever wants them current between those.
    pub fn refresh_work_gauges(&self) {
        let s = self.state();
        self.publish_work(&s);
    }

    fn publish_work(&self, s: &State<K>) {
        let Some(m) = &self.inner.metrics else {
            return;
        };
        let now = Instant::now();
        let ages = s
            .started
            .values()
            .map(|(at, _)| now.duration_since(*at).as_secs_f64());
        let (sum, longest) = ages.fold((0.0, 0.0f64), |(sum, max), age| (sum + age, max.max(age)));
        m.unfinished.set(sum);
        m.longest.set(longest);
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
            let overall = s.bucket.reserve(Instant::now());
            per_key.max(overall)
        };
        if let Some(m) = &self.inner.metrics {
            m.retries.inc();
        }
        self.add_after(key, delay);
        delay
    }

    /// Ends the backoff of every key that failed: each is added now (a deadline it
    /// waits for is cancelled) and its failure count forgotten.
    pub fn retry_failed_now(&self) {
        let mut s = self.state();
        let failed: Vec<K> = s.failures.drain().map(|(key, _)| key).collect();
        for key in failed {
            self.add_locked(&mut s, key);
        }
        self.publish_depth(&s);
    }

    /// Clears the failure count of `key` after a successful reconcile.
    pub fn forget(&self, key: &K) {
        self.state().failures.remove(key);
    }

    /// Takes the step chosen for `key` (by `requeue::requeue_of`), whose
    /// reconcile returned;
    /// the delay after which it runs again, if it does.
    pub fn settle(&self, key: &K, requeue: Requeue) -> Option<Duration> {
        match requeue {
            Requeue::Forget => {
                self.forget(key);
                None
            }
            Requeue::After(delay) => {
                self.forget(key);
                self.add_after(key.clone(), delay);
                Some(delay)
            }
            Requeue::Retry => Some(self.add_rate_limited(key.clone())),
        }
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
                    self.taken(&mut s, &key);
                    if !s.ready.is_empty() {
                        self.inner.ready.notify_one();
                    }
                    self.publish_depth(&s);
                    return Some(key);
                }
            }
            notified.await;
        }
    }

    /// Records how long `key` waited, and when its work began.
    fn taken(&self, s: &mut State<K>, key: &K) {
        let now = Instant::now();
        let waited = s.added.remove(key).map(|at| now.duration_since(at));
        s.started
            .insert(key.clone(), (now, waited.unwrap_or_default()));
        if let (Some(m), Some(waited)) = (&self.inner.metrics, waited) {
            m.queue_duration.observe(waited.as_secs_f64());
        }
        self.publish_work(s);
    }

    /// How long `key`, which a worker holds now, waited from being added to being
    /// taken (`workqueue_queue_duration_seconds` of that key).
    pub fn waited(&self, key: &K) -> Option<Duration> {
        self.state().started.get(key).map(|(_, waited)| *waited)
    }

    /// Ends the processing of `key`; if it was added meanwhile, it is queued again.
    pub fn done(&self, key: &K) {
        let mut s = self.state();
        s.processing.remove(key);
        if let (Some((at, _)), Some(m)) = (s.started.remove(key), &self.inner.metrics) {
            m.work_duration
                .observe(Instant::now().duration_since(at).as_secs_f64());
        }
        self.publish_work(&s);
        if s.dirty.contains(key) {
            s.ready.push_back(key.clone());
            self.publish_depth(&s);
            drop(s);
            self.inner.ready.notify_one();
        }
    }

    /// Stops intake; every waiting and later `next` gets `None`. Keys being processed
    /// are not interrupted.
    pub fn shut_down(&self) {
        {
            let mut s = self.state();
            s.shutting_down = true;
            s.delayed.clear();
            s.added.clear();
        }
        self.inner.timer.notify_one();
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

    /// Number of keys ready to be processed now.
    pub fn len(&self) -> usize {
        self.state().ready.len()
    }

    /// Whether no key is ready now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of keys waiting for a deadline (`add_after`, backoff).
    pub fn delayed(&self) -> usize {
        self.state().delayed.len()
    }
}

/// The queue's one timer: sleeps until the earliest deadline (or a new earlier one),
/// adds the keys that are due, and ends when the queue shuts down or is dropped.
/// Between wake-ups it holds the queue only weakly.
async fn run_timer<K: Clone + Eq + Hash + Send + 'static>(
    inner: Weak<Inner<K>>,
    wake: Arc<Notify>,
) {
    loop {
        let next = {
            let Some(inner) = inner.upgrade() else {
                return;
            };
            match (WorkQueue { inner }).fire_due() {
                Ok(next) => next,
                Err(()) => return,
            }
        };
        match next {
            Some(at) => {
                tokio::select! {
                    () = tokio::time::sleep_until(at) => {}
                    () = wake.notified() => {}
                }
            }
            None => wake.notified().await,
        }
    }
}

#[cfg(test)]
mod tests;
