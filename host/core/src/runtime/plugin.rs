//! One compiled, pre-linked plugin, and the sandboxed calls into it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::{Store, Trap, UpdateDeadline};

use super::{Runtime, chain};
use crate::bindings::{CallFailure, ContractPre, ContractVersion};
use crate::contract::{Failure, Registration};
use crate::host_state::{HostFault, HostState, MAX_HOST_HANDLES, MAX_TABLE_ELEMENTS, shape_bounds};
use crate::limits::Limit;
use crate::metrics::FailureCause;

/// Guest code runs at most this many epoch ticks ([`super::EPOCH_TICK`] each) before
/// it yields its thread to other tasks.
const YIELD_EVERY_TICKS: u64 = 1;

/// Why a plugin file could not be loaded; the file name is added by the caller.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read: missing, not a regular file, outside the
    /// directory, too large.
    #[error(transparent)]
    Read(#[from] crate::plugin::file::PluginFileError),
    /// No Wasm magic number.
    #[error("not a WebAssembly file")]
    NotWasm,
    /// A core module, not a component.
    #[error(
        "a core WebAssembly module, not a component: build for wasm32-wasip2 \
         (or wrap it with `wasm-tools component new`)"
    )]
    CoreModule,
    /// A Wasm binary of a version this host does not know.
    #[error("unsupported WebAssembly binary version")]
    UnknownVersion,
    /// Cranelift rejected the component (truncated, malformed, unsupported feature).
    #[error("invalid component: {0}")]
    Compile(String),
    /// The compile worker produced no code: it ran past a bound, or could not run.
    #[error("not compiled: {0}")]
    Compiler(crate::runtime::worker::WorkerError),
    /// The component does not export the reconciler of a contract version this host
    /// serves.
    #[error(
        "does not export the reconciler of a contract version this host serves ({expected}; \
         exports: {found:?}); rebuild against this host's wit/"
    )]
    WrongContract {
        /// The versions this host serves.
        expected: String,
        /// What the component exports instead.
        found: Vec<String>,
    },
    /// It needs imports this host does not provide.
    #[error("cannot be linked: {0}")]
    Link(String),
    /// `register` failed.
    #[error("register() failed: {0}")]
    Register(CallError),
    /// Parked code could not be read back: its compile cache entry is gone (removed
    /// from outside the host) or no longer loads.
    #[error(
        "its compiled code (content hash {hash}) is no longer in the compile cache; \
         it is loaded again from its source"
    )]
    NotCached {
        /// The content hash of the version.
        hash: String,
    },
}

impl From<crate::runtime::worker::WorkerError> for LoadError {
    /// A component the worker's compiler refused is invalid, as one refused here is.
    fn from(e: crate::runtime::worker::WorkerError) -> LoadError {
        match e {
            crate::runtime::worker::WorkerError::Invalid(text) => LoadError::Compile(text),
            other => LoadError::Compiler(other),
        }
    }
}

/// Why one call into a plugin failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    /// The instance could not be created.
    #[error("could not instantiate: {0}")]
    Instantiate(String),
    /// The guest trapped (panic, unreachable, out-of-bounds access, ...).
    #[error("trapped: {0}")]
    Trap(String),
    /// The call ran past its deadline.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// The guest tried to grow its memory past the limit.
    #[error("exceeded its memory limit of {0} bytes")]
    MemoryLimit(usize),
    /// The guest held too many host handles or grew a table past its bound.
    #[error("exceeded its bound on host handles or table elements: {0}")]
    HandleLimit(String),
    /// The guest returned an error from `reconcile` (terminal or to be retried).
    #[error("returned an error: {}{}", .0.error, if .0.terminal { " (terminal)" } else { "" })]
    Guest(Failure),
    /// The host failed at its own part of a host call, which trapped the guest's call
    /// (see [`HostFault`]): the host's bug, not the plugin's.
    #[error("stopped by a host fault: {0}")]
    HostFault(String),
}

/// Whom a failed call is held against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blame {
    /// The plugin answered with an error: an ordinary failure, retried or terminal.
    Answered,
    /// The plugin crashed (trap, timeout, a limit, no instance): counted towards
    /// crash-looping, and towards the limit it hit, if any.
    Crashed(Option<Limit>),
    /// The host failed: retried, never counted against the plugin.
    Host,
}

impl CallError {
    /// Whom this failure is held against.
    pub fn blame(&self) -> Blame {
        match self {
            CallError::Guest(_) => Blame::Answered,
            CallError::HostFault(_) => Blame::Host,
            CallError::Timeout(_) => Blame::Crashed(Some(Limit::timeout)),
            CallError::MemoryLimit(_) => Blame::Crashed(Some(Limit::memory)),
            CallError::HandleLimit(_) => Blame::Crashed(Some(Limit::handles)),
            CallError::Trap(_) | CallError::Instantiate(_) => Blame::Crashed(None),
        }
    }

    /// The cause `wcm_reconcile_failures_total` counts it under.
    pub fn cause(&self) -> FailureCause {
        match self {
            CallError::Guest(_) => FailureCause::guest_error,
            CallError::HostFault(_) => FailureCause::host_fault,
            CallError::Timeout(_) => FailureCause::timeout,
            CallError::MemoryLimit(_) => FailureCause::memory,
            CallError::HandleLimit(_) => FailureCause::handles,
            CallError::Trap(_) => FailureCause::trap,
            CallError::Instantiate(_) => FailureCause::instantiate,
        }
    }
}

/// A plugin ready to run: pre-linked once, instantiated fresh for every call.
#[derive(Clone)]
pub struct PluginCode {
    pre: Arc<ContractPre>,
    pub(super) runtime: Arc<Runtime>,
    /// The operator's settings this version runs with.
    settings: Option<Arc<str>>,
}

impl std::fmt::Debug for PluginCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PluginCode")
    }
}

impl PluginCode {
    pub(super) fn new(pre: Arc<ContractPre>, runtime: Arc<Runtime>) -> PluginCode {
        PluginCode {
            pre,
            runtime,
            settings: None,
        }
    }

    /// This code with the operator's settings (JSON): a version of the plugin.
    pub fn with_settings(mut self, settings: Option<Arc<str>>) -> PluginCode {
        self.settings = settings;
        self
    }

    /// The contract version the plugin was built against.
    pub fn contract(&self) -> ContractVersion {
        self.pre.version()
    }

    /// A Store whose guest code gives its thread back at every epoch tick and traps
    /// once the call's deadline has passed. Without the yield a guest that never
    /// calls the host would hold a runtime worker thread until its deadline, and a
    /// few of them would stall informers, `/healthz` and every other plugin.
    pub(super) fn store(&self, state: HostState) -> Store<HostState> {
        let mut store = Store::new(self.pre.engine(), state);
        store.limiter(|s| &mut s.limits);
        store
    }

    /// Starts the deadline of one call in `store`: from now, a reconcile timeout.
    pub(super) fn arm(&self, store: &mut Store<HostState>) {
        let timeout = self.runtime.limits().reconcile_timeout;
        let deadline = Instant::now() + timeout;
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |_| {
            if Instant::now() >= deadline {
                return Ok(UpdateDeadline::Interrupt);
            }
            let turn = Box::pin(tokio::task::yield_now());
            Ok(UpdateDeadline::YieldCustom(YIELD_EVERY_TICKS, turn))
        });
    }

    /// The operator's settings this version runs with.
    pub(super) fn settings(&self) -> Option<Arc<str>> {
        self.settings.clone()
    }

    /// The pre-linked component, for instances that outlive one call.
    pub(super) fn pre(&self) -> &ContractPre {
        &self.pre
    }

    /// The host's limits on calls into plugins.
    pub(super) fn limits(&self) -> &crate::config::Limits {
        self.runtime.limits()
    }

    /// Asks a fresh instance for its registration. `label` names the plugin in logs.
    pub async fn register(&self, label: &str) -> Result<Registration, CallError> {
        let limits = self.runtime.limits();
        let state = HostState::for_register(label, limits.max_memory_bytes)
            .with_settings(self.settings.clone());
        let mut store = self.store(state);
        self.arm(&mut store);
        let result = self
            .bounded(async {
                let call = self.pre.register(&mut store).await;
                call.map_err(|e| self.failed(e))
            })
            .await;
        result.map_err(|e| with_stderr(e, store.data()))
    }

    /// Sorts a failed call by where it failed.
    pub(super) fn failed(&self, e: CallFailure) -> CallError {
        match e {
            CallFailure::Instantiate(e) => instantiate_failed(e, self.runtime.limits()),
            CallFailure::Call(e) => self.classify(e),
        }
    }

    /// Bounds a whole call, host calls included, by the deadline. Epoch interruption
    /// stops guest code that never yields; this timer stops a call waiting in a host
    /// import. The margin lets the epoch trap win when both would fire.
    pub(super) async fn bounded<T>(
        &self,
        call: impl Future<Output = Result<T, CallError>>,
    ) -> Result<T, CallError> {
        let timeout = self.runtime.limits().reconcile_timeout;
        let _ticking = self.runtime.ticking();
        tokio::time::timeout(timeout + Duration::from_millis(100), call)
            .await
            .unwrap_or(Err(CallError::Timeout(timeout)))
    }

    /// Sorts a failed call by cause, with a one-line message: the trap, or the root
    /// cause of a host-side refusal (not wasmtime's backtrace).
    fn classify(&self, e: wasmtime::Error) -> CallError {
        if let Some(fault) = e.downcast_ref::<HostFault>() {
            return CallError::HostFault(fault.to_string());
        }
        let limits = self.runtime.limits();
        if e.downcast_ref::<Trap>() == Some(&Trap::Interrupt) {
            return CallError::Timeout(limits.reconcile_timeout);
        }
        let text = chain(&e);
        if text.contains("growing memory") {
            return CallError::MemoryLimit(limits.max_memory_bytes);
        }
        let cause = e.root_cause().to_string().replace('\n', " ");
        if text.contains("growing table") || text.contains("resource table has no free keys") {
            return CallError::HandleLimit(format!(
                "{cause} (at most {MAX_HOST_HANDLES} host handles and {MAX_TABLE_ELEMENTS} \
                 table elements per call)"
            ));
        }
        match e.downcast_ref::<Trap>() {
            Some(trap) => CallError::Trap(trap.to_string()),
            None => CallError::Trap(cause),
        }
    }
}

/// Sorts a failed instantiation: memory the instance's memories and tables would
/// take past the limit, counts past the bounds on a component's shape (said whole, so
/// a plugin refused at load tells its author what to change), or another cause.
fn instantiate_failed(e: wasmtime::Error, limits: &crate::config::Limits) -> CallError {
    let text = chain(&e);
    if text.contains("growing memory") {
        return CallError::MemoryLimit(limits.max_memory_bytes);
    }
    if text.contains("count too high") {
        return CallError::Instantiate(format!("{text}: {}", shape_bounds()));
    }
    CallError::Instantiate(text)
}

/// The error a guest returned, its message and causes cut to a log line's size: the
/// text is the plugin's and ends up in the host's log.
pub(super) fn capped(failure: Failure) -> Failure {
    Failure {
        error: failure.error.capped(crate::logs::MAX_LINE_BYTES),
        terminal: failure.terminal,
    }
}

/// Adds the guest's last stderr line (its panic message) to a trap.
pub(super) fn with_stderr(error: CallError, state: &HostState) -> CallError {
    match (error, state.stderr_tail()) {
        (CallError::Trap(msg), Some(line)) => {
            CallError::Trap(format!("{msg}; guest stderr: {line}"))
        }
        (error, _) => error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::{ErrorCode, GuestError};

    #[test]
    fn only_the_plugins_own_crashes_count_against_it() {
        let answered = CallError::Guest(Failure {
            error: GuestError::new(ErrorCode::Conflict, String::from("modified")),
            terminal: false,
        });
        assert_eq!(answered.blame(), Blame::Answered);
        let fault = CallError::HostFault("host fault in get for plugin a: boom".into());
        assert_eq!(fault.blame(), Blame::Host);
        assert_eq!(fault.cause(), FailureCause::host_fault);
        let timeout = CallError::Timeout(Duration::from_secs(1));
        assert_eq!(timeout.blame(), Blame::Crashed(Some(Limit::timeout)));
        assert_eq!(
            CallError::Trap("unreachable".into()).blame(),
            Blame::Crashed(None)
        );
    }
}
