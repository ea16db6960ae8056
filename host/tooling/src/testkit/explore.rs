//! Fault exploration (`test --faults`): the run once without a fault, counting its
//! writes, changes and API calls, then once per fault at every one of those points
//! (a crash right after each write, a stale cache after each write, each change's
//! watch event held back, each call answered with an error), each from the fixtures
//! anew and in virtual time, so retries happen. A correct controller ends every
//! perturbed run in the state the unperturbed one ended in; a run that does not is a
//! difference, reported with its fault, the diff of the end states and the calls of
//! that run on the objects that differ.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use tracing::instrument::WithSubscriber;

use super::end_state::EndState;
use super::faults::{Answer, Fault, FaultKind};
use super::run::{Outcome, Session, TestError, TestOptions, run_session};
use super::steps::Steps;

/// Virtual time each explored run has after its last change when `--for` is not
/// given: retries after an injected error back off from 5 ms, so a minute holds a
/// dozen failures in a row.
pub const FAULT_TIME: Duration = Duration::from_secs(60);

/// What to explore.
#[derive(Debug, Clone)]
pub struct ExploreOptions {
    /// The classes of faults.
    pub kinds: BTreeSet<FaultKind>,
    /// JSON pointers of fields left out of the comparison (`/status/lastRun`).
    pub ignore: Vec<String>,
    /// Runs at most; past it, faults are taken evenly from the points.
    pub max_runs: usize,
}

/// What the exploration found.
#[derive(Debug, Default)]
pub struct Exploration {
    /// The faults there were to inject, by class.
    pub planned: BTreeMap<&'static str, usize>,
    /// The runs made with a fault.
    pub ran: usize,
    /// The faults after which the end state differed, one per distinct difference.
    pub differences: Vec<Difference>,
}

/// A fault after which the run ended in another state.
#[derive(Debug, Clone)]
pub struct Difference {
    /// The fault (the one with the fewest calls shown, of those giving this diff).
    pub fault: Fault,
    /// Other faults that gave the same difference.
    pub same: Vec<Fault>,
    /// The objects that differ.
    pub objects: Vec<String>,
    /// The diff of the end states.
    pub diff: String,
    /// The calls of the run on those objects, by reconcile, the fault marked.
    pub calls: Vec<String>,
}

/// Runs the plugin as `run` does (the report) and then explores `explore`'s
/// faults; the run's outcome and what the exploration found.
pub async fn explore(
    options: &TestOptions,
    explore: &ExploreOptions,
) -> Result<(Outcome, Exploration), TestError> {
    let session = Session::load(options).await?;
    let steps = Steps::of(options.steps.as_deref())?;
    let outcome = run_session(&session, &steps, options).await?;
    let timed = TestOptions {
        run_for: Some(options.run_for.unwrap_or(FAULT_TIME)),
        ..options.clone()
    };
    // The explored runs say nothing: the plugin's log and the host's notes of the
    // faults it injected would drown what the exploration finds.
    let quiet = || tracing::subscriber::NoSubscriber::default();
    let base = session.again(None)?;
    let report = (run_session(&base, &steps, &timed).with_subscriber(quiet()))
        .await?
        .report;
    let base_state = EndState::of(base.cluster(), &report, &explore.ignore);
    let (writes, changes, calls) = base.cluster().counted();
    let (faults, planned) = plan(&explore.kinds, writes, changes, calls, explore.max_runs);
    let mut found: Vec<Difference> = Vec::new();
    for fault in &faults {
        let perturbed = session.again(Some(*fault))?;
        let run = run_session(&perturbed, &steps, &timed).with_subscriber(quiet());
        let report = run.await?.report;
        let state = EndState::of(perturbed.cluster(), &report, &explore.ignore);
        let Some(diff) = state.differences(&base_state) else {
            continue;
        };
        let trace = perturbed.cluster().take_trace();
        let calls = calls_on(&trace, &diff.objects);
        note(&mut found, *fault, diff, calls);
    }
    let exploration = Exploration {
        planned,
        ran: faults.len(),
        differences: found,
    };
    Ok((outcome, exploration))
}

/// Adds a difference, or notes `fault` beside the one with the same diff (keeping
/// the fault whose calls are fewest in front).
fn note(
    found: &mut Vec<Difference>,
    fault: Fault,
    diff: super::end_state::StateDiff,
    calls: Vec<String>,
) {
    if let Some(same) = found.iter_mut().find(|d| d.diff == diff.text) {
        if calls.len() < same.calls.len() {
            let first = std::mem::replace(&mut same.fault, fault);
            same.same.push(first);
            same.calls = calls;
        } else {
            same.same.push(fault);
        }
        return;
    }
    found.push(Difference {
        fault,
        same: Vec::new(),
        objects: diff.objects,
        diff: diff.text,
        calls,
    });
}

/// The faults of `kinds` at every point of a run with `writes` writes, `changes`
/// changes and `calls` API calls; at most `max` of them, taken evenly. Also how
/// many there were of each class.
fn plan(
    kinds: &BTreeSet<FaultKind>,
    writes: usize,
    changes: usize,
    calls: usize,
    max: usize,
) -> (Vec<Fault>, BTreeMap<&'static str, usize>) {
    let mut faults = Vec::new();
    let mut planned = BTreeMap::new();
    for kind in kinds {
        let before = faults.len();
        let name = match kind {
            FaultKind::Crash => {
                faults.extend((1..=writes).map(|n| Fault::Crash { after_write: n }));
                "crash"
            }
            FaultKind::Stale => {
                faults.extend((1..=writes).map(|n| Fault::Stale { write: n }));
                "stale"
            }
            FaultKind::Coalesce => {
                faults.extend((1..=changes).map(|n| Fault::Coalesce { change: n }));
                "coalesce"
            }
            FaultKind::Errors => {
                let answers = [Answer::Conflict, Answer::ServerError, Answer::Timeout];
                let each = (1..=calls)
                    .flat_map(|call| answers.map(|answer| Fault::Error { call, answer }));
                faults.extend(each);
                "errors"
            }
        };
        planned.insert(name, faults.len() - before);
    }
    (evenly(faults, max), planned)
}

/// At most `max` of `all`, spread evenly over them (the first always in).
fn evenly<T: Copy>(all: Vec<T>, max: usize) -> Vec<T> {
    if all.len() <= max || max == 0 {
        return all;
    }
    (0..max).map(|i| all[i * all.len() / max]).collect()
}

/// The lines of `trace` about `objects`: each call on one of them and each call the
/// fault struck (with its marks), under the reconcile that made it.
fn calls_on(trace: &[String], objects: &[String]) -> Vec<String> {
    // A generated name (`v1/ConfigMap a/made-… #1`) is matched by its prefix.
    let names: Vec<&str> = (objects.iter())
        .map(|o| o.split('…').next().unwrap_or(o))
        .collect();
    let mut kept = Vec::new();
    let mut header: Option<&String> = None;
    let mut at = 0;
    while at < trace.len() {
        let line = &trace[at];
        at += 1;
        if !line.starts_with(' ') {
            header = Some(line);
            continue;
        }
        let marks = trace[at..]
            .iter()
            .take_while(|l| l.starts_with("    "))
            .count();
        // A list of a kind that differs says what the plugin saw of it.
        let listed = |n: &&str| {
            let kind = n.split(' ').next().unwrap_or(n);
            line.starts_with(&format!("  list {kind} "))
        };
        if marks > 0 || names.iter().any(|n| line.contains(n) || listed(n)) {
            kept.extend(header.take().cloned());
            kept.extend(trace[at - 1..at + marks].iter().cloned());
        }
        at += marks;
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_point_gets_each_fault_of_the_classes_asked_for() {
        let kinds = [FaultKind::Crash, FaultKind::Errors].into();
        let (faults, planned) = plan(&kinds, 2, 5, 3, 100);
        assert_eq!(planned, [("crash", 2), ("errors", 9)].into());
        assert_eq!(faults[0], Fault::Crash { after_write: 1 });
        assert_eq!(faults.len(), 11);
    }

    #[test]
    fn the_calls_shown_are_those_on_the_objects_that_differ_and_the_fault() {
        let trace: Vec<String> = [
            "reconcile a",
            "  get v1/ConfigMap x/other",
            "reconcile b",
            "  apply v1/ConfigMap x/made-abcde",
            "  patch-status v1/Pod x/p",
            "    the host crashes",
        ]
        .map(String::from)
        .into();
        let shown = calls_on(&trace, &["v1/ConfigMap x/made-… #1".to_string()]);
        assert_eq!(shown, &trace[2..]);
    }

    #[test]
    fn past_the_bound_faults_are_taken_evenly() {
        let all: Vec<usize> = (0..10).collect();
        assert_eq!(evenly(all, 4), [0, 2, 5, 7]);
    }
}
