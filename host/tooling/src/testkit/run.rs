//! One test run: the plugin loaded in the host's sandbox, its watches over the
//! fixtures, and its reconciles in queue order until nothing is queued (bounded), in
//! virtual time when the run is given some.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::cluster;
use super::faults::Fault;
use super::fixtures::{self, FixtureError, Scopes};
use super::memory::MemoryCluster;
use super::report::{Pending, Reconciled, Report, StepReport};
use super::steps::{StepError, Steps};
use super::store::ObjectId;
use super::virtual_queue::{Next, VirtualQueue};
use wcm_core::capabilities::ClusterAccess;
use wcm_core::config::Limits;
use wcm_core::contract::{Action, Registration};
use wcm_core::keys::ReconcileKey;
use wcm_core::loading::{RegistrationError, load_registered, load_registered_with};
use wcm_core::metrics::plugin::PluginMetrics;
use wcm_core::requeue::requeue_of;
use wcm_core::runtime::settings;
use wcm_core::runtime::{CallError, PluginCode, ReusedInstance, Runtime, chain, outcome_text};

/// What to test and how.
#[derive(Debug, Clone)]
pub struct TestOptions {
    /// The plugin component.
    pub plugin: PathBuf,
    /// Fixture files or directories.
    pub fixtures: Vec<PathBuf>,
    /// Reconciles after which a run that still has keys queued stops, failed.
    pub max_reconciles: usize,
    /// The sandbox's limits (deadline, memory), as in the daemon.
    pub limits: Limits,
    /// Where compiled plugins are cached, as in the daemon.
    pub compile_cache: Option<PathBuf>,
    /// The plugin's settings file; none takes the one beside the plugin, if any.
    pub settings: Option<PathBuf>,
    /// Files a fixture directory leaves out: the run's own, such as the expected
    /// report and the settings, which may sit in `testdata/` with the fixtures.
    pub not_fixtures: Vec<PathBuf>,
    /// Virtual time the run may take (`--for`): requeues, retries and resyncs
    /// happen on a virtual clock up to it. None: time does not pass (a requeue is
    /// reported, not waited for, and a failed key is not retried).
    pub run_for: Option<Duration>,
    /// A steps file (`--steps`): changes made one after another once the plugin
    /// has converged on the fixtures and on each step before.
    pub steps: Option<PathBuf>,
}

/// Why a run could not happen at all.
#[derive(Debug, thiserror::Error)]
pub enum TestError {
    /// The engine could not be set up.
    #[error("cannot set up the Wasm engine: {0}")]
    Runtime(String),
    /// The plugin could not be loaded or registered.
    #[error(transparent)]
    Plugin(#[from] RegistrationError),
    /// The fixtures could not be read.
    #[error(transparent)]
    Fixtures(#[from] FixtureError),
    /// The transcripts to replay could not be read.
    #[error("replay: {0}")]
    Replay(String),
    /// The steps file could not be read, or a step could not be made.
    #[error(transparent)]
    Steps(#[from] StepError),
}

/// A finished run: the report, and what went wrong in it (failed reconciles, keys
/// still queued at the bound), one line each naming the plugin, step and key.
#[derive(Debug)]
pub struct Outcome {
    /// What the plugin did.
    pub report: Report,
    /// What failed; empty if every reconcile succeeded and the queue ran dry.
    pub problems: Vec<String>,
}

/// A plugin loaded in the sandbox with the in-memory cluster of its fixtures: what a
/// run drives, and what `make bench` times calls into.
pub struct Session {
    /// The compiled, registered plugin.
    pub code: PluginCode,
    /// Its registration, as the host checked it.
    pub registration: Registration,
    /// The in-memory cluster: the keys its watches and the plugin's writes give.
    cluster: Arc<MemoryCluster>,
    /// The plugin's calls into it.
    access: Arc<ClusterAccess>,
    /// The fixtures' objects and their kinds' scopes, read once, for a run anew.
    fixtures: (Vec<(ObjectId, Value)>, Scopes),
}

impl Session {
    /// Loads the plugin (compiling it or taking it from the compile cache), asks it
    /// for its registration and builds the in-memory cluster of the fixtures.
    pub async fn load(options: &TestOptions) -> Result<Session, TestError> {
        let runtime = Runtime::new(options.limits.clone(), options.compile_cache.as_deref())
            .map_err(|e| TestError::Runtime(chain(&e)))?;
        let runtime = Arc::new(runtime);
        let (code, registration) = match &options.settings {
            None => load_registered(&runtime, &options.plugin).await?,
            Some(file) => {
                let settings = (settings::read(file).await).map_err(RegistrationError::from)?;
                load_registered_with(&runtime, &options.plugin, Some(settings)).await?
            }
        };
        let fixtures = fixtures::read(&options.fixtures, &options.not_fixtures)?;
        let (objects, scopes) = fixtures.clone();
        let (cluster, access) = cluster::of_objects(&registration, objects, scopes)?;
        Ok(Session {
            code,
            registration,
            cluster,
            access: Arc::new(access),
            fixtures,
        })
    }

    /// The same plugin over its fixtures anew, with `fault` injected: a run of its
    /// own, nothing shared with this one's cluster.
    pub fn again(&self, fault: Option<Fault>) -> Result<Session, TestError> {
        let (objects, scopes) = self.fixtures.clone();
        let (cluster, access) = cluster::of_objects(&self.registration, objects, scopes)?;
        cluster.inject(fault);
        Ok(Session {
            code: self.code.clone(),
            registration: self.registration.clone(),
            cluster,
            access: Arc::new(access),
            fixtures: self.fixtures.clone(),
        })
    }

    /// The in-memory cluster of this session.
    pub(super) fn cluster(&self) -> &MemoryCluster {
        &self.cluster
    }

    /// The keys the plugin's watches hold at the start, in queue order.
    pub fn initial_keys(&self) -> Vec<ReconcileKey> {
        self.cluster.initial_keys()
    }

    /// One reconcile of `key` in a fresh instance.
    pub async fn reconcile(&self, key: &ReconcileKey) -> Result<Action, CallError> {
        ReusedInstance::reconcile_once(&self.code, self.access.clone(), key).await
    }
}

/// Loads the plugin, builds the in-memory cluster of the fixtures and reconciles
/// every key its watches produce, and every key its writes wake, until none is left
/// (or, in virtual time, none is due before the time is up) or `max_reconciles`
/// were run; then, step by step, makes each step's changes and does the same.
pub async fn run(options: &TestOptions) -> Result<Outcome, TestError> {
    let session = Session::load(options).await?;
    let steps = Steps::of(options.steps.as_deref())?;
    run_session(&session, &steps, options).await
}

/// One run of the plugin of `session` on its cluster, through `steps`.
pub(super) async fn run_session(
    session: &Session,
    steps: &Steps,
    options: &TestOptions,
) -> Result<Outcome, TestError> {
    let mut driver = Driver::new(session, options.run_for.is_some() || steps.wait(), options);
    // `--for` is the time the run may take after its last change.
    let run_for = options.run_for.unwrap_or_default();
    let last = steps.steps.len();
    let span = if last == 0 { run_for } else { Duration::ZERO };
    let mut phases = vec![driver.phase(span, None, last == 0).await];
    for (index, step) in steps.steps.iter().enumerate() {
        steps.make(index, &session.cluster)?;
        driver.queue.add(session.cluster.woken_keys());
        let is_last = index + 1 == last;
        let span = step.wait.unwrap_or_default() + if is_last { run_for } else { Duration::ZERO };
        phases.push(driver.phase(span, Some(&step.name), is_last).await);
    }
    Ok(driver.outcome(phases))
}

/// How long past a phase's time the retries of failed keys still run before the
/// next step: the host's backoff (5 ms, doubling) retries a dozen times in it.
const RETRIES_WITHIN: Duration = Duration::from_secs(60);

/// Reconciles in a row at one virtual instant, with nothing changed, after which a
/// key that keeps requeueing itself at once is reported as a loop and dropped.
const LOOP_AFTER: u32 = 20;

/// The queue and the reconciles of one run, phase after phase.
struct Driver<'a> {
    session: &'a Session,
    queue: VirtualQueue,
    /// Whether time passes (`--for`, or a step that waits): requeues and retries are
    /// scheduled on the virtual clock.
    timed: bool,
    max_reconciles: usize,
    reconciled: usize,
    problems: Vec<String>,
    loops: Loops,
}

impl<'a> Driver<'a> {
    /// A driver for a run of `session`, in virtual time if `timed`, every watched
    /// object's key queued.
    fn new(session: &'a Session, timed: bool, options: &TestOptions) -> Driver<'a> {
        let resync = (session.registration.resync_period_ms).map(Duration::from_millis);
        let mut queue = VirtualQueue::new(resync);
        queue.add(session.initial_keys());
        Driver {
            session,
            queue,
            timed,
            max_reconciles: options.max_reconciles,
            reconciled: 0,
            problems: Vec::new(),
            loops: Loops::default(),
        }
    }

    /// The run's outcome: the first phase (the fixtures') in the report's own
    /// fields, the steps' after it, and the keys still scheduled.
    fn outcome(self, mut phases: Vec<StepReport>) -> Outcome {
        let session = self.session;
        let metrics = PluginMetrics::samples(session.access.plugin_metrics());
        // Out of virtual time nothing is ever scheduled, so nothing is pending.
        let pending = self
            .queue
            .scheduled()
            .into_iter()
            .map(Pending::of)
            .collect();
        let fixtures = phases.remove(0);
        let report = Report {
            plugin: session.registration.name.clone(),
            reconciles: fixtures.reconciles,
            writes: fixtures.writes,
            events: fixtures.events,
            steps: phases,
            metrics,
            pending,
        };
        Outcome {
            report,
            problems: self.problems,
        }
    }

    /// Runs keys until none is due within `span` of virtual time from now (the
    /// clock then at its end) or the run's bound is reached; what the plugin did
    /// meanwhile, under the step's name (none: the fixtures).
    async fn phase(&mut self, span: Duration, step: Option<&str>, last: bool) -> StepReport {
        let mut until = self.queue.now().saturating_add(span);
        // Before a next step, a failed key is part of converging: its retries run,
        // the clock moving to them, for up to this long past the phase's time. The
        // last phase ends with its time (`--for`).
        let within = if last { Duration::ZERO } else { RETRIES_WITHIN };
        let retries_until = until.saturating_add(within);
        let mut reconciles = Vec::new();
        let cluster = &self.session.cluster;
        while self.reconciled <= self.max_reconciles {
            // Nothing ready now: before time moves on, what a fault held back comes.
            if !self.queue.has_ready() && cluster.release_held(last) {
                self.queue.add(cluster.woken_keys());
                continue;
            }
            match self.queue.next(until) {
                Some(Next::Resync) => self.queue.add(self.session.initial_keys()),
                Some(Next::Key(key)) => reconciles.extend(self.reconcile(key, step).await),
                None => match self.queue.earliest_retry() {
                    Some(at) if self.timed && at > until && at <= retries_until => until = at,
                    _ => break,
                },
            }
        }
        if self.timed {
            self.queue.advance_to(until);
        }
        let (writes, events) = self.session.cluster.journal();
        StepReport {
            step: step.unwrap_or_default().to_string(),
            reconciles,
            writes,
            events,
        }
    }

    /// Reconciles `key` (in `step`, if any), schedules what it asked for and queues
    /// what its writes woke; none past the run's bound.
    async fn reconcile(&mut self, key: ReconcileKey, step: Option<&str>) -> Option<Reconciled> {
        let plugin = &self.session.registration.name;
        self.reconciled += 1;
        let number = self.reconciled;
        let within = step.map(|s| format!(" (in {s:?})")).unwrap_or_default();
        if number > self.max_reconciles {
            self.problems.push(format!(
                "plugin {plugin}: keys still queued after {} reconciles (--max-reconciles), \
                 next {key}{within}: do its writes keep waking its own watches?",
                self.max_reconciles
            ));
            return None;
        }
        let cluster = &self.session.cluster;
        cluster.trace(format!("reconcile {key}"));
        let called = self.session.reconcile(&key).await;
        cluster.reconciled();
        let at = self.timed.then(|| at_time(self.queue.now()));
        if cluster.take_crash() {
            // The host starts again: its queue is gone, its informers list anew.
            self.queue.restart();
            self.queue.add(self.session.initial_keys());
            let result = "crashed after a write (--faults crash); the host started again".into();
            let key = key.to_string();
            return Some(Reconciled { key, result, at });
        }
        let result = outcome_text(&called);
        if result != "done" && !result.starts_with("requeue") {
            let problem =
                format!("plugin {plugin}, step {number}{within}, reconcile of {key}: {result}");
            self.problems.push(problem);
        }
        let woken = self.session.cluster.woken_keys();
        if self.timed {
            self.schedule(&key, &called, woken.is_empty());
        }
        self.queue.add(woken);
        let key = key.to_string();
        Some(Reconciled { key, result, at })
    }

    /// Schedules what the reconcile of `key` asked for on the virtual clock; a key
    /// that asks to run again at once, `quiet` (changing nothing), too many times in
    /// a row is a loop, reported and dropped.
    fn schedule(&mut self, key: &ReconcileKey, called: &Result<Action, CallError>, quiet: bool) {
        let again = self.queue.settle(key, requeue_of(called));
        let in_place = again == Some(self.queue.now()) && quiet;
        if self.loops.looping(key, in_place) {
            let plugin = &self.session.registration.name;
            self.problems.push(format!(
                "plugin {plugin}: {key} requeues itself at once without end: {LOOP_AFTER} \
                 reconciles in a row at {}, none changing anything (`requeue-after 0`?); \
                 dropped",
                at_time(self.queue.now())
            ));
            self.queue.drop_key(key);
        }
    }
}

/// Per key, the reconciles in a row that asked to run again at once and changed
/// nothing: past [`LOOP_AFTER`] the key is a loop.
#[derive(Default)]
struct Loops(HashMap<ReconcileKey, u32>);

impl Loops {
    /// Counts a reconcile of `key` (`in_place`: it asked to run again at once and
    /// changed nothing); whether the key is a loop now.
    fn looping(&mut self, key: &ReconcileKey, in_place: bool) -> bool {
        let count = self.0.entry(key.clone()).or_default();
        *count = if in_place { *count + 1 } else { 0 };
        *count >= LOOP_AFTER
    }
}

/// A virtual time as the report shows it: `0s`, `1m 30s`, `5ms`.
fn at_time(time: Duration) -> String {
    humantime::format_duration(time).to_string()
}
