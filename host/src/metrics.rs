//! Prometheus metrics of the host: reconciles, queues and informers, per plugin.
//!
//! Names follow controller-runtime and client-go where a counterpart exists
//! (`controller_runtime_reconcile_total`, `workqueue_depth`, ...), prefixed `wcm_`, so
//! existing dashboards translate. Scraped from `/metrics` (see [`crate::server`]).

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels of per-plugin series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PluginLabels {
    /// The plugin's registered name.
    pub plugin: String,
}

/// How a reconcile ended.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)] // label values are lower-case on the wire
pub enum Outcome {
    /// `done` or `requeue-after`.
    success,
    /// Trap, timeout, memory limit or an error returned by the plugin.
    error,
}

/// Labels of the reconcile counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReconcileLabels {
    /// The plugin's registered name.
    pub plugin: String,
    /// How the reconcile ended.
    pub result: Outcome,
}

/// A per-plugin limit that refused, dropped, cut, delayed or stopped something.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)] // label values are lower-case on the wire
pub enum Limit {
    /// A request waited for the plugin's API rate (`--plugin-api-qps`).
    api_rate,
    /// A `get` or `list` answer was larger than `--max-result-mib`.
    result_size,
    /// An Event was dropped by the per-object spam filter.
    events,
    /// A log line was dropped over the plugin's log rate.
    log_rate,
    /// A log line was cut at its maximum size.
    log_size,
    /// An instance hit its memory limit.
    memory,
    /// A call ran past its deadline.
    timeout,
    /// A call hit the bound on host handles or guest tables.
    handles,
}

impl Limit {
    /// Every limit, for removing a plugin's series.
    pub const ALL: [Limit; 8] = [
        Limit::api_rate,
        Limit::result_size,
        Limit::events,
        Limit::log_rate,
        Limit::log_size,
        Limit::memory,
        Limit::timeout,
        Limit::handles,
    ];
}

/// Labels of the limit counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LimitLabels {
    /// The plugin's registered name.
    pub plugin: String,
    /// Which limit.
    pub limit: Limit,
}

/// Labels of the plugin-state gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabels {
    /// The plugin's registered name.
    pub plugin: String,
    /// `running`, `degraded` or `crash-looping`.
    pub state: String,
}

/// The states of a running plugin, as the state gauge names them.
pub const PLUGIN_STATES: [&str; 3] = ["running", "degraded", "crash-looping"];

/// Labels of per-informer series: what the watch covers.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct InformerLabels {
    /// `group/version/Kind` (`v1/Pod` for the core group).
    pub kind: String,
    /// The namespace, or empty for all.
    pub namespace: String,
    /// The label selector, or empty for none.
    pub selector: String,
}

/// Labels of the leader-identity series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LeaderLabels {
    /// The Lease holder's identity; empty when the Lease is free.
    pub identity: String,
}

/// Every metric the host exports. One instance per process, shared by reference.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Reconciles by plugin and outcome.
    pub reconciles: Family<ReconcileLabels, Counter>,
    /// Reconcile wall time by plugin, host calls included.
    pub reconcile_seconds: Family<PluginLabels, Histogram>,
    /// Informer changes delivered to a plugin's key mappings (before de-duplication).
    pub plugin_events: Family<PluginLabels, Counter>,
    /// Keys waiting in a plugin's queue (ready or delayed).
    pub queue_depth: Family<PluginLabels, Gauge>,
    /// Failed keys put back with backoff.
    pub queue_retries: Family<PluginLabels, Counter>,
    /// Watch events (list items included) an informer received.
    pub informer_events: Family<InformerLabels, Counter>,
    /// Full lists an informer completed: 1 at start, one more per relist.
    pub informer_lists: Family<InformerLabels, Counter>,
    /// Objects an informer's cache holds.
    pub informer_objects: Family<InformerLabels, Gauge>,
    /// 1 while this replica leads (client-go's `leader_election_master_status`).
    pub leader_election_leading: Gauge,
    /// One series, value 1, naming the Lease holder this replica last saw.
    pub leader_election_holder: Family<LeaderLabels, Gauge>,
    /// The Lease's `leaseTransitions` as this replica last saw it.
    pub leader_election_transitions: Gauge,
    /// API requests a plugin made (writes, deletions, Events).
    pub plugin_api_requests: Family<PluginLabels, Counter>,
    /// Seconds a plugin's requests waited for its API rate.
    pub plugin_api_wait: Family<PluginLabels, Counter<f64, AtomicU64>>,
    /// Times a per-plugin limit refused, dropped, cut, delayed or stopped something.
    pub limit_hits: Family<LimitLabels, Counter>,
    /// 1 for the state a running plugin is in, per plugin.
    pub plugin_state: Family<StateLabels, Gauge>,
    /// Reconciles of a plugin that trapped or timed out in a row.
    pub plugin_consecutive_failures: Family<PluginLabels, Gauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// A fresh set of metrics, all registered under the `wcm` prefix.
    pub fn new() -> Metrics {
        let mut root = Registry::default();
        let registry = root.sub_registry_with_prefix("wcm");
        let reconciles = Family::default();
        registry.register(
            "reconcile",
            "Reconciles by plugin and result",
            reconciles.clone(),
        );
        let reconcile_seconds = Family::<PluginLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0005, 2.0, 16))
        });
        let help = "Reconcile wall time, host calls included";
        registry.register(
            "reconcile_duration_seconds",
            help,
            reconcile_seconds.clone(),
        );
        let plugin_events = Family::default();
        let help = "Informer changes delivered to a plugin's key mappings, before de-duplication";
        registry.register("plugin_events", help, plugin_events.clone());
        let queue_depth = Family::default();
        registry.register(
            "workqueue_depth",
            "Keys waiting in a plugin's queue",
            queue_depth.clone(),
        );
        let queue_retries = Family::default();
        registry.register(
            "workqueue_retries",
            "Failed keys queued again with backoff",
            queue_retries.clone(),
        );
        let informer_events = Family::default();
        registry.register(
            "informer_events",
            "Watch events received, list items included",
            informer_events.clone(),
        );
        let informer_lists = Family::default();
        registry.register(
            "informer_lists",
            "Full lists completed: 1 at start plus relists",
            informer_lists.clone(),
        );
        let informer_objects = Family::default();
        registry.register(
            "informer_objects",
            "Objects held in an informer's cache",
            informer_objects.clone(),
        );
        let leader_election_leading = Gauge::default();
        let help = "1 while this replica holds the leader Lease, else 0";
        registry.register(
            "leader_election_leading",
            help,
            leader_election_leading.clone(),
        );
        let leader_election_holder = Family::default();
        let help = "The leader Lease's holder as this replica last saw it (value 1)";
        registry.register(
            "leader_election_holder",
            help,
            leader_election_holder.clone(),
        );
        let leader_election_transitions = Gauge::default();
        let help = "The leader Lease's leaseTransitions as this replica last saw it";
        registry.register(
            "leader_election_transitions",
            help,
            leader_election_transitions.clone(),
        );
        let plugin_api_requests = Family::default();
        let help = "API requests a plugin made: writes, deletions and Events";
        registry.register("plugin_api_requests", help, plugin_api_requests.clone());
        let plugin_api_wait = Family::default();
        let help = "Seconds a plugin's API requests waited for its rate (--plugin-api-qps)";
        registry.register("plugin_api_wait_seconds", help, plugin_api_wait.clone());
        let limit_hits = Family::default();
        let help = "Times a per-plugin limit refused, dropped, cut, delayed or stopped something";
        registry.register("plugin_limit_hits", help, limit_hits.clone());
        let plugin_state = Family::default();
        let help = "1 for the state of each running plugin: running, degraded or crash-looping";
        registry.register("plugin_state", help, plugin_state.clone());
        let plugin_consecutive_failures = Family::default();
        let help = "Reconciles of a plugin that trapped or timed out in a row";
        registry.register(
            "plugin_consecutive_failures",
            help,
            plugin_consecutive_failures.clone(),
        );
        Metrics {
            registry: root,
            plugin_api_requests,
            plugin_api_wait,
            limit_hits,
            plugin_state,
            plugin_consecutive_failures,
            leader_election_leading,
            leader_election_holder,
            leader_election_transitions,
            reconciles,
            reconcile_seconds,
            plugin_events,
            queue_depth,
            queue_retries,
            informer_events,
            informer_lists,
            informer_objects,
        }
    }

    /// Counts one finished reconcile of `plugin`.
    pub fn reconciled(&self, plugin: &str, result: Outcome, took: Duration) {
        let plugin = plugin.to_string();
        self.reconcile_seconds
            .get_or_create(&PluginLabels {
                plugin: plugin.clone(),
            })
            .observe(took.as_secs_f64());
        self.reconciles
            .get_or_create(&ReconcileLabels { plugin, result })
            .inc();
    }

    /// The counter of `limit` for `plugin`.
    pub fn limit_hit_counter(&self, plugin: &str, limit: Limit) -> Counter {
        let labels = LimitLabels {
            plugin: plugin.to_string(),
            limit,
        };
        self.limit_hits.get_or_create(&labels).clone()
    }

    /// Sets the state gauge of `plugin`: 1 for `state`, no series for the others.
    pub fn set_plugin_state(&self, plugin: &str, state: &str) {
        for other in PLUGIN_STATES.iter().filter(|s| **s != state) {
            self.plugin_state.remove(&StateLabels {
                plugin: plugin.to_string(),
                state: other.to_string(),
            });
        }
        let labels = StateLabels {
            plugin: plugin.to_string(),
            state: state.to_string(),
        };
        self.plugin_state.get_or_create(&labels).set(1);
    }

    /// Drops every per-plugin series of `plugin`, once it is unloaded.
    pub fn forget_plugin(&self, plugin: &str) {
        let labels = PluginLabels {
            plugin: plugin.to_string(),
        };
        self.reconcile_seconds.remove(&labels);
        self.plugin_events.remove(&labels);
        self.queue_depth.remove(&labels);
        self.queue_retries.remove(&labels);
        self.plugin_api_requests.remove(&labels);
        self.plugin_api_wait.remove(&labels);
        self.plugin_consecutive_failures.remove(&labels);
        for limit in Limit::ALL {
            self.limit_hits.remove(&LimitLabels {
                plugin: plugin.to_string(),
                limit,
            });
        }
        for state in PLUGIN_STATES {
            self.plugin_state.remove(&StateLabels {
                plugin: plugin.to_string(),
                state: state.to_string(),
            });
        }
        for result in [Outcome::success, Outcome::error] {
            self.reconciles.remove(&ReconcileLabels {
                plugin: plugin.to_string(),
                result,
            });
        }
    }

    /// Records the Lease holder and transition count this replica just read.
    pub fn observed_leader(&self, holder: &str, transitions: i32) {
        let labels = LeaderLabels {
            identity: holder.to_string(),
        };
        if self.leader_election_holder.get(&labels).is_none() {
            self.leader_election_holder.clear();
            self.leader_election_holder.get_or_create(&labels).set(1);
        }
        self.leader_election_transitions.set(transitions.into());
    }

    /// The OpenMetrics text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconciles_are_counted_per_plugin_and_result() {
        let m = Metrics::new();
        m.reconciled("pod-counter", Outcome::success, Duration::from_millis(3));
        m.reconciled("pod-counter", Outcome::success, Duration::from_millis(3));
        m.reconciled("pod-counter", Outcome::error, Duration::from_millis(3));
        let text = m.encode();
        assert!(
            text.contains(r#"wcm_reconcile_total{plugin="pod-counter",result="success"} 2"#),
            "{text}"
        );
        assert!(
            text.contains(r#"wcm_reconcile_total{plugin="pod-counter",result="error"} 1"#),
            "{text}"
        );
        assert!(
            text.contains("wcm_reconcile_duration_seconds_count"),
            "{text}"
        );
    }

    #[test]
    fn an_unloaded_plugin_leaves_no_series() {
        let m = Metrics::new();
        m.reconciled("gone", Outcome::success, Duration::ZERO);
        m.plugin_events
            .get_or_create(&PluginLabels {
                plugin: "gone".into(),
            })
            .inc();
        m.forget_plugin("gone");
        assert!(!m.encode().contains("gone"), "{}", m.encode());
    }
}
