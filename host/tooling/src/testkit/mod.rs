//! `wasm-controller-manager test`: a plugin run offline against an in-memory cluster
//! made of YAML fixtures, for plugin authors in any language.
//!
//! The plugin runs in the daemon's sandbox (same engine, limits and host imports) and
//! its calls pass the daemon's capability pipeline ([`wcm_core::capabilities`]); only the
//! backend behind it differs, so every refusal made before a request is the daemon's
//! own. The in-memory cluster keeps
//! the contract's semantics: reads only of watched kinds, from what the watches
//! would cache (namespace and label selector); label patches, server-side apply as
//! the plugin's field manager (conflicts unless forced, fields left out removed),
//! status merges, deletion with finalizers and owners' dependents, Events counted;
//! `forbidden` for undeclared verbs, `not-found`, `conflict` and `invalid` worded as
//! the API server words them. Each write that changes an object wakes the keys its
//! watches map it to, as an informer would; a write that changes nothing wakes none.
//!
//! Time is virtual (`--for`): `requeue-after`, retries after a failure (the host's
//! backoff) and resyncs wait on a clock that jumps to the next of them, and each
//! reconcile says when it ran; a key that requeues itself at once without end is
//! reported and dropped, and keys still scheduled when the time is up are listed.
//! Without `--for` time does not pass: a requeue is reported, not waited for, and a
//! failed key is not retried.
//!
//! Steps (`--steps`, in `steps`): changes made from outside the plugin one after
//! another — objects applied, statuses written by another controller, objects
//! deleted, virtual time passing — the plugin converging after each; the report has
//! what it did in each step.
//!
//! Faults (`--faults`, in `faults` and `explore`): the run made again with a crash
//! right after each write, a stale cache, a held-back watch event or an error
//! answering each call, each end state (`end_state`) compared with the run's.
//!
//! Replay (`--replay`, in `replay`): the transcripts `run --record-plugin` wrote,
//! each reconcile again with every host call answered from its transcript.
//!
//! What it does not model: admission and validation by the API server, list merging by key in
//! server-side apply (a list is owned whole), and other controllers (no Pods appear
//! for a Deployment). The host's own tests use the real API server; this is a tool
//! for plugins' tests.

mod backend;
mod cluster;
mod end_state;
mod explore;
mod faults;
mod fields;
mod fixtures;
mod injection;
mod memory;
mod object_writes;
mod replay;
mod report;
mod run;
mod steps;
mod store;
mod virtual_queue;
mod writes;

pub use cluster::offline_access;
pub use explore::{Difference, Exploration, ExploreOptions, FAULT_TIME, explore};
pub use faults::{Answer, Fault, FaultKind};
pub use fixtures::FixtureError;
pub use replay::{Replay, ReplayedReconcile, replay};
pub use report::{Event, Pending, Reconciled, Report, ReportError, StepReport, Write};
pub use run::{Outcome, Session, TestError, TestOptions, run};
pub use steps::StepError;
