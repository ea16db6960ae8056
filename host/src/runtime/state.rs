//! Per-instance host state: the WASI context, the memory limiter and the plugin's
//! view of the cluster. One is made for every `register` or `reconcile` call.

use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime::{StoreLimits, StoreLimitsBuilder};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

/// Bytes of guest stderr kept per call: enough for a panic message, bounded so a
/// plugin cannot fill the host's memory by printing.
const STDERR_CAPACITY: usize = 16 * 1024;

use crate::capabilities::{CapabilityError, ClusterAccess};

/// Data of one Store.
pub struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    /// Caps linear memory growth; checked by wasmtime on every grow.
    pub(crate) limits: StoreLimits,
    /// The plugin's name, for log lines.
    pub(crate) plugin: Arc<str>,
    /// The key being reconciled, for log lines; none during `register`.
    pub(crate) key: Option<String>,
    /// What the guest wrote to stderr (a Rust panic message lands here).
    pub(crate) stderr: MemoryOutputPipe,
    /// None during `register`: a plugin may not touch the cluster before it is set up.
    access: Option<Arc<ClusterAccess>>,
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
    /// State for one call. WASI gets no preopened directories, no sockets, no
    /// environment and no arguments: a plugin sees the cluster only through imports.
    pub fn new(
        plugin: Arc<str>,
        key: Option<String>,
        access: Option<Arc<ClusterAccess>>,
        max_memory_bytes: usize,
    ) -> HostState {
        let stderr = MemoryOutputPipe::new(STDERR_CAPACITY);
        let mut wasi = WasiCtxBuilder::new();
        wasi.allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .stderr(stderr.clone());
        HostState {
            wasi: wasi.build(),
            table: ResourceTable::new(),
            limits: StoreLimitsBuilder::new()
                .memory_size(max_memory_bytes)
                .trap_on_grow_failure(true)
                .build(),
            plugin,
            key,
            stderr,
            access,
        }
    }

    /// The end of what the guest wrote to stderr (a panic message, usually), on one
    /// line, without Rust's hint about `RUST_BACKTRACE`.
    pub fn stderr_tail(&self) -> Option<String> {
        const TAIL_CHARS: usize = 512;
        let bytes = self.stderr.contents();
        let text = String::from_utf8_lossy(&bytes);
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("note: run with `RUST_BACKTRACE"))
            .collect();
        let joined = lines.join(" ");
        let skip = joined.chars().count().saturating_sub(TAIL_CHARS);
        (!joined.is_empty()).then(|| joined.chars().skip(skip).collect())
    }

    /// The plugin's cluster access, or `unavailable` during `register`.
    pub fn access(&self) -> Result<&ClusterAccess, CapabilityError> {
        self.access.as_deref().ok_or_else(|| {
            CapabilityError::Unavailable(
                "the cluster cannot be used from register(); use it in reconcile()".into(),
            )
        })
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}
