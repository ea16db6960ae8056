//! One running plugin: its watches feed its queue, its workers reconcile the keys, and
//! a new version of its code can take over the queue without dropping a key.

mod health;
mod residency;
mod rights;
mod watches;
mod worker;

use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::leader::Leadership;
pub use health::Health;
use health::{CrashLoop, health_of};
use residency::{Claim, Residency};
pub use rights::ForbiddenError;
use rights::{DeclaredRights, keep_reviewing, review_at_load};
use watches::Watches;
use wcm_core::budget::{BudgetSettings, PluginBudget};
use wcm_core::capabilities::ClusterAccess;
use wcm_core::contract::Registration;
use wcm_core::keys::ReconcileKey;
use wcm_core::kube::discovery::DiscoveryError;
use wcm_core::kube::informer::{InformerHold, InformerRegistry};
use wcm_core::leader_gate::LeaderGate;
use wcm_core::metrics::plugin::PluginMetrics;
use wcm_core::metrics::standard::ControllerLabels;
use wcm_core::metrics::{Metrics, PluginLabels};
use wcm_core::queue::{Backoff, WorkQueue};
use wcm_core::rights::access::{AccessReviewer, ReviewError};
use wcm_core::rights::identity::{IdentityError, PluginIdentities};
use wcm_core::rights::{Granted, Review};
use wcm_core::runtime::{Loaded, ResidentCode};
use worker::{Version, Worker};

/// Why a registered plugin could not start, or a new version could not take over.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The registration breaks a rule (name, empty watches, ...).
    #[error("invalid registration: {0}")]
    Registration(String),
    /// A watched or owner kind is not served by the API server.
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
    /// The plugin's own API client could not be built.
    #[error(transparent)]
    Identity(#[from] IdentityError),
    /// Its ServiceAccount may not list or watch what it watches.
    #[error(transparent)]
    Forbidden(Box<ForbiddenError>),
    /// Its rights could not be reviewed.
    #[error(transparent)]
    Review(Box<ReviewError>),
    /// A new version's informers did not complete their first list in time.
    #[error("its watches did not sync within {0:?}")]
    SyncTimeout(Duration),
}

impl From<wcm_core::plugin::InvalidRegistration> for StartError {
    fn from(e: wcm_core::plugin::InvalidRegistration) -> StartError {
        StartError::Registration(e.0)
    }
}

impl From<ReviewError> for StartError {
    fn from(e: ReviewError) -> StartError {
        StartError::Review(Box::new(e))
    }
}

/// Shared parts every plugin controller is started with.
#[derive(Clone)]
pub struct ControllerContext {
    /// The host's client, and each plugin's for its writes and Events (its own
    /// ServiceAccount when the host impersonates plugins).
    pub identities: PluginIdentities,
    /// Shared informers.
    pub registry: Arc<InformerRegistry>,
    /// This host's identity, the `reportingInstance` of Events.
    pub instance: String,
    /// Host cap on concurrent reconciles per plugin.
    pub max_concurrent_reconciles: u32,
    /// Retry policy of every plugin's queue.
    pub retry: Backoff,
    /// Where reconcile, queue and informer counters go.
    pub metrics: Arc<Metrics>,
    /// How long a new version's informers may take to sync before the upgrade fails.
    pub sync_timeout: Duration,
    /// What plugins act behind: informers run regardless, dispatch and writes only
    /// while a plugin's gate is open.
    pub leader: Leadership,
    /// Every plugin's budgets (defaults and per-plugin overrides).
    pub budgets: BudgetSettings,
    /// Reviews plugins' rights when they act as their own ServiceAccounts.
    pub reviewer: Option<AccessReviewer>,
    /// How often a running plugin's rights are reviewed again.
    pub review_every: Duration,
    /// The plugins whose reconciles are recorded, by name.
    pub recorders: std::collections::BTreeMap<String, Arc<wcm_core::tape::Recorder>>,
}

/// A plugin whose watches and workers are running.
pub struct PluginController {
    registration: Registration,
    /// The plugin's budgets, kept across upgrades.
    budget: Arc<PluginBudget>,
    queue: WorkQueue<ReconcileKey>,
    watches: Watches,
    current: watch::Sender<Arc<Version>>,
    /// Worker tasks by index; a retired or finished one is replaced when needed.
    workers: Vec<JoinHandle<()>>,
    /// Reviews the running version's rights again and again, if they are reviewed.
    reviewing: Option<JoinHandle<()>>,
    /// The gate this plugin acts behind (kept for its life: in per-plugin mode the
    /// plugin is wanted on this replica while it is).
    leader: LeaderGate,
    /// Holds the running version's informers and code while the gate wants them.
    residency: Residency,
    ctx: ControllerContext,
}

/// A registration checked and its informers acquired (and, for a plugin that
/// replaces a running one, synced): what [`PluginController::start`] and
/// [`PluginController::upgrade`] need, prepared off the manager's loop.
pub struct Prepared {
    registration: Registration,
    watches: Watches,
    /// The client the plugin's writes and Events are made with.
    client: Client,
    /// What its ServiceAccount was granted at load (everything when it shares the
    /// host's identity), and the rules to review again while it runs.
    granted: Arc<Granted>,
    declared: Option<Arc<DeclaredRights>>,
    /// How long the review of its rights took (zero when nothing is reviewed).
    review: Duration,
    /// The informers' watches, held while they synced (for a version taking over).
    holds: Vec<InformerHold>,
}

impl Prepared {
    /// The claim on its informers' caches a running version holds, taken out of
    /// it: the informers, and the holds kept while they synced.
    fn take_claim(&mut self, code: Arc<ResidentCode>) -> Claim {
        Claim {
            informers: self.watches.informers(),
            holds: std::mem::take(&mut self.holds),
            code,
        }
    }

    /// Validates `registration` and acquires an informer per watch (starting or
    /// sharing one). With `synced`, also waits (up to the sync timeout) until every
    /// informer has its first list, as a version taking over a running plugin must.
    pub async fn new(
        registration: Registration,
        ctx: &ControllerContext,
        synced: bool,
    ) -> Result<Prepared, StartError> {
        wcm_core::plugin::validate(&registration, &ctx.budgets.for_plugin(&registration.name))?;
        let client = ctx.identities.client_for(&registration.name)?;
        let reviewing = std::time::Instant::now();
        let (declared, granted) = match &ctx.reviewer {
            Some(reviewer) => {
                let resolver = ctx.registry.resolver();
                let (declared, granted) = review_at_load(&registration, reviewer, resolver).await?;
                (Some(Arc::new(declared)), Arc::new(granted))
            }
            None => (None, Arc::new(Granted::everything())),
        };
        let review = reviewing.elapsed();
        let watches = Watches::acquire(&registration, &ctx.registry).await?;
        // A first start leaves it to the controller to hold what its gate wants.
        let holds = if synced { watches.hold() } else { Vec::new() };
        let timeout = ctx.sync_timeout;
        if synced
            && tokio::time::timeout(timeout, watches.synced())
                .await
                .is_err()
        {
            return Err(StartError::SyncTimeout(timeout));
        }
        Ok(Prepared {
            registration,
            watches,
            client,
            granted,
            declared,
            review,
            holds,
        })
    }

    /// The registration it was prepared for.
    pub fn registration(&self) -> &Registration {
        &self.registration
    }

    /// How long the review of its rights took at load.
    pub fn review_took(&self) -> Duration {
        self.review
    }
}

impl PluginController {
    /// Starts the plugin's workers on its prepared watches; dispatch waits until
    /// every informer it needs has its first full list.
    pub fn start(
        loaded: &Loaded,
        mut prepared: Prepared,
        ctx: &ControllerContext,
    ) -> PluginController {
        let name = &prepared.registration.name.clone();
        let queue = WorkQueue::with_metrics(ctx.retry, ctx.metrics.standard.queue(name));
        let budget = ctx.budgets.for_plugin(name);
        let budget = Arc::new(PluginBudget::new(name, budget, ctx.metrics.clone()));
        let reviewing = reviewing(&prepared, ctx);
        let leader = ctx.leader.gate_for(name);
        let code = Arc::new(ResidentCode::new(loaded));
        let claim = prepared.take_claim(code.clone());
        let residency = Residency::start(name, leader.clone(), claim, ctx.metrics.clone());
        let version = version(code, &prepared, &budget, &leader, ctx);
        let Prepared {
            registration,
            mut watches,
            granted,
            ..
        } = prepared;
        let resync = resync_period(&registration);
        watches.attach(&queue, &registration.name, &ctx.metrics, resync, granted);
        let mut controller = PluginController {
            current: watch::channel(Arc::new(version)).0,
            registration,
            budget,
            queue,
            watches,
            workers: Vec::new(),
            reviewing,
            leader,
            residency,
            ctx: ctx.clone(),
        };
        controller.spawn_workers();
        controller
    }

    /// The registration of the running version.
    pub fn registration(&self) -> &Registration {
        &self.registration
    }

    /// Whether the plugin works: its watches, and whether it is crash-looping.
    pub fn health(&self) -> Health {
        let version = self.current.borrow();
        health_of(
            &version.informers,
            &version.crashes,
            version.access.granted(),
        )
    }

    /// The running version's rights: declared rules against denied ones, if its
    /// ServiceAccount's rights are reviewed (not when it shares the host's identity).
    pub fn review(&self) -> Option<Review> {
        self.current.borrow().access.granted().review()
    }

    /// Whether an informer the running version watches with is still on its first
    /// list (and not failing: a failing one makes the plugin degraded, not unready).
    /// Informers that do not watch here (the plugin runs on another replica) are not
    /// waited for.
    pub fn syncing(&self) -> bool {
        let version = self.current.borrow();
        (version.informers.iter())
            .any(|i| i.is_running() && !i.is_synced() && i.problem().is_none())
    }

    /// Bytes of the host's caches the plugin's watches hold (shared informers divided
    /// among their users).
    pub fn cache_bytes(&self) -> usize {
        self.watches.cache_bytes()
    }

    /// Whether the running version's parked code could not be read back (its compile
    /// cache entry was removed from outside): its source must be loaded again.
    pub fn code_lost(&self) -> bool {
        self.current.borrow().code.is_lost()
    }

    /// Asks for a review of the running version's rights at once (RBAC changed).
    pub fn review_soon(&self) {
        self.current.borrow().access.granted().review_soon();
    }

    /// Retries every key in backoff now, its failures forgotten: the plugin recovered
    /// (a right came back, a watch works again, it stopped crash-looping), so what
    /// failed meanwhile is tried again at once rather than after a backoff that may
    /// have grown to minutes.
    pub fn recovered(&self) {
        self.queue.retry_failed_now();
    }

    /// Queues every cached object of each watch the plugin is served again (a right
    /// came back, a failing informer works again): what changed while it was not
    /// served queued nothing. Called at every health look.
    pub fn replay_reopened(&mut self) {
        let granted = self.current.borrow().access.granted().clone();
        self.watches.replay_reopened(&self.queue, &granted);
    }

    /// The plugin's budgets.
    pub fn budget(&self) -> &wcm_core::budget::Budget {
        &self.budget.budget
    }

    /// Brings the series that age by themselves (work in progress) up to now.
    pub fn refresh_metrics(&self) {
        self.queue.refresh_work_gauges();
    }

    /// How many workers the running version has.
    pub fn concurrency(&self) -> usize {
        self.current.borrow().concurrency
    }

    /// Hands the queue to a new version of the plugin (same name), prepared with
    /// synced watches. Reconciles running on the old version finish on it; keys
    /// taken after the swap run on the new one; no key runs on both at once, as the
    /// queue never hands out a key that is still being processed.
    pub fn upgrade(&mut self, loaded: &Loaded, mut prepared: Prepared) {
        if let Some(old) = self.reviewing.take() {
            old.abort();
        }
        self.reviewing = reviewing(&prepared, &self.ctx);
        let code = Arc::new(ResidentCode::new(loaded));
        self.residency.upgrade(prepared.take_claim(code.clone()));
        let version = version(code, &prepared, &self.budget, &self.leader, &self.ctx);
        self.current.send_replace(Arc::new(version));
        let Prepared {
            registration,
            mut watches,
            granted,
            ..
        } = prepared;
        self.watches.detach();
        let resync = resync_period(&registration);
        let metrics = &self.ctx.metrics;
        watches.attach(&self.queue, &registration.name, metrics, resync, granted);
        // The old watches (and informers no one else uses) are released here.
        self.watches = watches;
        self.registration = registration;
        self.spawn_workers();
    }

    /// Starts a worker for every index the current version runs that has none.
    fn spawn_workers(&mut self) {
        let wanted = self.current.borrow().concurrency;
        let controller = ControllerLabels {
            controller: self.registration.name.clone(),
        };
        let standard = &self.ctx.metrics.standard;
        standard.started(&controller.controller);
        let max = standard
            .max_concurrent_reconciles
            .get_or_create(&controller);
        max.set(wanted as i64);
        let active = standard.active_workers.get_or_create(&controller).clone();
        for index in 0..wanted {
            if self.workers.get(index).is_some_and(|w| !w.is_finished()) {
                continue;
            }
            let labels = PluginLabels {
                plugin: self.registration.name.clone(),
            };
            let metrics = &self.ctx.metrics;
            let worker = Worker {
                index,
                queue: self.queue.clone(),
                current: self.current.subscribe(),
                active: active.clone(),
                metrics: metrics.clone(),
                labels,
                leader: self.leader.clone(),
                reused: None,
            };
            let task = tokio::spawn(worker.run());
            match self.workers.get_mut(index) {
                Some(slot) => *slot = task,
                None => self.workers.push(task),
            }
        }
    }

    /// Stops taking work, waits up to `grace` for in-flight reconciles, then
    /// releases the plugin's informers.
    pub async fn stop(mut self, grace: Duration) {
        if let Some(reviewing) = self.reviewing.take() {
            reviewing.abort();
        }
        self.watches.detach();
        self.queue.shut_down();
        let workers = std::mem::take(&mut self.workers);
        let aborts: Vec<_> = workers.iter().map(JoinHandle::abort_handle).collect();
        let drained = tokio::time::timeout(grace, futures::future::join_all(workers)).await;
        if drained.is_err() {
            tracing::warn!(plugin = %self.registration.name, ?grace,
                "in-flight reconciles did not finish within the grace period; abandoned");
            aborts.iter().for_each(tokio::task::AbortHandle::abort);
        }
        self.ctx.metrics.forget_plugin(&self.registration.name);
        self.ctx
            .metrics
            .plugin_metrics
            .remove(&self.registration.name);
    }
}

impl Drop for PluginController {
    fn drop(&mut self) {
        self.queue.shut_down();
        self.workers.iter().for_each(JoinHandle::abort);
        if let Some(reviewing) = &self.reviewing {
            reviewing.abort();
        }
    }
}

/// Starts reviewing a prepared version's rights every review interval, if they are
/// reviewed at all.
fn reviewing(prepared: &Prepared, ctx: &ControllerContext) -> Option<JoinHandle<()>> {
    let reviewer = ctx.reviewer.clone()?;
    let declared = prepared.declared.clone()?;
    let plugin = prepared.registration.name.clone();
    let granted = prepared.granted.clone();
    let every = ctx.review_every;
    Some(tokio::spawn(keep_reviewing(
        reviewer, plugin, declared, granted, every,
    )))
}

/// The workers' view of one loaded version.
fn version(
    code: Arc<ResidentCode>,
    prepared: &Prepared,
    budget: &Arc<PluginBudget>,
    leader: &LeaderGate,
    ctx: &ControllerContext,
) -> Version {
    let registration = &prepared.registration;
    let informers = prepared.watches.informers();
    let access = ClusterAccess::live(
        budget.clone(),
        &ctx.instance,
        ctx.registry.clone(),
        prepared.client.clone(),
        (informers.clone(), prepared.granted.clone()),
        wcm_core::capabilities::grants(registration),
        leader.clone(),
    );
    // A version's own metrics, from zero, in place of the one before it.
    let plugin_metrics = Arc::new(PluginMetrics::new(
        &registration.name,
        &registration.metrics,
        budget.budget.metrics.max_series,
    ));
    ctx.metrics.plugin_metrics.insert(plugin_metrics.clone());
    let recorder = ctx.recorders.get(&registration.name).cloned();
    let access = access.with_metrics(plugin_metrics).with_recorder(recorder);
    let concurrency = match registration.max_concurrent_reconciles {
        0 => ctx.max_concurrent_reconciles,
        n => n.min(ctx.max_concurrent_reconciles),
    };
    let failures = ctx
        .metrics
        .plugin_consecutive_failures
        .get_or_create(&PluginLabels {
            plugin: registration.name.clone(),
        });
    Version {
        code,
        access: Arc::new(access),
        informers,
        concurrency: concurrency.max(1) as usize,
        crashes: Arc::new(CrashLoop::new(failures.clone())),
    }
}

fn resync_period(registration: &Registration) -> Option<Duration> {
    registration.resync_period_ms.map(Duration::from_millis)
}
