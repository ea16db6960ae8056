//! Where the in-memory cluster makes a run's fault happen: its caches (a stale
//! object), its watch events (held back, late), and the plugin's API calls (an error
//! answer, a crash), counting the writes, changes and calls that place faults.

use serde_json::Value;

use super::faults::{Answer, Fault, injected};
use super::memory::{MemoryCluster, World};
use super::store::{Changed, ObjectId};
use crate::capabilities::{CapabilityError, Op};

impl World {
    /// The object at `id` as the plugin's caches hold it: a step behind while it
    /// lags (none if the write created it).
    pub(super) fn cache_get(&self, id: &ObjectId) -> Option<&Value> {
        match &self.injection.lag {
            Some((lagging, before, _)) if lagging == id => before.as_ref(),
            _ => self.store.get(id),
        }
    }

    /// Every object as the plugin's caches hold them.
    pub(super) fn cache_objects(&self) -> Vec<(&ObjectId, &Value)> {
        let lag = self.injection.lag.as_ref();
        let mut objects: Vec<(&ObjectId, &Value)> = (self.store.objects())
            .filter(|(id, _)| lag.is_none_or(|(lagging, _, _)| lagging != *id))
            .collect();
        if let Some((id, Some(before), _)) = lag {
            let at = objects.partition_point(|(other, _)| *other < id);
            objects.insert(at, (id, before));
        }
        objects
    }

    /// The changes the watches deliver now: all but the one held back and those of
    /// a lagging object.
    pub(super) fn deliverable_changes(&mut self) -> Vec<(ObjectId, Changed)> {
        let mut out = Vec::new();
        for (id, changed) in std::mem::take(&mut self.changes) {
            let faults = &mut self.injection;
            faults.changes += 1;
            let number = faults.changes;
            if faults.held.as_ref().is_some_and(|(held, _)| *held == id) {
                // The next change of the held object: both come as one.
                out.extend(faults.held.take());
            } else if faults.fault == Some(Fault::Coalesce { change: number }) {
                faults.held = Some((id, changed));
                continue;
            }
            match &faults.lag {
                Some((lagging, _, _)) if *lagging == id => faults.late.push((id, changed)),
                _ => out.push((id, changed)),
            }
        }
        out
    }
}

impl MemoryCluster {
    /// Before an API call: the error the fault answers it with, if it is the one,
    /// or a host fault once the host has crashed (the plugin's call traps).
    pub(super) fn before_call(
        &self,
        op: &Op,
        id: &ObjectId,
        write: bool,
    ) -> Option<CapabilityError> {
        let mut world = self.world();
        let before = world.store.get(id).cloned();
        let faults = &mut world.injection;
        if faults.crashed {
            return Some(op.host_fault("the host crashed here (--faults crash)"));
        }
        faults.calls += 1;
        faults.trace.push(format!("  {op}"));
        if write
            && faults.fault
                == Some(Fault::Stale {
                    write: faults.writes + 1,
                })
        {
            faults.before = Some((id.clone(), before));
        }
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

    /// After a write or deletion the cluster made (of the object now `named`, if the
    /// name was generated): a crash or a lag begins if it is the one; a timeout's
    /// error if the call was to time out.
    pub(super) fn after_write(&self, op: &Op, named: Option<&str>) -> Option<CapabilityError> {
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
                let (mut id, before) = faults.before.take()?;
                id.name = named.map_or(id.name, str::to_string);
                faults.lag = Some((id, before, 2));
                faults
                    .trace
                    .push("    the cache keeps the object as it was".into());
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

    /// A reconcile ended: a lag that has lasted its reconciles ends, and the
    /// object's watch events come.
    pub(super) fn reconciled(&self) {
        let mut world = self.world();
        let faults = &mut world.injection;
        if let Some((_, _, left)) = &mut faults.lag {
            *left -= 1;
            if *left == 0 {
                self.end_lag(&mut world);
            }
        }
    }

    /// Nothing else is left to run: what was held back comes now. Whether anything
    /// did.
    pub(super) fn release_held(&self) -> bool {
        let mut world = self.world();
        let held = world.injection.held.take();
        let lagging = world.injection.lag.is_some();
        self.end_lag(&mut world);
        world.changes.extend(held.clone());
        held.is_some() || lagging
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
