//! The log capability's budget: how many lines a plugin may write.

use serde::{Deserialize, Serialize};

use super::{Part, number, positive};
use crate::logs::{LINES_BURST, LINES_PER_SECOND};

/// Log lines.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LogBudget {
    /// Log lines per second, in the long run; more are dropped and counted.
    #[serde(rename = "log_lines_per_second")]
    pub lines_per_second: f64,
    /// Log lines allowed in a burst.
    #[serde(rename = "log_burst")]
    pub burst: u32,
}

impl Default for LogBudget {
    fn default() -> Self {
        LogBudget {
            lines_per_second: LINES_PER_SECOND,
            burst: LINES_BURST,
        }
    }
}

impl Part for LogBudget {
    const KEYS: &'static [&'static str] = &["log-rate", "log-burst"];

    fn set(&mut self, key: &str, value: &str) -> Option<Result<(), String>> {
        Some(match key {
            "log-rate" => positive(key, value).map(|v| self.lines_per_second = v),
            "log-burst" => number(key, value).map(|v| self.burst = v),
            _ => return None,
        })
    }
}
