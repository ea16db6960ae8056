//! Each plugin's budgets — what it may spend of the host and of the API server — one
//! part per capability: the cluster's API rate and answer size (`api`), its watches
//! and what they make the host cache (`watches`), its log lines (`logs`), its metric
//! series (`metrics`), and how long one instance may serve it (`reuse`).
//!
//! Each part is the one place for its keys, defaults and checks, so a new limit is a
//! field and a key in one file, and `--plugin-override NAME:KEY=VALUE` hands each key
//! to the part that declares it. The parts sit below every capability because the
//! flags, the `/plugins` table and the registration checks read them as well as the
//! capabilities that spend them; none of those has to import upward for it. What a
//! plugin has spent ([`PluginBudget`]) lives as long as the plugin (across upgrades),
//! so a new version cannot reset what the old one used.

mod api;
mod logs;
mod metrics;
mod reuse;
mod settings;
mod spent;
mod watches;

pub use api::ApiBudget;
pub use logs::LogBudget;
pub use metrics::MetricBudget;
pub use reuse::ReuseBudget;
pub use settings::{BudgetSettings, OverrideError};
pub use spent::PluginBudget;
pub use watches::WatchBudget;

use serde::{Deserialize, Serialize};

/// The budgets one plugin runs with, after overrides. Shown flat in `/plugins`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    /// The API server: request rate and answer size.
    #[serde(flatten)]
    pub api: ApiBudget,
    /// Watches: how many, and how much they may make the host cache.
    #[serde(flatten)]
    pub watches: WatchBudget,
    /// Log lines.
    #[serde(flatten)]
    pub logs: LogBudget,
    /// The plugin's own metrics.
    #[serde(flatten)]
    pub metrics: MetricBudget,
    /// Instance reuse, off by default.
    #[serde(flatten)]
    pub reuse: ReuseBudget,
}

/// One part of a budget: the `--plugin-override` keys it declares.
trait Part {
    /// Its keys, as `--plugin-override` spells them.
    const KEYS: &'static [&'static str];

    /// Sets `key` to `value` if the key is one of this part's: `None` if it is not.
    fn set(&mut self, key: &str, value: &str) -> Option<Result<(), String>>;
}

impl Budget {
    /// Every `--plugin-override` key, part by part.
    pub fn keys() -> Vec<&'static str> {
        [
            ApiBudget::KEYS,
            WatchBudget::KEYS,
            LogBudget::KEYS,
            MetricBudget::KEYS,
            ReuseBudget::KEYS,
        ]
        .concat()
    }

    /// Sets one key in the part that declares it.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let answers = [
            self.api.set(key, value),
            self.watches.set(key, value),
            self.logs.set(key, value),
            self.metrics.set(key, value),
            self.reuse.set(key, value),
        ];
        answers.into_iter().flatten().next().unwrap_or_else(|| {
            let known = Budget::keys().join(", ");
            Err(format!("unknown key {key:?} (the keys are {known})"))
        })
    }
}

/// `value` of `key` as a number of the field's type.
fn number<T: std::str::FromStr>(key: &str, value: &str) -> Result<T, String>
where
    T::Err: std::fmt::Display,
{
    value.parse().map_err(|e| format!("{key}={value}: {e}"))
}

/// `value` of `key` as a positive, finite number.
fn positive(key: &str, value: &str) -> Result<f64, String> {
    let v: f64 = number(key, value)?;
    match v.is_finite() && v > 0.0 {
        true => Ok(v),
        false => Err(format!("{key} must be a positive number")),
    }
}

/// `value` of `key`, a number of MiB, in bytes.
fn mib(key: &str, value: &str) -> Result<usize, String> {
    let mib: usize = number(key, value)?;
    mib.checked_shl(20)
        .filter(|bytes| bytes >> 20 == mib)
        .ok_or_else(|| format!("{key}={value}: too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_is_declared_by_exactly_one_part() {
        let keys = Budget::keys();
        let mut unique = keys.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), keys.len(), "{keys:?}");
        for key in keys {
            let mut budget = Budget::default();
            let value = if key.contains("qps") || key.contains("rate") {
                "2.5"
            } else {
                "3"
            };
            budget.set(key, value).expect(key);
            assert_ne!(budget, Budget::default(), "{key} changed nothing");
        }
    }

    #[test]
    fn the_table_shows_the_budget_flat_as_before() {
        let shown = serde_json::to_value(Budget::default()).expect("serialisable");
        for field in [
            "api_qps",
            "api_burst",
            "max_result_bytes",
            "max_watches",
            "max_cache_bytes",
            "log_lines_per_second",
            "log_burst",
            "max_metric_series",
            "reuse_instance_calls",
            "reuse_instance_growth_bytes",
        ] {
            assert!(shown.get(field).is_some(), "{field} missing from {shown}");
        }
        let back: Budget = serde_json::from_value(shown).expect("read back");
        assert_eq!(back, Budget::default());
    }
}
