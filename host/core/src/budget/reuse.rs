//! The runtime's budget for instance reuse: how many reconciles one instance may
//! serve and how much it may grow before it is replaced (off unless the operator opts
//! a plugin in; docs/isolation.md has the trade-off).

use serde::{Deserialize, Serialize};

use super::{Part, mib, number};

/// Instance reuse.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ReuseBudget {
    /// Reconciles one instance serves before it is replaced; 0, the default, gives
    /// every reconcile a fresh instance.
    #[serde(rename = "reuse_instance_calls")]
    pub calls: u32,
    /// Growth of a reused instance's linear memory since its first reconcile that
    /// retires it, in bytes.
    #[serde(rename = "reuse_instance_growth_bytes")]
    pub growth_bytes: usize,
}

impl Default for ReuseBudget {
    /// No reuse; 8 MiB of growth when it is turned on.
    fn default() -> Self {
        ReuseBudget {
            calls: 0,
            growth_bytes: 8 << 20,
        }
    }
}

impl Part for ReuseBudget {
    const KEYS: &'static [&'static str] = &["reuse-instance-calls", "reuse-instance-growth-mib"];

    fn set(&mut self, key: &str, value: &str) -> Option<Result<(), String>> {
        Some(match key {
            "reuse-instance-calls" => number(key, value).map(|v| self.calls = v),
            "reuse-instance-growth-mib" => mib(key, value).map(|v| self.growth_bytes = v),
            _ => return None,
        })
    }
}
