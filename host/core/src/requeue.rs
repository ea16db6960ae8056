//! What becomes of a key once its reconcile returned: one rule, followed by the
//! host's workers on the real queue and by `wasm-controller-manager test` on its
//! queue in virtual time, so a plugin's test retries and requeues as it will run.

use std::time::Duration;

use crate::contract::Action;
use crate::queue::Requeue;
use crate::runtime::CallError;

/// The queue's step for a reconcile's `result`.
pub fn requeue_of(result: &Result<Action, CallError>) -> Requeue {
    match result {
        Ok(Action::Done) => Requeue::Forget,
        Ok(Action::RequeueAfter(ms)) => Requeue::After(Duration::from_millis(*ms)),
        Ok(Action::Requeue) => Requeue::Retry,
        Err(CallError::Guest(failure)) if failure.terminal => Requeue::Forget,
        Err(_) => Requeue::Retry,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::{ErrorCode, Failure, GuestError};

    fn failed(terminal: bool) -> Result<Action, CallError> {
        let error = GuestError::new(ErrorCode::Other, "boom");
        Err(CallError::Guest(Failure { error, terminal }))
    }

    #[test]
    fn success_forgets_a_delay_schedules_and_failures_and_requeues_back_off() {
        assert_eq!(requeue_of(&Ok(Action::Done)), Requeue::Forget);
        let after = requeue_of(&Ok(Action::RequeueAfter(30_000)));
        assert_eq!(after, Requeue::After(Duration::from_secs(30)));
        assert_eq!(requeue_of(&Ok(Action::Requeue)), Requeue::Retry);
        assert_eq!(requeue_of(&failed(false)), Requeue::Retry);
        assert_eq!(requeue_of(&failed(true)), Requeue::Forget, "terminal");
    }
}
