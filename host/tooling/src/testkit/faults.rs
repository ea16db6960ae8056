//! The faults a test run can inject (`test --faults`): the host crashing right after
//! a write, a cache one version behind the plugin's own write, a watch event held
//! back and coalesced with the next, and a call answered with a conflict, a server
//! error or a timeout. One fault per run, at a point counted in the unperturbed run
//! (the nth write, change or call); `injection` makes them happen in the in-memory
//! cluster, `explore` runs them all and compares end states.

use std::collections::BTreeSet;

use wcm_core::capabilities::{CapabilityError, Op};
use wcm_core::contract::{ErrorCode, GuestError};

/// A class of faults, as `--faults` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FaultKind {
    /// The host crashes right after a write: the reconcile is aborted, the queue
    /// lost, and the plugin starts again from the cluster's state.
    Crash,
    /// The watches holding the object a write changed fall behind: their caches
    /// show it, and every object they hold changed since, as it was, for that
    /// reconcile and the next few (or until nothing is ready to run); their events
    /// come then, in order.
    Stale,
    /// A watch event is held back until the object changes again (delivered as
    /// one) or until nothing else is left to run at the end of the run.
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
    /// The caches of the nth write's object fall behind until nothing is ready.
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

/// The error an injected `answer` gives, worded as the API server's.
pub(super) fn injected(op: &Op, answer: Answer) -> CapabilityError {
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
