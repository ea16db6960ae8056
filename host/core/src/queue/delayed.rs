//! Keys waiting for a deadline: at most one pending entry per key, the earliest wins.
//!
//! client-go's delaying queue and kube-runtime's scheduler keep one timer entry per
//! key; a plugin that answers `requeue-after(1h)` on every event for a busy object
//! must not pile up one sleeping task per call. This is the bookkeeping alone (no
//! clock, no tasks): the queue asks it what is due and when to wake next.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::hash::Hash;

use tokio::time::Instant;

/// The delayed keys of one queue.
#[derive(Debug)]
pub(super) struct DelayedKeys<K> {
    /// The deadline of every waiting key, with the sequence number of its heap entry.
    deadlines: HashMap<K, (Instant, u64)>,
    /// Deadlines in order. An entry whose sequence number is no longer the key's
    /// (rescheduled earlier, cancelled) is stale and skipped when it comes up.
    heap: BinaryHeap<Reverse<(Instant, u64)>>,
    /// The key of each live heap entry.
    by_seq: HashMap<u64, K>,
    next_seq: u64,
}

impl<K> Default for DelayedKeys<K> {
    fn default() -> Self {
        DelayedKeys {
            deadlines: HashMap::new(),
            heap: BinaryHeap::new(),
            by_seq: HashMap::new(),
            next_seq: 0,
        }
    }
}

impl<K: Clone + Eq + Hash> DelayedKeys<K> {
    /// Schedules `key` at `deadline` unless it already waits for an earlier (or the
    /// same) one. Returns whether this became the key's deadline.
    pub(super) fn schedule(&mut self, key: K, deadline: Instant) -> bool {
        if let Some((current, _)) = self.deadlines.get(&key)
            && *current <= deadline
        {
            return false;
        }
        self.cancel(&key);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Reverse((deadline, seq)));
        self.by_seq.insert(seq, key.clone());
        self.deadlines.insert(key, (deadline, seq));
        self.compact();
        true
    }

    /// Rebuilds the heap from the live deadlines once stale entries outnumber them,
    /// so a key rescheduled earlier over and over cannot grow it without bound.
    fn compact(&mut self) {
        if self.heap.len() <= 2 * self.deadlines.len() + 64 {
            return;
        }
        self.heap = self
            .deadlines
            .values()
            .map(|&(deadline, seq)| Reverse((deadline, seq)))
            .collect();
    }

    /// Forgets `key`'s deadline, if any (it is being added now, which is earlier).
    pub(super) fn cancel(&mut self, key: &K) {
        if let Some((_, seq)) = self.deadlines.remove(key) {
            self.by_seq.remove(&seq);
        }
        self.drop_stale_top();
    }

    /// Removes and returns every key whose deadline is at or before `now`.
    pub(super) fn take_due(&mut self, now: Instant) -> Vec<K> {
        let mut due = Vec::new();
        while let Some(Reverse((deadline, seq))) = self.heap.peek().copied() {
            if deadline > now {
                break;
            }
            self.heap.pop();
            if let Some(key) = self.by_seq.remove(&seq) {
                self.deadlines.remove(&key);
                due.push(key);
            }
        }
        self.drop_stale_top();
        due
    }

    /// The earliest live deadline.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((deadline, _))| *deadline)
    }

    /// Number of keys waiting.
    pub(super) fn len(&self) -> usize {
        self.deadlines.len()
    }

    /// Forgets everything (the queue shut down).
    pub(super) fn clear(&mut self) {
        *self = DelayedKeys::default();
    }

    /// Pops stale entries off the top so `next_deadline` is always a live one; stale
    /// entries further down are skipped when they surface.
    fn drop_stale_top(&mut self) {
        while let Some(Reverse((_, seq))) = self.heap.peek() {
            if self.by_seq.contains_key(seq) {
                break;
            }
            self.heap.pop();
        }
        if self.deadlines.is_empty() {
            self.heap.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn one_entry_per_key_and_the_earlier_deadline_wins() {
        let start = Instant::now();
        let at = |s: u64| start + Duration::from_secs(s);
        let mut keys = DelayedKeys::default();
        assert!(keys.schedule("a", at(3600)));
        for _ in 0..1000 {
            assert!(!keys.schedule("a", at(3600)), "a repeat adds nothing");
        }
        assert!(keys.schedule("a", at(60)), "an earlier deadline replaces");
        assert!(!keys.schedule("a", at(120)), "a later one does not");
        assert_eq!(keys.len(), 1);
        assert_eq!(keys.next_deadline(), Some(at(60)));
        assert_eq!(keys.take_due(at(59)), Vec::<&str>::new());
        assert_eq!(keys.take_due(at(60)), vec!["a"]);
        assert_eq!(keys.len(), 0);
        assert_eq!(keys.take_due(at(4000)), Vec::<&str>::new(), "no stale fire");
        assert_eq!(keys.next_deadline(), None);
    }

    #[test]
    fn cancelled_keys_never_fire_and_the_next_deadline_stays_live() {
        let start = Instant::now();
        let at = |s: u64| start + Duration::from_secs(s);
        let mut keys = DelayedKeys::default();
        keys.schedule("a", at(1));
        keys.schedule("b", at(2));
        keys.cancel(&"a");
        assert_eq!(keys.next_deadline(), Some(at(2)));
        assert_eq!(keys.take_due(at(10)), vec!["b"]);
        assert_eq!(keys.len(), 0);
    }

    #[test]
    fn rescheduling_earlier_and_earlier_keeps_the_heap_bounded() {
        let start = Instant::now();
        let mut keys = DelayedKeys::default();
        for i in 0..100_000u64 {
            keys.schedule("a", start + Duration::from_secs(1_000_000 - i));
        }
        assert_eq!(keys.len(), 1);
        assert!(keys.heap.len() <= 66, "{} heap entries", keys.heap.len());
        assert_eq!(
            keys.take_due(start + Duration::from_secs(1_000_000)),
            vec!["a"]
        );
    }
}
