//! Which of a plugin's informers watch on this replica: all of them, always, with one
//! Lease for the replica (a standby keeps warm caches); only while this replica holds
//! the plugin, with a Lease per plugin. Elsewhere the plugin keeps its informers, but
//! not their watches or caches (an informer another plugin still holds runs on).

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use wcm_core::kube::informer::{Informer, InformerHold};
use wcm_core::leader_gate::LeaderGate;

/// The informers of a plugin's running version, with holds taken on them while the
/// version was prepared (so an upgrade never stops a watch both versions share).
pub(super) struct Claim {
    pub informers: Vec<Arc<Informer>>,
    pub holds: Vec<InformerHold>,
}

/// Keeps a plugin's informers held while its gate wants them.
pub(super) struct CacheClaim {
    versions: mpsc::UnboundedSender<Claim>,
    task: JoinHandle<()>,
}

impl CacheClaim {
    /// Starts following `gate` for `first`, the plugin's first version.
    pub fn start(gate: LeaderGate, first: Claim) -> CacheClaim {
        let (versions, next) = mpsc::unbounded_channel();
        let _ = versions.send(first);
        CacheClaim {
            versions,
            task: tokio::spawn(follow(gate, next)),
        }
    }

    /// A new version took over: its informers are held from now on (as wanted), and
    /// the old version's released.
    pub fn upgrade(&self, claim: Claim) {
        let _ = self.versions.send(claim);
    }
}

impl Drop for CacheClaim {
    /// Releases every hold: the plugin stopped.
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Holds the current version's informers while `gate` wants them: always for a
/// replica's gate, while open (or draining) for a plugin's own.
async fn follow(gate: LeaderGate, mut versions: mpsc::UnboundedReceiver<Claim>) {
    let Some(mut claim) = versions.recv().await else {
        return;
    };
    let follows = gate.is_plugins_own();
    loop {
        let wanted = !follows || gate.is_open();
        match (wanted, claim.holds.is_empty()) {
            (true, true) => claim.holds = claim.informers.iter().map(|i| i.hold()).collect(),
            (false, false) => claim.holds.clear(),
            _ => {}
        }
        let (mut opened, mut closed) = (gate.clone(), gate.clone());
        tokio::select! {
            next = versions.recv() => match next {
                Some(next) => claim = next,
                None => return,
            },
            () = opened.opened(), if !wanted => {}
            () = closed.closed(), if wanted && follows => {}
        }
    }
}
