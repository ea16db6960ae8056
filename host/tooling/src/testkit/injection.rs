//! Where a run's fault happens in the in-memory cluster: its caches (a stale
//! object), its watch events (held back, late), and the plugin's API calls (an error
//! answer, a crash). [`Injection`] is the fault of one run and where the run is with
//! respect to it: a state machine the cluster drives at each call, write, change and
//! reconcile, which also counts the writes, changes and calls that place the faults
//! of the next runs.

use serde_json::Value;

use super::faults::{Answer, Fault, injected};
use super::store::{Changed, ObjectId, Store};
use wcm_core::capabilities::{CapabilityError, Op};

/// Reconciles a lagging cache lasts, the one that wrote included: a cache falls
/// milliseconds behind, a few reconciles' worth, not for ever.
const LAG_RECONCILES: u32 = 4;

/// Changes the watches have not turned into keys yet, in order.
pub(super) type Pending = Vec<(ObjectId, Changed)>;

/// The fault of one run and where the run is with respect to it; also what the
/// run counted (writes, changes, calls), which places the faults of the next runs.
#[derive(Debug, Default)]
pub(super) struct Injection {
    fault: Option<Fault>,
    /// Successful writes and deletions of the plugin so far.
    pub(super) writes: usize,
    /// Changes the watches saw so far.
    pub(super) changes: usize,
    /// API calls (reads past the cache, writes, deletions) that reached the cluster.
    pub(super) calls: usize,
    crashed: bool,
    /// Stale: the watches whose caches lag (those holding the object the write
    /// changed), and how many more reconciles may end before they catch up (or
    /// nothing is ready to run); their changes since wait in `late`.
    lag: Option<(Vec<usize>, u32)>,
    /// Coalesce: the held change.
    held: Option<(ObjectId, Changed)>,
    /// Stale: the changes the lagging watches have not seen, in order.
    late: Pending,
    /// The calls of the run, and the reconciles they were made in.
    pub(super) trace: Vec<String>,
}

impl Injection {
    /// A run with `fault`.
    pub(super) fn of(fault: Option<Fault>) -> Injection {
        Injection {
            fault,
            ..Injection::default()
        }
    }

    /// The object at `id` of `store` as the plugin's caches hold it: as it was
    /// before the first change a lagging cache has not seen (none if that change
    /// made it).
    pub(super) fn cache_get<'a>(&'a self, store: &'a Store, id: &ObjectId) -> Option<&'a Value> {
        match self.late.iter().find(|(late, _)| late == id) {
            Some((_, first)) => first.before.as_ref(),
            None => store.get(id),
        }
    }

    /// Every object of `store` as the plugin's caches hold them, in the store's order.
    pub(super) fn cache_objects<'a>(&'a self, store: &'a Store) -> Vec<(&'a ObjectId, &'a Value)> {
        let late = &self.late;
        let mut objects: Vec<(&ObjectId, &Value)> = (store.objects())
            .filter(|(id, _)| !late.iter().any(|(late, _)| late == *id))
            .collect();
        let mut seen: Vec<&ObjectId> = Vec::new();
        for (id, first) in late {
            if seen.contains(&id) {
                continue;
            }
            seen.push(id);
            if let Some(before) = &first.before {
                let at = objects.partition_point(|(other, _)| *other < id);
                objects.insert(at, (id, before));
            }
        }
        objects
    }

    /// Of `pending`, the changes the watches deliver now: all but the one held back
    /// (coalesce) and those a lagging cache has not seen (stale); `holding` says
    /// which watches hold what a change changed.
    pub(super) fn deliverable(
        &mut self,
        pending: &mut Pending,
        holding: impl Fn(&ObjectId, &Changed) -> Vec<usize>,
    ) -> Pending {
        let mut out = Vec::new();
        for (id, changed) in std::mem::take(pending) {
            self.changes += 1;
            let number = self.changes;
            if self.held.as_ref().is_some_and(|(held, _)| *held == id) {
                // The next change of the held object: both come as one.
                out.extend(self.held.take());
            } else if self.fault == Some(Fault::Coalesce { change: number }) {
                self.held = Some((id, changed));
                continue;
            }
            let lagging = self.lag.as_ref();
            let behind = lagging
                .is_some_and(|(ws, _)| holding(&id, &changed).iter().any(|w| ws.contains(w)));
            match behind {
                true => self.late.push((id, changed)),
                false => out.push((id, changed)),
            }
        }
        out
    }

    /// Before an API call: the error the fault answers it with, if it is the one,
    /// or a host fault once the host has crashed (the plugin's call traps).
    pub(super) fn before_call(&mut self, op: &Op) -> Option<CapabilityError> {
        if self.crashed {
            return Some(op.host_fault("the host crashed here (--faults crash)"));
        }
        self.calls += 1;
        self.trace.push(format!("  {op}"));
        match self.fault {
            Some(Fault::Error { call, answer }) if call == self.calls => {
                let error = injected(op, answer);
                self.trace.push(format!("    answered: {error}"));
                (answer != Answer::Timeout).then_some(error)
            }
            _ => None,
        }
    }

    /// A host fault if the host has crashed (an Event recorded after it).
    pub(super) fn after_crash(&self, op: &Op) -> Option<CapabilityError> {
        (self.crashed).then(|| op.host_fault("the host crashed here (--faults crash)"))
    }

    /// After a write or deletion the cluster made (its changes the last of
    /// `pending`): a crash or a lag begins if it is the one; a timeout's error if the
    /// call was to time out.
    pub(super) fn after_write(
        &mut self,
        op: &Op,
        pending: &mut Pending,
        holding: impl Fn(&ObjectId, &Changed) -> Vec<usize>,
    ) -> Option<CapabilityError> {
        self.writes += 1;
        let number = self.writes;
        match self.fault {
            Some(Fault::Crash { after_write }) if after_write == number => {
                self.crashed = true;
                self.trace.push("    the host crashes".into());
            }
            Some(Fault::Stale { write }) if write == number => {
                let note = "    the cache keeps the object as it was";
                self.trace.push(note.into());
                self.fall_behind(pending, holding);
            }
            Some(Fault::Error {
                call,
                answer: Answer::Timeout,
            }) if call == self.calls => {
                return Some(injected(op, Answer::Timeout));
            }
            _ => {}
        }
        None
    }

    /// Whether the host crashed in the reconcile that just ended; the run then
    /// starts again from the cluster's state (no change pending, no lag).
    pub(super) fn take_crash(&mut self, pending: &mut Pending) -> bool {
        let crashed = std::mem::take(&mut self.crashed);
        if crashed {
            pending.clear();
            (self.lag, self.held) = (None, None);
            self.late.clear();
        }
        crashed
    }

    /// Nothing is ready to run: lagging caches catch up and their events come; a
    /// held-back event comes only in the run's last phase (`last`), so a step's
    /// change can find the plugin not yet told of the one before. Whether anything
    /// came.
    pub(super) fn release_held(&mut self, last: bool, pending: &mut Pending) -> bool {
        let held = if last { self.held.take() } else { None };
        let lagging = self.lag.is_some();
        self.end_lag(pending);
        pending.extend(held.clone());
        held.is_some() || lagging
    }

    /// A reconcile ended: a lag that has lasted its reconciles ends, its events come.
    pub(super) fn reconciled(&mut self, pending: &mut Pending) {
        if let Some((_, left)) = &mut self.lag {
            *left = left.saturating_sub(1);
            if *left == 0 {
                self.end_lag(pending);
            }
        }
    }

    /// The caches of the watches holding what the write just made changed fall
    /// behind it: its changes wait (the write's changes are the last of `pending`).
    fn fall_behind(
        &mut self,
        pending: &mut Pending,
        holding: impl Fn(&ObjectId, &Changed) -> Vec<usize>,
    ) {
        let Some((id, _)) = pending.last() else {
            return;
        };
        let id = id.clone();
        let written: Pending = (pending.iter())
            .filter(|(changed, _)| *changed == id)
            .cloned()
            .collect();
        pending.retain(|(changed, _)| *changed != id);
        let mut watches: Vec<usize> = written.iter().flat_map(|(id, c)| holding(id, c)).collect();
        watches.dedup();
        self.lag = Some((watches, LAG_RECONCILES));
        self.late.extend(written);
    }

    fn end_lag(&mut self, pending: &mut Pending) {
        self.lag = None;
        pending.extend(std::mem::take(&mut self.late));
    }
}
