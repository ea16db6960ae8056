//! One replica's campaign: become leader, keep renewing, and say at once when the
//! lease can no longer be trusted, so the caller stops acting before it can expire.
//!
//! A lost lease ends the campaign (the caller exits non-zero and the pod restarts, as
//! kube-controller-manager does): a replica that was cut off may have reconciles
//! half done, and a fresh start with fresh caches is the simplest safe state.
//!
//! The campaign runs on a thread and a runtime of its own (`thread`), with its own
//! API client.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

use super::config::{ElectionConfig, JITTER_FACTOR};
use super::elector::{Attempt, Elector};
use super::thread::OwnThread;
use crate::probes::LastRenewal;
use wcm_core::metrics::Metrics;

/// Why a leader stopped leading.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Lost {
    /// Another candidate holds the Lease now (it was overwritten or taken over).
    #[error("the lease is held by {0} now")]
    TakenBy(String),
    /// No renewal succeeded within the renew deadline.
    #[error("could not renew the lease within the renew deadline ({0:?})")]
    RenewDeadline(Duration),
    /// The campaign task itself failed (a panic); treated as lost.
    #[error("the election task failed: {0}")]
    Failed(String),
}

/// A running campaign. `leading` turns true on acquiring and false on losing or
/// stopping; `stop` releases the Lease if held.
pub struct Campaign {
    /// Whether this replica leads right now.
    pub leading: watch::Receiver<bool>,
    /// When this replica last acquired or renewed the Lease (for `/healthz`).
    pub last_renewal: LastRenewal,
    thread: OwnThread<Result<(), Lost>>,
}

impl Campaign {
    /// Starts campaigning on a thread of its own under `config`. `elector` is called
    /// on that thread, so the API client it builds runs there too (a kube client's
    /// connection worker lives on the runtime that creates it). The leader gauges in
    /// `metrics` follow what this candidate sees.
    pub fn start<F>(elector: F, config: ElectionConfig, metrics: Arc<Metrics>) -> Campaign
    where
        F: FnOnce() -> Result<Elector, String> + Send + 'static,
    {
        let (leading_tx, leading) = watch::channel(false);
        let last_renewal = LastRenewal::default();
        metrics.set_leading(&config.lease_name, false);
        let observer = Observer {
            metrics,
            holder: None,
            last_renewal: last_renewal.clone(),
        };
        let thread = OwnThread::start("leader-election", move |stopped| async move {
            let elector = elector().map_err(Lost::Failed)?;
            run(elector, config, observer, leading_tx, stopped).await
        });
        Campaign {
            leading,
            last_renewal,
            thread,
        }
    }

    /// Waits until the campaign ends on its own: the lease was lost.
    pub async fn lost(&mut self) -> Lost {
        match self.thread.ended().await {
            Ok(Err(lost)) => lost,
            Ok(Ok(())) => std::future::pending().await, // stopped: never "lost"
            Err(no_runtime) => Lost::Failed(no_runtime),
        }
    }

    /// Stops campaigning and releases the Lease if this replica holds it.
    pub async fn stop(mut self) {
        self.thread.stop().await;
    }
}

async fn run(
    mut elector: Elector,
    config: ElectionConfig,
    mut observer: Observer,
    leading: watch::Sender<bool>,
    mut stopped: oneshot::Receiver<()>,
) -> Result<(), Lost> {
    let acquired = tokio::select! {
        sent = acquire(&mut elector, &config, &mut observer) => sent,
        _ = &mut stopped => return Ok(()),
    };
    // The metric first: whoever sees the state change also sees it counted.
    observer.metrics.set_leading(&config.lease_name, true);
    leading.send_replace(true);
    tracing::info!(identity = elector.identity(), lease = %config.lease_name, "became leader");
    let outcome = tokio::select! {
        lost = renew(&mut elector, &config, &mut observer, acquired) => Err(lost),
        _ = &mut stopped => Ok(()),
    };
    observer.metrics.set_leading(&config.lease_name, false);
    leading.send_replace(false);
    match &outcome {
        Err(lost) => tracing::error!(identity = elector.identity(), %lost, "leadership lost"),
        Ok(()) => match elector.release().await {
            Ok(()) => tracing::info!(identity = elector.identity(), "lease released"),
            Err(e) => tracing::warn!(error = %e, "could not release the lease; it will expire"),
        },
    }
    outcome
}

/// Logs and exports the holder and transitions this candidate last saw.
struct Observer {
    metrics: Arc<Metrics>,
    holder: Option<String>,
    last_renewal: LastRenewal,
}

impl Observer {
    /// Notes a successful acquire or renewal.
    fn renewed(&self) {
        let mut last = self.last_renewal.lock().unwrap_or_else(|p| p.into_inner());
        *last = Some(std::time::Instant::now());
    }

    fn saw(&mut self, elector: &Elector) {
        let Some(record) = elector.observed() else {
            return;
        };
        self.metrics
            .observed_leader(&record.holder, record.transitions);
        if self.holder.as_deref() != Some(record.holder.as_str()) {
            let holder = if record.holder.is_empty() {
                "none"
            } else {
                &record.holder
            };
            tracing::info!(
                leader = holder,
                transitions = record.transitions,
                identity = elector.identity(),
                "lease holder changed"
            );
            self.holder = Some(record.holder.clone());
        }
    }
}

/// Tries every jittered retry period, and at once whenever the Lease is released,
/// until this candidate holds the Lease; returns when the winning write was sent.
async fn acquire(
    elector: &mut Elector,
    config: &ElectionConfig,
    observer: &mut Observer,
) -> Instant {
    let mut releases = std::pin::pin!(elector.releases());
    loop {
        let sent = Instant::now();
        let attempt = elector.try_acquire_or_renew().await;
        observer.saw(elector);
        match attempt {
            Ok(Attempt::Leading) => {
                observer.renewed();
                return sent;
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "cannot reach the lease; retrying"),
        }
        tokio::select! {
            _ = tokio::time::sleep(jittered(config.retry_period)) => {}
            Some(()) = releases.next() => tracing::debug!("the lease is free; trying now"),
        }
    }
}

/// Renews every retry period; returns when the lease can no longer be trusted. Each
/// attempt is bounded by what is left of the renew deadline, so a hung request
/// cannot keep the leader acting past it. The deadline counts from when the last
/// successful renewal was *sent*: a standby may see that write before its answer
/// reaches us, and its view of expiry must never run ahead of ours.
async fn renew(
    elector: &mut Elector,
    config: &ElectionConfig,
    observer: &mut Observer,
    acquired: Instant,
) -> Lost {
    let mut renewed = acquired;
    loop {
        tokio::time::sleep(config.retry_period).await;
        let deadline = renewed + config.renew_deadline;
        let sent = Instant::now();
        let attempt = tokio::time::timeout_at(deadline, elector.try_acquire_or_renew()).await;
        observer.saw(elector);
        match attempt {
            Ok(Ok(Attempt::Leading)) => {
                observer.renewed();
                renewed = sent;
            }
            Ok(Ok(Attempt::Following { holder })) => return Lost::TakenBy(holder),
            Ok(Ok(Attempt::LostRace)) | Ok(Err(_)) if Instant::now() < deadline => {}
            _ => return Lost::RenewDeadline(config.renew_deadline),
        }
    }
}

/// `period` stretched by a random factor in [1, JITTER_FACTOR), as client-go does, so
/// candidates that started together do not keep colliding.
pub(super) fn jittered(period: Duration) -> Duration {
    period.mul_f64(1.0 + fastrand::f64() * (JITTER_FACTOR - 1.0))
}
