//! Host settings with their defaults, shared by the CLI and the tests.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::tape::Recorder;
use std::path::PathBuf;
use std::time::Duration;

use crate::budget::BudgetSettings;
use crate::queue::Backoff;

/// The default of [`Limits::pool_keep_resident_bytes`]: with [`Limits::pool_pagemap_scan`]
/// only the pages an instance touched are zeroed in place, so a plugin that touches
/// little memory costs its next instance no page faults and no `madvise` (a fresh Rust
/// instance 54 → 15 µs), and each warm slot keeps at most this much resident: 128 KiB
/// and 8 MiB are as fast for a Rust plugin, and 1 MiB cost a replica of the nine
/// benchmark plugins 39 MiB (see docs/benchmarks.md).
pub const DEFAULT_KEEP_RESIDENT: usize = 256 << 10;

/// Limits applied to every plugin instance.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Wall-clock budget of one `reconcile` (or `register`) call, host calls included.
    pub reconcile_timeout: Duration,
    /// Maximum linear memory of one instance, in bytes.
    pub max_memory_bytes: usize,
    /// Upper bound on a plugin's declared `max-concurrent-reconciles`.
    pub max_concurrent_reconciles: u32,
    /// Use wasmtime's pooling allocator (pre-reserved, reused instance slots).
    pub pooling: bool,
    /// Bytes of each pooled linear memory and table kept resident when its instance
    /// ends, reset with `memset` rather than handed back to the kernel; the next
    /// instance in the slot then takes no page faults on them (0: wasmtime's default,
    /// hand everything back).
    pub pool_keep_resident_bytes: usize,
    /// Reset a pooled memory by scanning for the pages its instance touched
    /// (Linux's `PAGEMAP_SCAN`, kernel 6.7 and later; ignored elsewhere) and zeroing
    /// only those, up to `pool_keep_resident_bytes`, instead of assuming the first
    /// bytes were touched.
    pub pool_pagemap_scan: bool,
    /// Largest plugin file read (`--max-plugin-file-mib`): a file is read whole into
    /// memory and compiled, so its size is memory and CPU the host spends.
    pub max_plugin_file_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            reconcile_timeout: Duration::from_secs(30),
            max_memory_bytes: 64 << 20,
            max_concurrent_reconciles: 4,
            pooling: true,
            pool_keep_resident_bytes: DEFAULT_KEEP_RESIDENT,
            pool_pagemap_scan: true,
            max_plugin_file_bytes: 128 << 20,
        }
    }
}

/// Everything `wasm-controller-manager run` needs.
#[derive(Debug, Clone)]
pub struct ManagerConfig {
    /// Directory scanned for `*.wasm` plugin components.
    pub plugins_dir: PathBuf,
    /// Limits per plugin instance.
    pub limits: Limits,
    /// How failed reconciles are retried.
    pub retry: Backoff,
    /// How long in-flight reconciles may run on shutdown before they are abandoned.
    pub shutdown_grace: Duration,
    /// Identity of this host in Events (`reportingInstance`): pod name or hostname.
    pub instance: String,
    /// Directory of compiled plugins, keyed by content hash; none to always compile.
    pub compile_cache: Option<PathBuf>,
    /// Most bytes of entries the compile cache keeps (least recently used go first).
    pub compile_cache_max_bytes: u64,
    /// Compile in child processes of this program (the daemon: `run` sets its own
    /// binary); none to compile in this process (offline tools, tests of the library).
    pub compile_worker: Option<WorkerProgram>,
    /// How long a plugin file must stay unchanged before it is loaded.
    pub settle: Duration,
    /// How long a new version's informers may take to list before its upgrade fails.
    pub sync_timeout: Duration,
    /// How often a plugin waiting for a kind the API server does not serve yet (a CRD
    /// not installed) tries again.
    pub missing_kind_retry: Duration,
    /// How often a running plugin's rights are reviewed again, and the longest a
    /// plugin refused for a missing rule waits before it tries again.
    pub access_review_interval: Duration,
    /// Every plugin's API rate, result size, watch and log budgets.
    pub budgets: BudgetSettings,
    /// Where `WasmPlugin`s are followed and pulled to; none to follow none.
    pub wasm_plugins: Option<WasmPluginSource>,
    /// The plugins whose reconciles are recorded, by name (`--record-plugin`).
    pub recorders: BTreeMap<String, Arc<Recorder>>,
}

/// The `WasmPlugin`s a host follows, and how it pulls them.
#[derive(Debug, Clone)]
pub struct WasmPluginSource {
    /// The namespace of the `WasmPlugin`s and of their pull Secrets: the host's own.
    pub namespace: String,
    /// Where pulled plugins are kept by digest.
    pub pulled_dir: PathBuf,
    /// Most bytes of pulled plugins kept there (least recently used go first).
    pub pulled_max_bytes: u64,
    /// How registries are reached (CAs, plain http), which are allowed, and the
    /// bounds of what they may send.
    pub registry: crate::registry::RegistryOptions,
    /// PEM files of public keys every `WasmPlugin` must be signed by.
    pub verify_keys: Vec<PathBuf>,
}

impl ManagerConfig {
    /// Defaults for everything but the plugins directory and the instance name.
    pub fn new(plugins_dir: PathBuf, instance: &str) -> ManagerConfig {
        ManagerConfig {
            plugins_dir,
            limits: Limits::default(),
            retry: Backoff::default(),
            shutdown_grace: Duration::from_secs(30),
            instance: instance.to_string(),
            compile_cache: None,
            compile_cache_max_bytes: DEFAULT_COMPILE_CACHE_MAX_BYTES,
            compile_worker: None,
            settle: Duration::from_millis(500),
            sync_timeout: Duration::from_secs(60),
            missing_kind_retry: Duration::from_secs(5),
            access_review_interval: Duration::from_secs(60),
            budgets: BudgetSettings::default(),
            wasm_plugins: None,
            recorders: BTreeMap::new(),
        }
    }
}

/// What one compilation may cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompileBounds {
    /// Most bytes of data the worker may map (`--compile-max-memory-mib`).
    pub max_memory_bytes: u64,
    /// Longest one compilation may take (`--compile-timeout`).
    pub timeout: Duration,
}

impl Default for CompileBounds {
    /// 768 MiB: about twice the Python example's peak, and under the chart's 1 GiB
    /// container limit with the daemon beside it, so a worker over it is refused by
    /// its own bound, not killed by the kernel's OOM killer.
    fn default() -> CompileBounds {
        CompileBounds {
            max_memory_bytes: 768 << 20,
            timeout: Duration::from_secs(300),
        }
    }
}

/// Which program runs as the worker, under which bounds (the daemon's settings).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerProgram {
    /// The host's own binary (`std::env::current_exe`), run as `program compile-worker`.
    pub program: PathBuf,
    /// What one compilation may cost.
    pub bounds: CompileBounds,
}

/// How much the compile cache holds unless told otherwise: some thirty Python
/// plugins' entries, hundreds of Rust ones.
pub const DEFAULT_COMPILE_CACHE_MAX_BYTES: u64 = 1 << 30;

/// `$XDG_CACHE_HOME/wasm-controller-manager/compiled`, else under `~/.cache`, else
/// under the temporary directory (a container without a home).
pub fn default_compile_cache() -> PathBuf {
    cache_base().join("compiled")
}

/// `$XDG_CACHE_HOME/wasm-controller-manager/pulled`, beside the compile cache.
pub fn default_pulled_dir() -> PathBuf {
    cache_base().join("pulled")
}

fn cache_base() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("wasm-controller-manager")
}
