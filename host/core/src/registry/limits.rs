//! What a registry may send the host, where a pull may go, and how much pulling runs
//! at once: the bounds every answer is read within, whatever the registry (or whoever
//! names a registry in a `WasmPlugin`) sends.
//!
//! Each bound is checked as the bytes arrive, so a registry that sends without end
//! costs the bound, never the host's memory. A manifest is at most 4 MiB (containerd's
//! bound, about the 4 MB the OCI distribution spec asks registries to accept); a token
//! reply or an error body at most 64 KiB; a request follows at most 10 redirects
//! (containerd's count). A pull as a whole has a deadline, because a registry that
//! drips a byte a second never trips a per-read timeout; and pulls share two limits:
//! how many run at once, and how many bytes of components they hold together.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

/// Largest manifest read, in bytes: containerd's `4 * 1048 * 1048`.
pub const MAX_MANIFEST_BYTES: u64 = 4 * 1048 * 1048;
/// Largest token reply or error body read, in bytes.
pub const MAX_SMALL_ANSWER_BYTES: u64 = 64 << 10;
/// Most redirects one request follows.
pub const MAX_REDIRECTS: usize = 10;
/// How long one pull (resolving, signatures, manifest and component) may take.
pub const DEFAULT_PULL_TIMEOUT: Duration = Duration::from_secs(300);
/// How many pulls run at once; the rest wait (within their deadline).
pub const DEFAULT_CONCURRENT_PULLS: usize = 4;
/// How many bytes of components the pulls in flight hold together.
pub const DEFAULT_PULL_MEMORY_BYTES: u64 = 256 << 20;
/// Most signature layers read from one signature artifact.
pub const MAX_SIGNATURES: usize = 16;
/// Largest signature payload read, in bytes.
pub const MAX_SIGNATURE_BYTES: u64 = 64 << 10;

/// The bounds of one registry client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryLimits {
    /// Largest manifest read.
    pub max_manifest_bytes: u64,
    /// Largest token reply or error body read.
    pub max_small_answer_bytes: u64,
    /// Most redirects a request follows.
    pub max_redirects: usize,
    /// How long one pull may take from its first request to its last byte
    /// (`--registry-pull-timeout`).
    pub pull_timeout: Duration,
    /// How many pulls run at once (`--registry-max-concurrent-pulls`).
    pub max_concurrent_pulls: usize,
    /// How many bytes of components the pulls in flight hold together
    /// (`--registry-max-pull-mib`).
    pub max_pull_memory_bytes: u64,
}

impl Default for RegistryLimits {
    fn default() -> RegistryLimits {
        RegistryLimits {
            max_manifest_bytes: MAX_MANIFEST_BYTES,
            max_small_answer_bytes: MAX_SMALL_ANSWER_BYTES,
            max_redirects: MAX_REDIRECTS,
            pull_timeout: DEFAULT_PULL_TIMEOUT,
            max_concurrent_pulls: DEFAULT_CONCURRENT_PULLS,
            max_pull_memory_bytes: DEFAULT_PULL_MEMORY_BYTES,
        }
    }
}

/// How a registry client reaches registries, and which it may reach.
#[derive(Debug, Clone, Default)]
pub struct RegistryOptions {
    /// PEM files of CAs to trust besides the system's.
    pub ca_files: Vec<PathBuf>,
    /// Registries (`host[:port]`) spoken to over plain http: the operator's choice,
    /// for a registry without TLS (a local `registry:2`); every other is https only,
    /// redirects and token realms included.
    pub plain_http: BTreeSet<String>,
    /// The registries pulls may name (`--allowed-registries`); all when `None`.
    pub allowed: Option<BTreeSet<String>>,
    /// The bounds.
    pub limits: RegistryLimits,
}

impl RegistryOptions {
    /// Options trusting the CAs in `ca_files`, with the default bounds.
    pub fn with_ca_files(ca_files: &[PathBuf]) -> RegistryOptions {
        RegistryOptions {
            ca_files: ca_files.to_vec(),
            ..RegistryOptions::default()
        }
    }

    /// Whether a pull may name `registry` (a host, with its port if any).
    pub fn allows(&self, registry: &str) -> bool {
        self.allowed.as_ref().is_none_or(|a| a.contains(registry))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_registry_is_allowed_until_the_operator_names_some() {
        let mut options = RegistryOptions::default();
        assert!(options.allows("r.example:5000"));
        options.allowed = Some(["r.example:5000".to_string()].into());
        assert!(options.allows("r.example:5000"));
        assert!(!options.allows("r.example"), "the port is part of the name");
        assert!(!options.allows("elsewhere.example"));
    }
}
