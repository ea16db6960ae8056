//! Each plugin's budgets: how fast it may call the API server, how large an answer it
//! may ask for, how much it may log, how many Events it may write about one object.
//!
//! The operator sets defaults for every plugin and may override them per plugin
//! (`--plugin-override NAME:KEY=VALUE,...`). A budget lives as long as the plugin
//! (across upgrades), so a new version cannot reset what the old one used.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::kube::event_filter::SpamFilter;
use crate::logs::{LINES_BURST, LINES_PER_SECOND, LogLimiter};
use crate::metrics::Metrics;
use crate::rate::TokenBucket;

/// The budgets one plugin runs with, after overrides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    /// API requests per second, in the long run (writes and Events).
    pub api_qps: f64,
    /// API requests allowed in a burst before `api_qps` applies.
    pub api_burst: u32,
    /// Largest answer of one `get` or `list`, in bytes of JSON.
    pub max_result_bytes: usize,
    /// Most watches one registration may declare.
    pub max_watches: usize,
    /// Log lines per second, in the long run.
    pub log_lines_per_second: f64,
    /// Log lines allowed in a burst.
    pub log_burst: u32,
    /// Most series across the plugin's own metrics.
    #[serde(default = "default_metric_series")]
    pub max_metric_series: usize,
    /// Reconciles one instance serves before it is replaced; 0, the default, gives
    /// every reconcile a fresh instance (docs/isolation.md: the trade-off).
    #[serde(default)]
    pub reuse_instance_calls: u32,
    /// Growth of a reused instance's linear memory since its first reconcile that
    /// retires it, in bytes.
    #[serde(default = "default_reuse_growth")]
    pub reuse_instance_growth_bytes: usize,
    /// Bytes of the host's caches the plugin's watches may hold (shared informers
    /// divided among their users); past it the plugin is stopped.
    #[serde(default = "default_cache_bytes")]
    pub max_cache_bytes: usize,
}

/// The default bound on what a plugin's watches may make the host cache: 1 GiB, a
/// hundred thousand Pods' worth of JSON.
fn default_cache_bytes() -> usize {
    1 << 30
}

/// The default bound on a reused instance's memory growth: 8 MiB.
fn default_reuse_growth() -> usize {
    8 << 20
}

/// The default bound on a plugin's metric series.
fn default_metric_series() -> usize {
    500
}

impl Default for Budget {
    /// controller-runtime's client defaults (QPS 20, burst 30) for the API.
    fn default() -> Self {
        Budget {
            api_qps: 20.0,
            api_burst: 30,
            max_result_bytes: 32 << 20,
            max_watches: 16,
            log_lines_per_second: LINES_PER_SECOND,
            log_burst: LINES_BURST,
            max_metric_series: default_metric_series(),
            reuse_instance_calls: 0,
            reuse_instance_growth_bytes: default_reuse_growth(),
            max_cache_bytes: default_cache_bytes(),
        }
    }
}

/// Why a `--plugin-override` is not understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--plugin-override {given:?}: {reason}")]
pub struct OverrideError {
    /// The flag's value.
    pub given: String,
    /// What is wrong.
    pub reason: String,
}

/// The defaults and the per-plugin overrides.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BudgetSettings {
    /// What every plugin gets.
    pub defaults: Budget,
    /// Plugin name → its budget, for plugins the operator singled out.
    pub overrides: BTreeMap<String, Budget>,
}

impl BudgetSettings {
    /// The budget of `plugin`.
    pub fn for_plugin(&self, plugin: &str) -> Budget {
        self.overrides
            .get(plugin)
            .cloned()
            .unwrap_or_else(|| self.defaults.clone())
    }

    /// Applies one `NAME:KEY=VALUE[,KEY=VALUE...]` override on top of the defaults
    /// (call after the defaults are final). Keys: `api-qps`, `api-burst`,
    /// `max-result-mib`, `max-watches`, `max-metric-series`, `log-rate`, `log-burst`,
    /// `reuse-instance-calls`, `reuse-instance-growth-mib`, `max-cache-mib`.
    pub fn add_override(&mut self, given: &str) -> Result<(), OverrideError> {
        let err = |reason: String| OverrideError {
            given: given.to_string(),
            reason,
        };
        let (plugin, settings) = given
            .split_once(':')
            .ok_or_else(|| err("expected NAME:KEY=VALUE[,KEY=VALUE...]".into()))?;
        let mut budget = self.for_plugin(plugin);
        for setting in settings.split(',') {
            let (key, value) = setting
                .split_once('=')
                .ok_or_else(|| err(format!("{setting:?} is not KEY=VALUE")))?;
            set(&mut budget, key.trim(), value.trim()).map_err(err)?;
        }
        self.overrides.insert(plugin.to_string(), budget);
        Ok(())
    }
}

fn set(budget: &mut Budget, key: &str, value: &str) -> Result<(), String> {
    let bad = |e: &dyn std::fmt::Display| format!("{key}={value}: {e}");
    let positive = |v: f64| match v.is_finite() && v > 0.0 {
        true => Ok(v),
        false => Err(format!("{key} must be a positive number")),
    };
    match key {
        "api-qps" => budget.api_qps = positive(value.parse().map_err(|e| bad(&e))?)?,
        "api-burst" => budget.api_burst = value.parse().map_err(|e| bad(&e))?,
        "max-result-mib" => {
            let mib: usize = value.parse().map_err(|e| bad(&e))?;
            budget.max_result_bytes = mib.checked_shl(20).ok_or("too large")?;
        }
        "max-watches" => budget.max_watches = value.parse().map_err(|e| bad(&e))?,
        "max-metric-series" => budget.max_metric_series = value.parse().map_err(|e| bad(&e))?,
        "log-rate" => budget.log_lines_per_second = positive(value.parse().map_err(|e| bad(&e))?)?,
        "log-burst" => budget.log_burst = value.parse().map_err(|e| bad(&e))?,
        "reuse-instance-calls" => {
            budget.reuse_instance_calls = value.parse().map_err(|e| bad(&e))?
        }
        "reuse-instance-growth-mib" => {
            let mib: usize = value.parse().map_err(|e| bad(&e))?;
            budget.reuse_instance_growth_bytes = mib.checked_shl(20).ok_or("too large")?;
        }
        "max-cache-mib" => {
            let mib: usize = value.parse().map_err(|e| bad(&e))?;
            budget.max_cache_bytes = mib.checked_shl(20).ok_or("too large")?;
        }
        other => return Err(format!("unknown key {other:?}")),
    }
    Ok(())
}

/// A plugin's budgets as they are spent: shared by every version of the plugin.
#[derive(Debug)]
pub struct PluginBudget {
    /// The plugin.
    pub plugin: String,
    /// Its settings.
    pub budget: Budget,
    api: Mutex<TokenBucket>,
    /// Events about one object (client-go's spam filter).
    pub events: SpamFilter,
    /// Its log lines.
    pub logs: Arc<LogLimiter>,
    api_requests: Counter,
    api_wait: Counter<f64, std::sync::atomic::AtomicU64>,
    metrics: Arc<Metrics>,
}

impl PluginBudget {
    /// The budget of `plugin`, reporting to `metrics`.
    pub fn new(plugin: &str, budget: Budget, metrics: Arc<Metrics>) -> PluginBudget {
        let labels = crate::metrics::PluginLabels {
            plugin: plugin.to_string(),
        };
        let api_requests = metrics.plugin_api_requests.get_or_create(&labels).clone();
        let api_wait = metrics.plugin_api_wait.get_or_create(&labels).clone();
        PluginBudget {
            plugin: plugin.to_string(),
            api: Mutex::new(TokenBucket::new(budget.api_qps, budget.api_burst)),
            events: SpamFilter::default(),
            logs: Arc::new(LogLimiter::new(
                budget.log_lines_per_second,
                budget.log_burst,
                metrics.limit_hit_counter(plugin, crate::metrics::Limit::log_rate),
            )),
            api_requests,
            api_wait,
            budget,
            metrics,
        }
    }

    /// Waits for the plugin's next API request to fit its rate; returns how long it
    /// waited. The wait is inside the host call, so it counts against the
    /// reconcile's deadline.
    pub async fn api_request(&self) -> Duration {
        let wait = {
            let mut api = self.api.lock().unwrap_or_else(|p| p.into_inner());
            api.reserve(Instant::now())
        };
        self.api_requests.inc();
        if !wait.is_zero() {
            self.api_wait.inc_by(wait.as_secs_f64());
            self.hit(crate::metrics::Limit::api_rate);
            tokio::time::sleep(wait).await;
        }
        wait
    }

    /// Counts one call the plugin made to the host.
    pub fn host_call(
        &self,
        function: crate::metrics::HostFunction,
        result: crate::metrics::HostCallResult,
    ) {
        let labels = crate::metrics::HostCallLabels {
            plugin: self.plugin.clone(),
            function,
            result,
        };
        self.metrics.host_calls.get_or_create(&labels).inc();
    }

    /// Counts one time a limit refused, dropped, cut or delayed something.
    pub fn hit(&self, limit: crate::metrics::Limit) {
        self.metrics.limit_hit_counter(&self.plugin, limit).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_change_one_plugin_and_name_the_bad_part() {
        let mut settings = BudgetSettings::default();
        settings
            .add_override("pod-counter:api-qps=200, api-burst=400")
            .expect("valid");
        let pc = settings.for_plugin("pod-counter");
        assert_eq!((pc.api_qps, pc.api_burst), (200.0, 400));
        assert_eq!(settings.for_plugin("other"), Budget::default());
        for (bad, says) in [
            ("pod-counter", "expected NAME:KEY=VALUE"),
            ("p:api-qps", "is not KEY=VALUE"),
            ("p:api-qps=0", "must be a positive number"),
            ("p:api-qps=fast", "api-qps=fast"),
            ("p:speed=1", "unknown key \"speed\""),
        ] {
            let err = settings.add_override(bad).expect_err(bad).to_string();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn requests_beyond_the_burst_wait_for_the_rate() {
        let budget = Budget {
            api_qps: 20.0,
            api_burst: 30,
            ..Budget::default()
        };
        let plugin = PluginBudget::new("p", budget, Default::default());
        let started = Instant::now();
        for _ in 0..30 {
            assert_eq!(plugin.api_request().await, Duration::ZERO);
        }
        for _ in 0..20 {
            plugin.api_request().await;
        }
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(999) && took < Duration::from_millis(1100),
            "{took:?}"
        );
    }
}
