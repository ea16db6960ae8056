//! The workers of one plugin: each takes keys from the plugin's queue and reconciles
//! them with the version of the plugin that is current when the key is taken, so an
//! upgrade swaps the code between two keys and never inside one. A worker of a plugin
//! the operator opted into instance reuse keeps its instance between keys.

use std::sync::Arc;
use std::time::Instant;

use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::watch;
use tracing::Instrument;

use wcm_core::capabilities::ClusterAccess;
use wcm_core::contract::Action;
use wcm_core::keys::ReconcileKey;
use wcm_core::kube::informer::Informer;
use wcm_core::leader_gate::LeaderGate;
use wcm_core::metrics::{Metrics, PluginLabels, ReconcileResult};
use wcm_core::queue::WorkQueue;
use wcm_core::runtime::{
    Blame, CallError, PluginCode, Recycle, ResidentCode, ReusePolicy, ReusedInstance,
};
use wcm_core::traces::TARGET;

use super::health::CrashLoop;
use wcm_core::requeue::requeue_of;

/// One loaded version of a plugin, as the workers use it.
pub struct Version {
    /// The compiled code, parked while another replica holds the plugin.
    pub code: Arc<ResidentCode>,
    /// The cluster as this version may see it (its caches, its grants).
    pub access: Arc<ClusterAccess>,
    /// The informers this version reads; dispatch waits for their first list.
    pub informers: Vec<Arc<Informer>>,
    /// How many workers this version runs.
    pub concurrency: usize,
    /// Traps and timeouts in a row of this version (a new version starts afresh).
    pub crashes: Arc<CrashLoop>,
}

/// One worker; worker `index` retires when the current version runs fewer workers.
pub struct Worker {
    /// Position among the plugin's workers.
    pub index: usize,
    /// The plugin's queue, shared across versions.
    pub queue: WorkQueue<ReconcileKey>,
    /// The current version.
    pub current: watch::Receiver<Arc<Version>>,
    /// Where reconcile counters go.
    pub metrics: Arc<Metrics>,
    /// The plugin's metric labels.
    pub labels: PluginLabels,
    /// `controller_runtime_active_workers` of the plugin.
    pub active: Gauge,
    /// Open while this replica leads (or holds the plugin's Lease); keys are taken
    /// only then, and a hand-over waits for the reconciles it counts as busy.
    pub leader: LeaderGate,
    /// The instance this worker keeps between keys, and the version it runs; only
    /// for a plugin whose budget reuses instances.
    pub reused: Option<(Arc<Version>, ReusedInstance)>,
}

impl Worker {
    /// Reconciles keys until the queue shuts down or this worker is retired. Keys are
    /// taken only while this replica leads; losing leadership cancels the reconcile in
    /// flight (its key goes back to the queue) before the Lease can expire.
    pub async fn run(mut self) {
        let index = self.index;
        let mut retired = self.current.clone();
        let retired = retired.wait_for(|v| v.concurrency <= index);
        tokio::pin!(retired);
        loop {
            // A crash-looping version waits out its pause before it takes a key.
            let crashes = self.current.borrow().crashes.clone();
            tokio::select! {
                biased;
                _ = &mut retired => return,
                () = self.queue.closed() => return,
                () = crashes.wait_turn() => {}
            }
            let key = tokio::select! {
                biased;
                _ = &mut retired => return,
                key = self.next_while_leading() => match key {
                    Some(key) => key,
                    None => return,
                },
            };
            let version = self.current.borrow().clone();
            let mut leader = self.leader.clone();
            let _busy = self.leader.busy();
            tokio::select! {
                () = self.sync_and_reconcile(&version, &key) => {}
                () = leader.closed() => {
                    tracing::warn!(plugin = %self.labels.plugin, key = %key,
                        "leadership lost: reconcile cancelled; the key stays queued");
                    self.queue.add(key.clone());
                }
            }
            self.queue.done(&key);
        }
    }

    /// The next key, taken only while the gate is open; `None` once the queue shuts down.
    /// A kept instance goes while the gate is closed: its memory is the plugin's, and
    /// the plugin runs elsewhere.
    async fn next_while_leading(&mut self) -> Option<ReconcileKey> {
        loop {
            if !self.leader.is_open() {
                self.reused = None;
            }
            tokio::select! {
                biased;
                () = self.queue.closed() => return None,
                () = self.leader.opened() => {}
            }
            let mut leader = self.leader.clone();
            tokio::select! {
                biased;
                () = leader.paused() => continue,
                key = self.queue.next() => return key,
            }
        }
    }

    async fn sync_and_reconcile(&mut self, version: &Arc<Version>, key: &ReconcileKey) {
        for informer in &version.informers {
            informer.wait_synced().await;
        }
        self.reconcile(version, key).await;
    }

    async fn reconcile(&mut self, version: &Arc<Version>, key: &ReconcileKey) {
        let started = Instant::now();
        self.active.inc();
        let span = self.span_of(key);
        let policy = reuse_policy(&version.access.budget().budget);
        let called = self
            .reconcile_reusing(version, policy.unwrap_or(ReusePolicy::ONE_CALL), key)
            .instrument(span.clone())
            .await;
        self.active.dec();
        let plugin = self.labels.plugin.as_str();
        let retry_in = self.queue.settle(key, requeue_of(&called));
        let outcome = match called {
            Ok(action) => {
                version.crashes.succeeded();
                tracing::debug!(plugin, key = %key, ?action, "reconciled");
                match action {
                    Action::Done => ReconcileResult::success,
                    Action::Requeue | Action::RequeueAfter(0) => ReconcileResult::requeue,
                    Action::RequeueAfter(_) => ReconcileResult::requeue_after,
                }
            }
            Err(CallError::Guest(failure)) if failure.terminal => {
                // controller-runtime's TerminalError: recorded, not retried until the
                // key is queued again by a change.
                version.crashes.succeeded();
                tracing::error!(plugin, key = %key, error = %failure.error,
                    "reconcile failed terminally; not retried until the object changes");
                self.metrics.terminal_error(plugin);
                ReconcileResult::error
            }
            Err(error) => {
                tracing::error!(plugin, key = %key, %error, ?retry_in, "reconcile failed");
                self.count_failure(version, &error);
                ReconcileResult::error
            }
        };
        self.metrics.reconciled(plugin, outcome, started.elapsed());
        if !span.is_disabled() {
            span.record("result", format!("{outcome:?}"));
            if outcome == ReconcileResult::error {
                span.record("otel.status_code", "error");
            }
        }
    }

    /// The span of one reconcile of `key` (exported with `--otlp-endpoint`; the host
    /// calls it makes are its children).
    fn span_of(&self, key: &ReconcileKey) -> tracing::Span {
        let plugin = self.labels.plugin.as_str();
        let span = tracing::info_span!(target: TARGET, "reconcile",
            otel.name = %format_args!("reconcile {plugin}"), plugin, key = %key,
            result = tracing::field::Empty, queue_wait_seconds = tracing::field::Empty,
            otel.status_code = tracing::field::Empty);
        if !span.is_disabled()
            && let Some(waited) = self.queue.waited(key)
        {
            span.record("queue_wait_seconds", waited.as_secs_f64());
        }
        span
    }

    /// Reconciles `key` in the worker's kept instance, made anew when there is none or
    /// it runs another version. An instance retired by its policy is dropped; one
    /// whose call is cancelled (leadership lost) is dropped with the call.
    async fn reconcile_reusing(
        &mut self,
        version: &Arc<Version>,
        policy: ReusePolicy,
        key: &ReconcileKey,
    ) -> Result<Action, CallError> {
        let plugin = self.labels.plugin.as_str();
        let mut instance = match self.reused.take() {
            Some((v, instance)) if Arc::ptr_eq(&v, version) => instance,
            kept => {
                if kept.is_some() {
                    self.metrics.instance_recycled(plugin, Recycle::upgrade);
                }
                let code = code_of(version, plugin, &self.metrics).await?;
                ReusedInstance::new(&code, version.access.clone(), policy)
            }
        };
        let (called, recycle) = instance.reconcile(key).await;
        self.metrics
            .instance_memory(plugin, instance.memory_bytes());
        match recycle {
            // A fresh instance for each reconcile is the rule, not a recycling.
            Some(_) if policy == ReusePolicy::ONE_CALL => {}
            Some(reason) => {
                tracing::debug!(plugin, key = %key, ?reason, calls = instance.calls(),
                    "reused instance retired");
                self.metrics.instance_recycled(plugin, reason);
            }
            None => self.reused = Some((version.clone(), instance)),
        }
        called
    }

    /// Counts a trap, timeout or memory overrun towards crash-looping and its limit;
    /// an error the plugin returned is an ordinary failure, and a host fault is the
    /// host's, never held against the plugin.
    fn count_failure(&self, version: &Version, error: &CallError) {
        self.metrics.call_failed(&self.labels.plugin, error.cause());
        let Blame::Crashed(limit) = error.blame() else {
            return;
        };
        if let Some(limit) = limit {
            version.access.budget().hit(limit);
        }
        if let Some(pause) = version.crashes.crashed(&error.to_string()) {
            tracing::warn!(plugin = %self.labels.plugin, ?pause,
                why = %version.crashes.looping().unwrap_or_default(),
                "plugin crash-looping: reconciles paused");
        }
    }
}

/// The version's code, read back from the compile cache if it was parked. Failing to
/// read it back is the host's failure, not the plugin's: the key is retried, and the
/// manager loads the plugin's source again.
async fn code_of(
    version: &Version,
    plugin: &str,
    metrics: &Metrics,
) -> Result<PluginCode, CallError> {
    let resumed = (version.code.get().await).map_err(|e| CallError::HostFault(e.to_string()))?;
    if let Some(took) = resumed.read_back {
        super::residency::read_back_took(plugin, took, metrics);
    }
    Ok(resumed.code)
}

/// When a worker's instance is retired, if the operator opted the plugin into reusing
/// instances (`reuse-instance-calls`).
fn reuse_policy(budget: &wcm_core::budget::Budget) -> Option<ReusePolicy> {
    (budget.reuse.calls > 0).then_some(ReusePolicy {
        max_calls: budget.reuse.calls,
        max_growth_bytes: budget.reuse.growth_bytes,
    })
}
