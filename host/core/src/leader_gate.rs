//! Whether this replica may act right now: the one switch workers and writes consult.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::watch;

/// Where a plugin stands in a per-plugin election.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateState {
    /// Another replica holds the plugin (or none does): no keys, no writes; a
    /// reconcile in flight is cancelled.
    Closed,
    /// This replica hands the plugin over: no new keys, but reconciles in flight
    /// finish and may write.
    Draining,
    /// This replica holds the plugin's Lease: it reconciles.
    Open,
}

/// A view of this replica's leadership, over everything it runs or over one plugin.
/// Workers take keys only while it is open and cancel in-flight reconciles when it
/// closes; writes are refused while it is closed.
///
/// Without leader election the gate is always open. With one Lease, the campaign
/// opens it on acquiring and closes it on losing or releasing; once the campaign is
/// over a closed gate stays closed. With a Lease per plugin, the election opens,
/// drains and closes each plugin's gate on its own.
#[derive(Debug, Clone)]
pub struct LeaderGate {
    state: Source,
    /// Reconciles in flight behind this gate, so a hand-over knows when they are done.
    busy: Arc<AtomicUsize>,
    /// Held while the gate is in use: a plugin's gate is "wanted" while its
    /// controller keeps one (per-plugin mode).
    _user: Option<Arc<()>>,
}

#[derive(Debug, Clone)]
enum Source {
    /// One Lease for the replica (or none: always true).
    Replica(watch::Receiver<bool>),
    /// One Lease for this plugin.
    Plugin(watch::Receiver<GateState>),
}

impl LeaderGate {
    /// A gate that is always open: leader election is off and this replica acts.
    pub fn always_open() -> LeaderGate {
        LeaderGate::following(watch::channel(true).1)
    }

    /// A gate following `leading` (true while this replica leads).
    pub fn following(leading: watch::Receiver<bool>) -> LeaderGate {
        LeaderGate {
            state: Source::Replica(leading),
            busy: Arc::default(),
            _user: None,
        }
    }

    /// A plugin's gate in per-plugin mode, counting its reconciles in `busy` and
    /// holding `user` while in use.
    pub fn of_plugin(
        state: watch::Receiver<GateState>,
        busy: Arc<AtomicUsize>,
        user: Arc<()>,
    ) -> LeaderGate {
        LeaderGate {
            state: Source::Plugin(state),
            busy,
            _user: Some(user),
        }
    }

    /// Whether writes are allowed now: this replica leads (or drains).
    pub fn is_open(&self) -> bool {
        match &self.state {
            Source::Replica(leading) => *leading.borrow(),
            Source::Plugin(state) => *state.borrow() != GateState::Closed,
        }
    }

    /// Whether this is one plugin's gate (a Lease per plugin). Such a plugin's caches
    /// are kept only while the gate is open: a replica that does not run it has no use
    /// for them. With one Lease for the replica a standby keeps its caches warm, so
    /// that taking over needs no list.
    pub fn is_plugins_own(&self) -> bool {
        matches!(self.state, Source::Plugin(_))
    }

    /// Resolves once keys may be taken; never, if the campaign ended without it.
    pub async fn opened(&mut self) {
        self.until(true, GateState::Open, true).await
    }

    /// Resolves once keys may no longer be taken (at once if they may not now);
    /// never for a gate that is always open.
    pub async fn paused(&mut self) {
        self.until(false, GateState::Open, false).await
    }

    /// Resolves once nothing may be written (at once if nothing may now): a
    /// reconcile in flight is to be cancelled. Never for an always-open gate.
    pub async fn closed(&mut self) {
        self.until(false, GateState::Closed, true).await
    }

    /// Counts a reconcile in flight until the guard is dropped.
    pub fn busy(&self) -> Busy {
        self.busy.fetch_add(1, Ordering::SeqCst);
        Busy(self.busy.clone())
    }

    /// Waits until the replica's flag is `leading`, or the plugin's state is (`is`
    /// true) or is not (`is` false) `state`. A campaign that ended leaves the gate as
    /// it was: waiting for a change then waits forever.
    async fn until(&mut self, leading: bool, state: GateState, is: bool) {
        let ended = match &mut self.state {
            Source::Replica(rx) => rx.wait_for(|l| *l == leading).await.is_err(),
            Source::Plugin(rx) => rx.wait_for(|s| (*s == state) == is).await.is_err(),
        };
        if ended {
            std::future::pending::<()>().await;
        }
    }
}

/// A reconcile in flight behind a gate; dropping it says it is done.
#[must_use = "the reconcile counts as in flight until this is dropped"]
pub struct Busy(Arc<AtomicUsize>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}
#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    async fn resolves(f: impl Future<Output = ()>) -> bool {
        tokio::time::timeout(Duration::from_millis(50), f)
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn an_always_open_gate_never_closes() {
        let mut gate = LeaderGate::always_open();
        assert!(gate.is_open());
        assert!(resolves(gate.opened()).await);
        assert!(!resolves(gate.closed()).await);
    }

    #[tokio::test]
    async fn the_gate_follows_the_campaign() {
        let (tx, rx) = watch::channel(false);
        let mut gate = LeaderGate::following(rx);
        assert!(!resolves(gate.opened()).await, "opened before leading");
        tx.send_replace(true);
        assert!(resolves(gate.opened()).await);
        assert!(!resolves(gate.closed()).await, "closed while leading");
        tx.send_replace(false);
        assert!(resolves(gate.closed()).await);
        drop(tx);
        assert!(
            !resolves(gate.opened()).await,
            "reopened after the campaign ended"
        );
        assert!(resolves(gate.closed()).await);
    }

    #[tokio::test]
    async fn a_draining_plugin_takes_no_keys_but_finishes_and_writes() {
        let (tx, rx) = watch::channel(GateState::Open);
        let mut gate = LeaderGate::of_plugin(rx, Arc::default(), Arc::new(()));
        assert!(resolves(gate.opened()).await);
        assert!(!resolves(gate.paused()).await, "paused while open");
        tx.send_replace(GateState::Draining);
        assert!(
            resolves(gate.paused()).await,
            "a draining plugin takes no keys"
        );
        assert!(
            !resolves(gate.closed()).await,
            "its reconciles in flight go on"
        );
        assert!(gate.is_open(), "and may write");
        tx.send_replace(GateState::Closed);
        assert!(resolves(gate.closed()).await);
        assert!(!gate.is_open());
    }
}
