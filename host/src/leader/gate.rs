//! Whether this replica may act right now: the one switch workers and writes consult.

use tokio::sync::watch;

/// A view of this replica's leadership. Workers take keys only while it is open and
/// cancel in-flight reconciles when it closes; writes are refused while it is closed.
///
/// Without leader election the gate is always open. With it, the campaign opens it
/// on acquiring the Lease and closes it on losing or releasing; once the campaign is
/// over a closed gate stays closed.
#[derive(Debug, Clone)]
pub struct LeaderGate(watch::Receiver<bool>);

impl LeaderGate {
    /// A gate that is always open: leader election is off and this replica acts.
    pub fn always_open() -> LeaderGate {
        LeaderGate(watch::channel(true).1)
    }

    /// A gate following `leading` (true while this replica leads).
    pub fn following(leading: watch::Receiver<bool>) -> LeaderGate {
        LeaderGate(leading)
    }

    /// Whether this replica leads now.
    pub fn is_open(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves once this replica leads; never, if the campaign ended without it.
    pub async fn opened(&mut self) {
        if self.0.wait_for(|leading| *leading).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Resolves once this replica does not lead (at once if it does not now); never
    /// for a gate that is always open.
    pub async fn closed(&mut self) {
        if self.0.wait_for(|leading| !*leading).await.is_err() {
            std::future::pending::<()>().await;
        }
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
}
