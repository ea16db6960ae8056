//! Host settings with their defaults, shared by the CLI and the tests.

use std::path::PathBuf;
use std::time::Duration;

use crate::queue::Backoff;

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
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            reconcile_timeout: Duration::from_secs(30),
            max_memory_bytes: 64 << 20,
            max_concurrent_reconciles: 4,
            pooling: true,
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
}
