//! Instances kept across reconciles, for plugins the operator opts in
//! (`--plugin-override NAME:reuse-instance-calls=N`): one worker reconciles key after
//! key in one instance instead of a fresh one per key, and retires it after a
//! failure, after N calls, or once its memory has grown too far.
//!
//! The trade-off (docs/isolation.md): what one reconcile leaves in the instance's
//! memory — globals, caches, leaks, a corrupted heap — is seen by the next reconciles
//! of the same worker. Other plugins and other versions never share an instance.

use std::sync::Arc;

use wasmtime::Store;

use super::plugin::{capped, with_stderr};
use super::{CallError, HostState, PluginCode};
use crate::bindings::ContractInstance;
use crate::capabilities::ClusterAccess;
use crate::contract::Action;
use crate::keys::ReconcileKey;
pub use crate::limits::Recycle;
use crate::tape::{CallTape, Replayed, TapedCall};

/// A reconcile's outcome as reports and transcripts write it: `done`,
/// `requeue-after 30s`, `requeue`, or the error with its case (`error: forbidden:
/// ...`, `terminal error: invalid: ...`, `trapped: ...`).
pub fn outcome_text(result: &Result<Action, CallError>) -> String {
    match result {
        Ok(Action::Done) => "done".into(),
        Ok(Action::RequeueAfter(ms)) => {
            let after = humantime::format_duration(std::time::Duration::from_millis(*ms));
            format!("requeue-after {after}")
        }
        Ok(Action::Requeue) => "requeue".into(),
        Err(CallError::Guest(f)) if f.terminal => format!("terminal error: {}", f.error),
        Err(CallError::Guest(f)) => format!("error: {}", f.error),
        Err(e) => e.to_string(),
    }
}

/// When a reused instance is retired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReusePolicy {
    /// Reconciles one instance serves at most.
    pub max_calls: u32,
    /// Growth of its linear memory, since the end of its first reconcile, that
    /// retires it.
    pub max_growth_bytes: usize,
}

impl ReusePolicy {
    /// An instance for one call: every reconcile's, unless the operator opts in.
    pub const ONE_CALL: ReusePolicy = ReusePolicy {
        max_calls: 1,
        max_growth_bytes: usize::MAX,
    };
}

/// One instance of a plugin version serving reconcile after reconcile (or a single
/// one: a fresh instance is one retired after its first call).
pub struct ReusedInstance {
    code: PluginCode,
    store: Store<HostState>,
    /// Made by the first reconcile, inside its deadline (start functions run then).
    instance: Option<ContractInstance>,
    policy: ReusePolicy,
    calls: u32,
    /// Linear memory after the first reconcile.
    baseline: Option<usize>,
}

impl ReusedInstance {
    /// An instance of `code` that reconciles with `access` until `policy` retires it.
    pub fn new(code: &PluginCode, access: Arc<ClusterAccess>, policy: ReusePolicy) -> Self {
        let limits = code.limits();
        let state = HostState::for_reconcile(access, String::new(), limits.max_memory_bytes)
            .with_settings(code.settings());
        ReusedInstance {
            store: code.store(state),
            code: code.clone(),
            instance: None,
            policy,
            calls: 0,
            baseline: None,
        }
    }

    /// Reconciles `key` in a fresh instance of `code` with its cluster access: an
    /// instance made for this one call.
    pub async fn reconcile_once(
        code: &PluginCode,
        access: Arc<ClusterAccess>,
        key: &ReconcileKey,
    ) -> Result<Action, CallError> {
        let mut instance = ReusedInstance::new(code, access, ReusePolicy::ONE_CALL);
        instance.reconcile(key).await.0
    }

    /// Reconciles `key` in this instance, under the same deadline and limits as a
    /// fresh one. Returns the outcome and, when this instance must serve no further
    /// call, why.
    pub async fn reconcile(
        &mut self,
        key: &ReconcileKey,
    ) -> (Result<Action, CallError>, Option<Recycle>) {
        let ReusedInstance {
            code,
            store,
            instance,
            ..
        } = self;
        code.arm(store);
        store.data_mut().begin_call(key.to_string());
        let recorder = (store.data().access.as_ref()).and_then(|a| a.recorder().cloned());
        if let Some(recorder) = &recorder {
            store.data_mut().tape = Some(recorder.tape());
        }
        let began = store.data().stop_clock();
        let request = key.to_request();
        let result = code
            .bounded(async {
                if instance.is_none() {
                    let made = code.pre().instantiate(store).await;
                    *instance = Some(made.map_err(|e| code.failed(e))?);
                }
                let Some(instance) = instance.as_ref() else {
                    unreachable!("instantiated above")
                };
                let outcome = instance.reconcile(store, &request).await;
                let outcome = outcome.map_err(|e| code.failed(e))?;
                outcome.map_err(|f| CallError::Guest(capped(f)))
            })
            .await;
        let result = result.map_err(|e| with_stderr(e, store.data()));
        // Taken only when recording: a replay's tape stays for its caller to read.
        if let Some(recorder) = recorder
            && let Some(tape) = store.data_mut().tape.take()
        {
            recorder
                .write(key, began, outcome_text(&result), tape)
                .await;
        }
        self.calls += 1;
        let recycle = self.retire_after(&result);
        (result, recycle)
    }

    /// Replays a reconcile of `key` against the transcript's `calls`: every call the
    /// plugin makes is answered from it, strictly in order. The outcome, and what
    /// the replay found.
    pub async fn replay(
        mut self,
        key: &ReconcileKey,
        calls: Vec<TapedCall>,
    ) -> (Result<Action, CallError>, Replayed) {
        self.store.data_mut().tape = Some(CallTape::replaying(calls));
        let (result, _) = self.reconcile(key).await;
        let tape = self.store.data_mut().tape.take();
        let replayed = tape.map_or(
            Replayed {
                difference: None,
                leftover: 0,
            },
            CallTape::replayed,
        );
        (result, replayed)
    }

    /// Linear memory of this instance now, in bytes.
    pub fn memory_bytes(&self) -> usize {
        self.store.data().limits.memory_bytes()
    }

    /// Reconciles this instance has served.
    pub fn calls(&self) -> u32 {
        self.calls
    }

    /// Why this instance must not serve another call, if it must not: a trap,
    /// timeout or limit leaves it in an unknown state (an error the plugin returned
    /// does not); then its call count and its memory growth.
    fn retire_after(&mut self, result: &Result<Action, CallError>) -> Option<Recycle> {
        if matches!(result, Err(e) if !matches!(e, CallError::Guest(_))) {
            return Some(Recycle::failure);
        }
        if self.calls >= self.policy.max_calls {
            return Some(Recycle::calls);
        }
        let memory = self.store.data().limits.memory_bytes();
        let baseline = *self.baseline.get_or_insert(memory);
        (memory.saturating_sub(baseline) > self.policy.max_growth_bytes).then_some(Recycle::memory)
    }
}
