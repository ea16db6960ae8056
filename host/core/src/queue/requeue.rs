//! What the queue does with a key once its reconcile returned. The host's workers
//! and `wasm-controller-manager test` (on its queue in virtual time) both take the
//! step `requeue::requeue_of` chooses, so a plugin's test retries and requeues as
//! it will run.

use std::time::Duration;

/// The queue's next step for a key after its reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requeue {
    /// Done, or failed terminally (controller-runtime's `TerminalError`): its
    /// backoff is forgotten and nothing is scheduled; only a change queues it again.
    Forget,
    /// `requeue-after`: its backoff is forgotten and it runs again after the delay
    /// (or sooner, if a change queues it).
    After(Duration),
    /// A failure, or `requeue`: it runs again after its backoff, which keeps growing
    /// (base × 2^failures, capped) until a reconcile succeeds.
    Retry,
}
