//! What `/readyz` and `/healthz` answer, as the kubelet's probes ask.
//!
//! Ready: the plugins found at start have loaded (or failed) and every informer they
//! need has its first list, or is failing (a plugin without its RBAC must not keep the
//! host from being ready: it is `degraded` in the plugin table instead). Standbys are
//! ready too. Healthy: unless this replica leads and has not renewed its Lease for the
//! lease duration plus 20 s, as client-go's `HealthzAdaptor` judges, so the kubelet
//! restarts a leader whose renewal loop is wedged.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

/// Beyond the lease duration, how long a leader may go without renewing before
/// `/healthz` fails (client-go's adaptor timeout in kube-controller-manager).
pub const RENEWAL_SLACK: Duration = Duration::from_secs(20);

/// When this replica last renewed its Lease, written by the campaign.
pub type LastRenewal = Arc<Mutex<Option<Instant>>>;

#[derive(Debug)]
struct Renewals {
    last: LastRenewal,
    leading: watch::Receiver<bool>,
    allowed: Duration,
}

#[derive(Debug)]
struct State {
    ready: Result<(), String>,
    renewals: Option<Renewals>,
}

/// The probes' answers, shared by the manager, the election and the HTTP endpoint.
#[derive(Debug, Clone)]
pub struct Probes {
    state: Arc<Mutex<State>>,
}

impl Default for Probes {
    fn default() -> Self {
        Probes {
            state: Arc::new(Mutex::new(State {
                ready: Err("starting".into()),
                renewals: None,
            })),
        }
    }
}

impl Probes {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sets readiness: `Err` says what is still missing.
    pub fn set_ready(&self, ready: Result<(), String>) {
        self.lock().ready = ready;
    }

    /// Whether this replica is ready, or what it waits for.
    pub fn readiness(&self) -> Result<(), String> {
        self.lock().ready.clone()
    }

    /// Watches the campaign: while `leading`, a renewal older than `lease_duration`
    /// plus [`RENEWAL_SLACK`] makes this replica unhealthy.
    pub fn watch_renewals(
        &self,
        last: LastRenewal,
        leading: watch::Receiver<bool>,
        lease_duration: Duration,
    ) {
        self.lock().renewals = Some(Renewals {
            last,
            leading,
            allowed: lease_duration + RENEWAL_SLACK,
        });
    }

    /// Whether this replica is healthy, or why not.
    pub fn liveness(&self) -> Result<(), String> {
        let state = self.lock();
        let Some(r) = &state.renewals else {
            return Ok(());
        };
        if !*r.leading.borrow() {
            return Ok(());
        }
        let last = *r.last.lock().unwrap_or_else(|p| p.into_inner());
        match last.map(|at| at.elapsed()) {
            Some(ago) if ago > r.allowed => Err(format!(
                "leader election: this replica leads but last renewed its Lease {ago:.1?} ago \
                 (more than {:?})",
                r.allowed
            )),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leader_that_stopped_renewing_is_unhealthy_and_a_standby_never_is() {
        let probes = Probes::default();
        assert_eq!(probes.readiness(), Err("starting".into()));
        assert_eq!(probes.liveness(), Ok(()), "no election: healthy");
        let last: LastRenewal = Arc::new(Mutex::new(Some(Instant::now())));
        let (leading, rx) = watch::channel(true);
        probes.watch_renewals(last.clone(), rx, Duration::from_millis(10));
        assert_eq!(probes.liveness(), Ok(()));
        *last.lock().expect("lock") = Some(Instant::now() - Duration::from_secs(31));
        let err = probes.liveness().expect_err("stale renewal");
        assert!(err.contains("last renewed its Lease"), "{err}");
        leading.send_replace(false);
        assert_eq!(probes.liveness(), Ok(()), "a standby renews nothing");
        probes.set_ready(Ok(()));
        assert_eq!(probes.readiness(), Ok(()));
    }
}
