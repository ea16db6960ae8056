//! Where the in-memory cluster makes a run's fault happen: its caches (a stale
//! object), its watch events (held back, late), and the plugin's API calls (an error
//! answer, a crash), counting the writes, changes and calls that place faults.

use serde_json::Value;

use super::faults::{Answer, Fault, injected};
use super::memory::{MemoryCluster, World};
use super::store::{Changed, ObjectId};
use wcm_core::capabilities::{CapabilityError, Op};

/// Reconciles a lagging cache lasts, the one that wrote included: a cache falls
/// milliseconds behind, a few reconciles' worth, not for ever.
const LAG_RECONCILES: u32 = 4;

impl World {
    /// The object at `id` as the plugin's caches hold it: as it was before the
    /// first change a lagging cache has not seen (none if that change made it).
    pub(super) fn cache_get(&self, id: &ObjectId) -> Option<&Value> {
        match self.injection.late.iter().find(|(late, _)| late == id) {
            Some((_, first)) => first.before.as_ref(),
            None => self.store.get(id),
        }
    }

    /// Every object as the plugin's caches hold them, in the store's order.
    pub(super) fn cache_objects(&self) -> Vec<(&ObjectId, &Value)> {
        let late = &self.injection.late;
        let mut objects: Vec<(&ObjectId, &Value)> = (self.store.objects())
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
}

impl MemoryCluster {
    /// The changes the watches deliver now: all but the one held back (coalesce)
    /// and those a lagging cache has not seen (stale).
    pub(super) fn deliverable_changes(&self, world: &mut World) -> Vec<(ObjectId, Changed)> {
        let mut out = Vec::new();
        for (id, changed) in std::mem::take(&mut world.changes) {
            let faults = &mut world.injection;
            faults.changes += 1;
            let number = faults.changes;
            if faults.held.as_ref().is_some_and(|(held, _)| *held == id) {
                // The next change of the held object: both come as one.
                out.extend(faults.held.take());
            } else if faults.fault == Some(Fault::Coalesce { change: number }) {
                faults.held = Some((id, changed));
                continue;
            }
            let lagging = faults.lag.as_ref();
            let behind = lagging
                .is_some_and(|(ws, _)| self.holding(&id, &changed).iter().any(|w| ws.contains(w)));
            match behind {
                true => faults.late.push((id, changed)),
                false => out.push((id, changed)),
            }
        }
        out
    }

    /// Before an API call: the error the fault answers it with, if it is the one,
    /// or a host fault once the host has crashed (the plugin's call traps).
    pub(super) fn before_call(&self, op: &Op) -> Option<CapabilityError> {
        let mut world = self.world();
        let faults = &mut world.injection;
        if faults.crashed {
            return Some(op.host_fault("the host crashed here (--faults crash)"));
        }
        faults.calls += 1;
        faults.trace.push(format!("  {op}"));
        match faults.fault {
            Some(Fault::Error { call, answer }) if call == faults.calls => {
                let error = injected(op, answer);
                faults.trace.push(format!("    answered: {error}"));
                (answer != Answer::Timeout).then_some(error)
            }
            _ => None,
        }
    }

    /// A host fault if the host has crashed (an Event recorded after it).
    pub(super) fn after_crash(&self, op: &Op) -> Option<CapabilityError> {
        let crashed = self.world().injection.crashed;
        crashed.then(|| op.host_fault("the host crashed here (--faults crash)"))
    }

    /// After a write or deletion the cluster made: a crash or a lag begins if it is
    /// the one; a timeout's error if the call was to time out.
    pub(super) fn after_write(&self, op: &Op) -> Option<CapabilityError> {
        let mut world = self.world();
        let faults = &mut world.injection;
        faults.writes += 1;
        let number = faults.writes;
        match faults.fault {
            Some(Fault::Crash { after_write }) if after_write == number => {
                faults.crashed = true;
                faults.trace.push("    the host crashes".into());
            }
            Some(Fault::Stale { write }) if write == number => {
                faults
                    .trace
                    .push("    the cache keeps the object as it was".into());
                self.fall_behind(&mut world);
            }
            Some(Fault::Error {
                call,
                answer: Answer::Timeout,
            }) if call == faults.calls => {
                return Some(injected(op, Answer::Timeout));
            }
            _ => {}
        }
        None
    }

    /// Whether the host crashed in the reconcile that just ended; the run then
    /// starts again from the cluster's state (no change pending, no lag).
    pub(super) fn take_crash(&self) -> bool {
        let mut world = self.world();
        let crashed = std::mem::take(&mut world.injection.crashed);
        if crashed {
            world.changes.clear();
            let faults = &mut world.injection;
            (faults.lag, faults.held) = (None, None);
            faults.late.clear();
        }
        crashed
    }

    /// Nothing is ready to run: lagging caches catch up and their events come; a
    /// held-back event comes only in the run's last phase (`last`), so a step's
    /// change can find the plugin not yet told of the one before. Whether anything
    /// came.
    pub(super) fn release_held(&self, last: bool) -> bool {
        let mut world = self.world();
        let held = if last {
            world.injection.held.take()
        } else {
            None
        };
        let lagging = world.injection.lag.is_some();
        self.end_lag(&mut world);
        world.changes.extend(held.clone());
        held.is_some() || lagging
    }

    /// The caches of the watches holding what the write just made changed fall
    /// behind it: its changes wait (the write's changes are the last not yet
    /// delivered).
    fn fall_behind(&self, world: &mut World) {
        let Some((id, _)) = world.changes.last() else {
            return;
        };
        let id = id.clone();
        let written: Vec<(ObjectId, Changed)> = (world.changes.iter())
            .filter(|(changed, _)| *changed == id)
            .cloned()
            .collect();
        world.changes.retain(|(changed, _)| *changed != id);
        let mut watches: Vec<usize> = written
            .iter()
            .flat_map(|(id, c)| self.holding(id, c))
            .collect();
        watches.dedup();
        world.injection.lag = Some((watches, LAG_RECONCILES));
        world.injection.late.extend(written);
    }

    /// A reconcile ended: a lag that has lasted its reconciles ends, its events come.
    pub(super) fn reconciled(&self) {
        let mut world = self.world();
        if let Some((_, left)) = &mut world.injection.lag {
            *left = left.saturating_sub(1);
            if *left == 0 {
                self.end_lag(&mut world);
            }
        }
    }

    fn end_lag(&self, world: &mut World) {
        let faults = &mut world.injection;
        faults.lag = None;
        let late = std::mem::take(&mut faults.late);
        world.changes.extend(late);
    }

    /// Notes a line of the run's trace (a reconcile beginning).
    pub(super) fn trace(&self, line: String) {
        self.world().injection.trace.push(line);
    }
}
