//! The faults a test run can inject (`test --faults`): the host crashing right after
//! a write, a cache one version behind the plugin's own write, a watch event held
//! back and coalesced with the next, and a call answered with a conflict, a server
//! error or a timeout. One fault per run, at a point counted in the unperturbed run
//! (the nth write, change or call); `explore` runs them all and compares end states.

use std::collections::BTreeSet;

use serde_json::Value;

use super::memory::{MemoryCluster, World};
use super::store::{Changed, ObjectId};
use crate::capabilities::{CapabilityError, Op};
use crate::contract::{ErrorCode, GuestError};

/// A class of faults, as `--faults` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FaultKind {
    /// The host crashes right after a write: the reconcile is aborted, the queue
    /// lost, and the plugin starts again from the cluster's state.
    Crash,
    /// The cache serves the object a write changed as it was before, for the rest
    /// of that reconcile and the next; the write's watch event comes after.
    Stale,
    /// A watch event is held back until the object changes again (delivered as
    /// one) or until nothing else is left to run.
    Coalesce,
    /// A call is answered with a conflict, a server error or a timeout.
    Errors,
}

impl FaultKind {
    /// Every class, in the order `--faults all` explores them.
    pub const ALL: [FaultKind; 4] = [Self::Crash, Self::Stale, Self::Coalesce, Self::Errors];

    /// Parses `crash,stale,coalesce,errors` or `all`.
    pub fn parse_list(text: &str) -> Result<BTreeSet<FaultKind>, String> {
        let mut kinds = BTreeSet::new();
        for word in text.split(',').map(str::trim) {
            match word {
                "all" => kinds.extend(Self::ALL),
                "crash" => _ = kinds.insert(Self::Crash),
                "stale" => _ = kinds.insert(Self::Stale),
                "coalesce" => _ = kinds.insert(Self::Coalesce),
                "errors" => _ = kinds.insert(Self::Errors),
                other => {
                    return Err(format!(
                        "unknown fault {other:?}: crash, stale, coalesce, errors or all"
                    ));
                }
            }
        }
        Ok(kinds)
    }
}

/// How an injected error answers a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// 409: another writer changed the object first (writes only).
    Conflict,
    /// 500: the API server failed; nothing was made.
    ServerError,
    /// The answer never came: a write was made, but the plugin cannot know.
    Timeout,
}

/// One fault injected into one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The host crashes right after the nth write the plugin made.
    Crash { after_write: usize },
    /// The nth write the plugin made is not in its cache for a reconcile.
    Stale { write: usize },
    /// The watch event of the nth change (a plugin's write or a step's) is held.
    Coalesce { change: usize },
    /// The nth API call (read past the cache, write or delete) gets `answer`.
    Error { call: usize, answer: Answer },
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::Crash { after_write } => write!(f, "crash right after write {after_write}"),
            Fault::Stale { write } => write!(f, "stale cache after write {write}"),
            Fault::Coalesce { change } => write!(f, "watch event of change {change} held back"),
            Fault::Error { call, answer } => {
                let what = match answer {
                    Answer::Conflict => "a conflict (409)",
                    Answer::ServerError => "a server error (500)",
                    Answer::Timeout => "a timeout (the write made)",
                };
                write!(f, "API call {call} answered with {what}")
            }
        }
    }
}

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
    /// Stale: the object, as the cache still serves it, and the reconciles it lags.
    lag: Option<(ObjectId, Option<Value>, u8)>,
    /// Stale: the object before the write under way, if that write is the one.
    before: Option<(ObjectId, Option<Value>)>,
    /// Coalesce: the held change.
    held: Option<(ObjectId, Changed)>,
    /// Stale: changes of the lagging object, delivered when the lag ends.
    late: Vec<(ObjectId, Changed)>,
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
}

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

/// The error an injected `answer` gives, worded as the API server's.
fn injected(op: &Op, answer: Answer) -> CapabilityError {
    let (code, status, message) = match answer {
        Answer::Conflict => (
            ErrorCode::Conflict,
            409,
            format!(
                "{op}: Operation cannot be fulfilled: the object has been modified; please \
                 apply your changes to the latest version and try again (409 Conflict) \
                 (--faults errors)"
            ),
        ),
        Answer::ServerError => (
            ErrorCode::Unavailable,
            500,
            format!("{op}: Internal error occurred (500 InternalError) (--faults errors)"),
        ),
        Answer::Timeout => {
            let why = "the request timed out; it may have been made (--faults errors)";
            return op.unavailable(why);
        }
    };
    let mut error = GuestError::new(code, message);
    error.status = Some(status);
    CapabilityError::Api(Box::new(error))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_faults_list_takes_names_and_all_and_refuses_others() {
        let kinds = FaultKind::parse_list("crash, errors").expect("parsed");
        assert_eq!(
            kinds.into_iter().collect::<Vec<_>>(),
            [FaultKind::Crash, FaultKind::Errors]
        );
        assert_eq!(FaultKind::parse_list("all").expect("parsed").len(), 4);
        let refused = FaultKind::parse_list("crash,partition").expect_err("refused");
        assert!(refused.contains("unknown fault \"partition\""), "{refused}");
    }
}
