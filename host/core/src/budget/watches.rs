//! The registration's budget: how many watches a plugin may declare, and how much of
//! the host's informer caches they may hold.

use serde::{Deserialize, Serialize};

use super::{Part, mib, number};

/// Watches and what they cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct WatchBudget {
    /// Most watches one registration may declare.
    pub max_watches: usize,
    /// Bytes of the host's caches the plugin's watches may hold (shared informers
    /// divided among their users); past it the plugin is stopped.
    pub max_cache_bytes: usize,
}

impl Default for WatchBudget {
    /// 16 watches; 1 GiB of cache, a hundred thousand Pods' worth of JSON.
    fn default() -> Self {
        WatchBudget {
            max_watches: 16,
            max_cache_bytes: 1 << 30,
        }
    }
}

impl Part for WatchBudget {
    const KEYS: &'static [&'static str] = &["max-watches", "max-cache-mib"];

    fn set(&mut self, key: &str, value: &str) -> Option<Result<(), String>> {
        Some(match key {
            "max-watches" => number(key, value).map(|v| self.max_watches = v),
            "max-cache-mib" => mib(key, value).map(|v| self.max_cache_bytes = v),
            _ => return None,
        })
    }
}
