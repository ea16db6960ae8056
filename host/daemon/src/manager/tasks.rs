//! The manager's tasks in flight: loads (each file's read, compile, register and
//! prepare, side by side) and stops (a removed or replaced plugin draining its
//! reconciles), so the manager's loop never waits on either.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::{AbortHandle, Id, JoinError, JoinSet};

use super::load::{self, LoadJob, LoadOutcome};
use super::slot::Waiting;
use crate::controller::{ControllerContext, PluginController};
use wcm_core::runtime::Runtime;

/// A finished load task: its id, and its file with the outcome (an error when it
/// panicked or was aborted).
pub(super) type LoadDone = Result<(Id, (String, LoadOutcome)), JoinError>;

/// Load and stop tasks in flight.
pub(super) struct Tasks {
    runtime: Arc<Runtime>,
    ctx: ControllerContext,
    /// Load tasks, each returning its file name with the outcome.
    loads: JoinSet<(String, LoadOutcome)>,
    /// Plugins being stopped (removed or replaced), drained in the background.
    stopping: JoinSet<()>,
    /// How long a stopping plugin's in-flight reconciles may run on.
    grace: Duration,
}

impl Tasks {
    /// Loads with `runtime` for `ctx`; a stop lets reconciles run `grace` longer.
    pub(super) fn new(runtime: Arc<Runtime>, ctx: ControllerContext, grace: Duration) -> Tasks {
        Tasks {
            runtime,
            ctx,
            loads: JoinSet::new(),
            stopping: JoinSet::new(),
            grace,
        }
    }

    /// Runs `job` in a task of its own.
    pub(super) fn load(&mut self, job: LoadJob) -> AbortHandle {
        let (runtime, ctx) = (self.runtime.clone(), self.ctx.clone());
        let file = job.file.clone();
        (self.loads).spawn(async move { (file, load::load(job, runtime, ctx).await) })
    }

    /// Tries again to start `file`'s `waiting` plugin (`replaces` a running version),
    /// without compiling it again.
    pub(super) fn retry(&mut self, file: &str, waiting: Waiting, replaces: bool) -> AbortHandle {
        let ctx = self.ctx.clone();
        let file = file.to_string();
        self.loads.spawn(async move {
            let Waiting {
                loaded,
                registration,
                ..
            } = waiting;
            let (register, began) = (Duration::ZERO, Instant::now());
            let outcome =
                load::prepare(loaded, registration, &ctx, replaces, register, began).await;
            (file, outcome)
        })
    }

    /// Lets `controller`'s in-flight reconciles finish (within the grace) without
    /// holding up the loop, then calls `done`.
    pub(super) fn stop(
        &mut self,
        controller: PluginController,
        done: impl FnOnce() + Send + 'static,
    ) {
        let grace = self.grace;
        self.stopping.spawn(async move {
            controller.stop(grace).await;
            done();
        });
    }

    /// The next load to finish; finished stops are reaped meanwhile. Pending while
    /// nothing is in flight.
    pub(super) async fn next_load(&mut self) -> LoadDone {
        loop {
            tokio::select! {
                Some(done) = self.loads.join_next_with_id() => return done,
                Some(_) = self.stopping.join_next() => {}
                else => std::future::pending().await,
            }
        }
    }

    /// Drops every load in flight.
    pub(super) async fn shutdown_loads(&mut self) {
        self.loads.shutdown().await;
    }

    /// Waits for every stop in flight.
    pub(super) async fn drain_stops(&mut self) {
        while self.stopping.join_next().await.is_some() {}
    }
}
