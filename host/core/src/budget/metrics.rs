//! The metrics capability's budget: how many series a plugin's own metrics may have.

use serde::{Deserialize, Serialize};

use super::{Part, number};

/// The plugin's own metric series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MetricBudget {
    /// Most series across the plugin's own metrics; an update that would make one
    /// more is refused and counted.
    #[serde(rename = "max_metric_series")]
    pub max_series: usize,
}

impl Default for MetricBudget {
    fn default() -> Self {
        MetricBudget { max_series: 500 }
    }
}

impl Part for MetricBudget {
    const KEYS: &'static [&'static str] = &["max-metric-series"];

    fn set(&mut self, key: &str, value: &str) -> Option<Result<(), String>> {
        Some(match key {
            "max-metric-series" => number(key, value).map(|v| self.max_series = v),
            _ => return None,
        })
    }
}
