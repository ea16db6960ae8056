//! The cluster capability's budget: how fast a plugin may call the API server and how
//! large an answer it may ask for.

use serde::{Deserialize, Serialize};

use super::{Part, mib, number, positive};

/// API rate and answer size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ApiBudget {
    /// API requests per second, in the long run (writes, live reads, Events). In the
    /// test kit, 0: never waits.
    #[serde(rename = "api_qps")]
    pub qps: f64,
    /// API requests allowed in a burst before `qps` applies.
    #[serde(rename = "api_burst")]
    pub burst: u32,
    /// Largest answer of one call (`get`, `list`, a write's stored object), in bytes
    /// of JSON.
    pub max_result_bytes: usize,
}

impl Default for ApiBudget {
    /// controller-runtime's client defaults (QPS 20, burst 30); answers up to 32 MiB.
    fn default() -> Self {
        ApiBudget {
            qps: 20.0,
            burst: 30,
            max_result_bytes: 32 << 20,
        }
    }
}

impl Part for ApiBudget {
    const KEYS: &'static [&'static str] = &["api-qps", "api-burst", "max-result-mib"];

    fn set(&mut self, key: &str, value: &str) -> Option<Result<(), String>> {
        Some(match key {
            "api-qps" => positive(key, value).map(|v| self.qps = v),
            "api-burst" => number(key, value).map(|v| self.burst = v),
            "max-result-mib" => mib(key, value).map(|v| self.max_result_bytes = v),
            _ => return None,
        })
    }
}
