//! The work queue of a test run, in virtual time: keys a change queues run at once,
//! in the order they were queued, each once however often it was queued; a
//! `requeue-after`, a retry after a failure and a resync wait on a virtual clock that
//! jumps to the next of them when nothing is ready, so ten minutes of a plugin's life
//! take as long as its reconciles. The same step follows each reconcile as on the
//! host's queue ([`wcm_core::requeue::requeue_of`]), with the host's per-key backoff; the
//! host's overall retry budget (ten a second after a burst of a hundred) is not
//! modelled, as a test has few keys.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;

use wcm_core::keys::ReconcileKey;
use wcm_core::queue::{Backoff, Requeue};

/// What the queue hands out next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// A key to reconcile now.
    Key(ReconcileKey),
    /// The resync period has passed: every watched object's key is to be queued.
    Resync,
}

/// Keys waiting, now or at a virtual time.
#[derive(Debug, Default)]
pub struct VirtualQueue {
    /// Virtual time since the run started.
    now: Duration,
    ready: VecDeque<ReconcileKey>,
    waiting: HashSet<ReconcileKey>,
    /// At most one deadline per key, the earlier winning, each with the order it
    /// was set in (of two keys due at once, the first set runs first).
    deadlines: HashMap<ReconcileKey, (Duration, u64)>,
    set: u64,
    failures: HashMap<ReconcileKey, u32>,
    /// The keys whose deadline is a retry after a failure (not a `requeue-after`).
    retrying: HashSet<ReconcileKey>,
    backoff: Backoff,
    /// The resync period and when the next resync is due.
    resync: Option<(Duration, Duration)>,
}

impl VirtualQueue {
    /// An empty queue at time zero, resyncing every `resync` if the plugin asked.
    pub fn new(resync: Option<Duration>) -> VirtualQueue {
        let resync = resync.filter(|p| !p.is_zero()).map(|p| (p, p));
        VirtualQueue {
            resync,
            ..VirtualQueue::default()
        }
    }

    /// Virtual time since the run started.
    pub fn now(&self) -> Duration {
        self.now
    }

    /// Whether a key is ready to run now.
    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// Queues `keys` to run now; a key already waiting is not queued twice, and a
    /// deadline it had is dropped (running now is the earliest).
    pub fn add(&mut self, keys: impl IntoIterator<Item = ReconcileKey>) {
        for key in keys {
            self.deadlines.remove(&key);
            self.retrying.remove(&key);
            if self.waiting.insert(key.clone()) {
                self.ready.push_back(key);
            }
        }
    }

    /// Takes the step a reconcile of `key` chose; when it runs again, if it does.
    pub fn settle(&mut self, key: &ReconcileKey, requeue: Requeue) -> Option<Duration> {
        self.retrying.remove(key);
        let delay = match requeue {
            Requeue::Forget => {
                self.failures.remove(key);
                return None;
            }
            Requeue::After(delay) => {
                self.failures.remove(key);
                delay
            }
            Requeue::Retry => {
                self.retrying.insert(key.clone());
                let failures = self.failures.entry(key.clone()).or_insert(0);
                let delay = self.backoff.delay(*failures);
                *failures = failures.saturating_add(1);
                delay
            }
        };
        let at = self.now.saturating_add(delay);
        if !self.waiting.contains(key) {
            self.set += 1;
            let deadline = self.deadlines.entry(key.clone()).or_insert((at, self.set));
            *deadline = (*deadline).min((at, self.set));
        }
        Some(at)
    }

    /// Drops `key`: it is not run again unless queued anew.
    pub fn drop_key(&mut self, key: &ReconcileKey) {
        self.deadlines.remove(key);
        self.failures.remove(key);
        self.retrying.remove(key);
    }

    /// When the earliest retry after a failure is due, if one is scheduled.
    pub fn earliest_retry(&self) -> Option<Duration> {
        (self.retrying.iter())
            .filter_map(|key| self.deadlines.get(key).map(|(at, _)| *at))
            .min()
    }

    /// The next key ready now; else, if one is due by `until`, the clock moves to
    /// the earliest deadline (a resync first at a tie) and hands that out. `None`
    /// when nothing is due by then.
    pub fn next(&mut self, until: Duration) -> Option<Next> {
        if let Some(key) = self.ready.pop_front() {
            self.waiting.remove(&key);
            return Some(Next::Key(key));
        }
        let earliest = self.deadlines.iter().min_by_key(|(_, due)| **due);
        let key_at = earliest.map(|(key, (at, _))| (key.clone(), *at));
        let resync_at = self.resync.map(|(_, at)| at);
        let key_due = key_at.as_ref().map(|(_, at)| *at);
        match (key_at, resync_at) {
            (_, Some(at)) if at <= until && key_due.is_none_or(|k| at <= k) => {
                self.now = at;
                self.resync = self.resync.map(|(period, at)| (period, at + period));
                Some(Next::Resync)
            }
            (Some((key, at)), _) if at <= until => {
                self.now = self.now.max(at);
                self.deadlines.remove(&key);
                self.retrying.remove(&key);
                Some(Next::Key(key))
            }
            _ => None,
        }
    }

    /// Forgets every key, scheduled or ready, and every failure: the host started
    /// again. The clock and the resync schedule go on.
    pub fn restart(&mut self) {
        self.ready.clear();
        self.waiting.clear();
        self.deadlines.clear();
        self.failures.clear();
        self.retrying.clear();
    }

    /// Moves the clock to `time` if it is behind it: time that passed with
    /// nothing due.
    pub fn advance_to(&mut self, time: Duration) {
        self.now = self.now.max(time);
    }

    /// The keys still scheduled, with when each would run.
    pub fn scheduled(&self) -> Vec<(ReconcileKey, Duration)> {
        let mut keys: Vec<_> = self.deadlines.iter().collect();
        keys.sort_by_key(|(_, due)| **due);
        keys.into_iter()
            .map(|(k, (at, _))| (k.clone(), *at))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ReconcileKey {
        ReconcileKey::fixed(name)
    }

    const FOR: Duration = Duration::from_secs(600);

    #[test]
    fn ready_keys_run_first_in_order_and_once() {
        let mut q = VirtualQueue::new(None);
        q.add([key("a"), key("b"), key("a")]);
        assert_eq!(q.next(FOR), Some(Next::Key(key("a"))));
        assert_eq!(q.next(FOR), Some(Next::Key(key("b"))));
        assert_eq!(q.next(FOR), None);
        assert_eq!(q.now(), Duration::ZERO);
    }

    #[test]
    fn a_requeue_after_waits_on_the_virtual_clock_unless_a_change_comes_first() {
        let mut q = VirtualQueue::new(None);
        let at = q.settle(&key("a"), Requeue::After(Duration::from_secs(30)));
        assert_eq!(at, Some(Duration::from_secs(30)));
        assert_eq!(q.next(Duration::from_secs(10)), None, "not due by then");
        assert_eq!(q.next(FOR), Some(Next::Key(key("a"))));
        assert_eq!(q.now(), Duration::from_secs(30));
        q.settle(&key("a"), Requeue::After(Duration::from_secs(30)));
        q.add([key("a")]);
        assert_eq!(q.next(FOR), Some(Next::Key(key("a"))));
        assert_eq!(
            q.now(),
            Duration::from_secs(30),
            "the change ran it at once"
        );
        assert_eq!(q.next(FOR), None, "and its deadline went with it");
    }

    #[test]
    fn failures_back_off_as_the_hosts_queue_does_and_a_success_forgets() {
        let mut q = VirtualQueue::new(None);
        let base = Backoff::default().base;
        for failures in 0..4 {
            let at = q.settle(&key("a"), Requeue::Retry).expect("retried");
            assert_eq!(at - q.now(), base * 2u32.pow(failures));
            assert_eq!(q.next(FOR), Some(Next::Key(key("a"))));
        }
        assert_eq!(q.settle(&key("a"), Requeue::Forget), None);
        let at = q.settle(&key("a"), Requeue::Retry).expect("retried");
        assert_eq!(at - q.now(), base, "the backoff starts over");
    }

    #[test]
    fn a_retry_after_a_failure_is_told_from_a_requeue_after() {
        let mut q = VirtualQueue::new(None);
        q.settle(&key("a"), Requeue::After(Duration::from_secs(60)));
        assert_eq!(q.earliest_retry(), None, "a requeue-after is no retry");
        q.settle(&key("b"), Requeue::Retry);
        assert_eq!(q.earliest_retry(), Some(Backoff::default().base));
        assert_eq!(q.next(FOR), Some(Next::Key(key("b"))));
        assert_eq!(q.earliest_retry(), None, "taken");
    }

    #[test]
    fn resyncs_come_every_period_until_the_time_is_up() {
        let mut q = VirtualQueue::new(Some(Duration::from_secs(300)));
        assert_eq!(q.next(FOR), Some(Next::Resync));
        assert_eq!(q.now(), Duration::from_secs(300));
        assert_eq!(q.next(FOR), Some(Next::Resync));
        assert_eq!(q.next(FOR), None, "the next one is after ten minutes");
    }
}
