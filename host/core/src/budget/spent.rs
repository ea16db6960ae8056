//! What a plugin has spent of its budgets: its API requests (a token bucket it waits
//! on), its Events per object (client-go's spam filter), its log lines, and the
//! counters that show them.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use tokio::time::Instant;

use super::Budget;
use crate::kube::event_filter::SpamFilter;
use crate::logs::LogLimiter;
use crate::metrics::Metrics;
use crate::rate::TokenBucket;

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
            api: Mutex::new(TokenBucket::new(budget.api.qps, budget.api.burst)),
            events: SpamFilter::default(),
            logs: Arc::new(LogLimiter::new(
                budget.logs.lines_per_second,
                budget.logs.burst,
                metrics.limit_hit_counter(plugin, crate::limits::Limit::log_rate),
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
            self.hit(crate::limits::Limit::api_rate);
            tokio::time::sleep(wait).await;
        }
        wait
    }

    /// Counts one call the plugin made to the host.
    pub fn host_call(
        &self,
        function: crate::contract::Capability,
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
    pub fn hit(&self, limit: crate::limits::Limit) {
        self.metrics.limit_hit_counter(&self.plugin, limit).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn requests_beyond_the_burst_wait_for_the_rate() {
        let mut budget = Budget::default();
        (budget.api.qps, budget.api.burst) = (20.0, 30);
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
