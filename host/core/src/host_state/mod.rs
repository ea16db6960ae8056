//! Per-instance host state: the WASI context, the memory limiter and the plugin's
//! view of the cluster, and the host side of the contract's imports on it. One is made
//! for every `register` or `reconcile` call, or for every instance of a plugin whose
//! instances are reused. Below both the runtime, which makes Stores of it, and the
//! bindings, which hand the imports to it, so neither depends on the other for it.

mod call_span;
mod calls;
mod fault;
mod limiter;
mod own_calls;
mod stderr;

pub(crate) use calls::Answer;
pub use fault::HostFault;

use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{HostWallClock, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::capabilities::{CapabilityError, ClusterAccess};
use crate::logs::{LINES_BURST, LINES_PER_SECOND, LogLimiter, escape};
use crate::tape::CallTape;
use limiter::{InstanceBounds, InstanceLimits};
use stderr::GuestStderr;

/// Host-side handles (WASI streams, pollables, ...) one call may hold at once.
/// wasmtime's default is a million; a guest creating handles in a loop would grow the
/// host's memory with each.
pub const MAX_HOST_HANDLES: usize = 10_000;
/// Elements of one guest table (function pointers), as the pooling allocator's
/// default, so a table grows no further without the pool than with it.
pub const MAX_TABLE_ELEMENTS: usize = 20_000;
/// The one argument a plugin gets: its program name.
const PROGRAM_NAME: &str = "plugin";
/// Core instances one component may create: Rust plugins create 3, Go and JavaScript
/// 4, Python 14 (componentize-py links libpython's modules). Each holds a slot of the
/// shared instance pool for as long as the plugin's instance lives.
pub const MAX_CORE_INSTANCES: usize = 32;
/// Linear memories one component may define (every plugin built here defines one).
pub const MAX_MEMORIES: usize = 4;
/// Tables one component may define (every plugin built here defines two).
pub const MAX_TABLES: usize = 8;

/// The bounds on a component's shape, as a refusal states them.
pub fn shape_bounds() -> String {
    format!(
        "a plugin's component may create at most {MAX_CORE_INSTANCES} core instances, \
         {MAX_MEMORIES} memories and {MAX_TABLES} tables"
    )
}

/// Data of one Store.
pub struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    /// Caps linear memory growth; checked by wasmtime on every grow.
    pub(crate) limits: InstanceLimits,
    /// The plugin's name, for log lines.
    pub(crate) plugin: Arc<str>,
    /// The key being reconciled, for log lines; none during `register`.
    pub(crate) key: Option<String>,
    /// What the guest wrote to stderr (a Rust panic message lands here).
    pub(crate) stderr: GuestStderr,
    /// None during `register`: a plugin may not touch the cluster before it is set up.
    pub(crate) access: Option<Arc<ClusterAccess>>,
    /// The plugin's log budget.
    pub(crate) logs: Arc<LogLimiter>,
    /// The operator's settings for this version, as JSON (the `config` import).
    pub(crate) settings: Option<Arc<str>>,
    /// The current reconcile's transcript, while it is recorded or replayed.
    pub(crate) tape: Option<CallTape>,
    /// A recorded plugin's wall clock, in seconds since the Unix epoch.
    still: Arc<std::sync::atomic::AtomicU64>,
}

impl std::fmt::Debug for HostState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostState")
            .field("plugin", &self.plugin)
            .field("key", &self.key)
            .finish()
    }
}

impl HostState {
    /// State for `register` of the plugin in file `label`: no cluster, a log budget
    /// of its own.
    pub fn for_register(label: &str, max_memory_bytes: usize) -> HostState {
        let logs = LogLimiter::new(LINES_PER_SECOND, LINES_BURST, Default::default());
        HostState::new(label.into(), None, None, Arc::new(logs), max_memory_bytes)
    }

    /// State for reconciling `key` with the plugin's cluster access and budgets.
    pub fn for_reconcile(
        access: Arc<ClusterAccess>,
        key: String,
        max_memory_bytes: usize,
    ) -> HostState {
        let plugin: Arc<str> = access.plugin().into();
        let logs = access.budget().logs.clone();
        HostState::new(plugin, Some(key), Some(access), logs, max_memory_bytes)
    }

    /// This state with the version's settings.
    pub fn with_settings(mut self, settings: Option<Arc<str>>) -> HostState {
        self.settings = settings;
        self
    }

    /// State for one call. WASI gets no preopened directories, no sockets, no
    /// environment, and only a program name as its arguments (`plugin`: Go's and other
    /// runtimes' libraries read `argv[0]` at start, and Go's klog panics without it):
    /// a plugin sees the cluster only through imports.
    fn new(
        plugin: Arc<str>,
        key: Option<String>,
        access: Option<Arc<ClusterAccess>>,
        logs: Arc<LogLimiter>,
        max_memory_bytes: usize,
    ) -> HostState {
        let stderr = GuestStderr::default();
        let mut wasi = WasiCtxBuilder::new();
        wasi.arg(PROGRAM_NAME)
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .stderr(stderr.clone());
        if let Some(now) = access.as_ref().and_then(|a| a.fixed_clock()) {
            wasi.wall_clock(FixedClock(now));
        }
        // A recorded plugin's clock stands still during each reconcile, at the whole
        // second it began, so its replay can show it the same time.
        let recorded = access.as_ref().is_some_and(|a| a.recorder().is_some());
        let still = recorded.then(|| Arc::new(std::sync::atomic::AtomicU64::new(0)));
        if let Some(cell) = &still {
            wasi.wall_clock(StillClock(cell.clone()));
        }
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_HOST_HANDLES);
        HostState {
            wasi: wasi.build(),
            table,
            limits: InstanceLimits::new(InstanceBounds {
                memory_bytes: max_memory_bytes,
                table_elements: MAX_TABLE_ELEMENTS,
                core_instances: MAX_CORE_INSTANCES,
                memories: MAX_MEMORIES,
                tables: MAX_TABLES,
            }),
            plugin,
            key,
            stderr,
            access,
            logs,
            settings: None,
            tape: None,
            still: still.unwrap_or_default(),
        }
    }

    /// Starts the next reconcile in a reused instance: its key, and a stderr capture
    /// of its own (a trap's message is the last call's).
    pub(crate) fn begin_call(&mut self, key: String) {
        self.key = Some(key);
        self.stderr.clear();
    }

    /// Stops a recorded plugin's wall clock at the whole second now, for the
    /// reconcile that begins; returns that time.
    pub(crate) fn stop_clock(&self) -> std::time::SystemTime {
        let now = std::time::SystemTime::now();
        let seconds = now
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        self.still
            .store(seconds, std::sync::atomic::Ordering::Relaxed);
        std::time::UNIX_EPOCH + Duration::from_secs(seconds)
    }

    /// The end of what the guest wrote to stderr (a panic message, usually), on one
    /// line with control characters escaped, without Rust's hint about
    /// `RUST_BACKTRACE`.
    pub fn stderr_tail(&self) -> Option<String> {
        const TAIL_CHARS: usize = 512;
        let bytes = self.stderr.last_bytes();
        let text = String::from_utf8_lossy(&bytes);
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("note: run with `RUST_BACKTRACE"))
            .collect();
        let joined = lines.join(" ");
        let skip = joined.chars().count().saturating_sub(TAIL_CHARS);
        let tail: String = joined.chars().skip(skip).collect();
        let cut = if skip > 0 || self.stderr.dropped() > 0 {
            "…"
        } else {
            ""
        };
        (!tail.is_empty()).then(|| format!("{cut}{}", escape(&tail)))
    }

    /// The plugin's cluster access, or `unavailable` during `register`.
    pub fn access(&self) -> Result<&ClusterAccess, CapabilityError> {
        self.access.as_deref().ok_or_else(no_cluster_in_register)
    }

    /// The plugin's cluster access, shared, for a call that outlives a borrow of the
    /// state (a host call's future must be `Send`; the state is not `Sync`).
    pub(crate) fn shared_access(&self) -> Result<Arc<ClusterAccess>, CapabilityError> {
        self.access.clone().ok_or_else(no_cluster_in_register)
    }
}

/// A wall clock that stands still where its cell says (seconds since the epoch).
struct StillClock(Arc<std::sync::atomic::AtomicU64>);

impl HostWallClock for StillClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }

    fn now(&self) -> Duration {
        Duration::from_secs(self.0.load(std::sync::atomic::Ordering::Relaxed))
    }
}

/// A wall clock that stands still at a time since the Unix epoch.
struct FixedClock(Duration);

impl HostWallClock for FixedClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }

    fn now(&self) -> Duration {
        self.0
    }
}

fn no_cluster_in_register() -> CapabilityError {
    CapabilityError::Unavailable(
        "the cluster cannot be used from register(); use it in reconcile()".into(),
    )
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

#[cfg(test)]
mod tests {
    use wasmtime::component::{Component, Linker};
    use wasmtime::{Config, Engine, Store};

    use super::*;

    /// A component whose `grow` adds `n` elements to a table and returns its old size.
    const GROWS_A_TABLE: &str = r#"(component
        (core module $m
            (table $t 1 funcref)
            (func (export "grow") (param i32) (result i32)
                (table.grow $t (ref.null func) (local.get 0))))
        (core instance $i (instantiate $m))
        (func (export "grow") (param "n" u32) (result s32) (canon lift (core func $i "grow"))))"#;

    #[test]
    fn a_table_grows_no_further_than_its_bound_without_the_pooling_allocator() {
        let mut config = Config::new();
        config.wasm_component_model(true);
        let engine = Engine::new(&config).expect("engine"); // on-demand allocation
        let component = Component::new(&engine, GROWS_A_TABLE).expect("component");
        let mut store = Store::new(&engine, HostState::for_register("table-test", 1 << 20));
        store.limiter(|s| &mut s.limits);
        let instance = Linker::new(&engine)
            .instantiate(&mut store, &component)
            .expect("instance");
        let grow = instance
            .get_typed_func::<(u32,), (i32,)>(&mut store, "grow")
            .expect("grow");
        let below = (MAX_TABLE_ELEMENTS - 1) as u32;
        assert_eq!(grow.call(&mut store, (below,)).expect("within bound"), (1,));
        let err = grow.call(&mut store, (1,)).expect_err("past the bound");
        assert!(
            format!("{err:?}").contains("forcing trap when growing table"),
            "{err:?}"
        );
    }

    #[test]
    fn host_handles_are_bounded() {
        let mut state = HostState::for_register("handles-test", 1 << 20);
        let table = state.ctx().table;
        assert_eq!(table.max_capacity(), MAX_HOST_HANDLES);
    }
}
