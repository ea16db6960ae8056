//! Prometheus metrics of the host: reconciles, queues and informers, per plugin.
//!
//! Where controller-runtime or client-go has the series, it is exported under their
//! name and labels ([`standard`]: `controller_runtime_reconcile_total{controller}`,
//! `workqueue_depth{name}`, `rest_client_requests_total`, ...), so dashboards written
//! for Go controllers work unchanged; what only this host has carries the `wcm_`
//! prefix. Scraped from `/metrics` (the host's HTTP server).

mod labels;
pub mod plugin;
mod process;
pub mod rest;
pub mod standard;

pub use labels::{
    AccessReviewLabels, FailureCause, FailureLabels, HostCallLabels, HostCallResult,
    InformerLabels, LeaderLabels, LimitLabels, LoadStepLabels, PluginLabels, RecycleLabels,
    ReviewResult, StateLabels,
};
pub use standard::{QueueMetrics, ReconcileResult, Standard};

use crate::limits::{Limit, Recycle};

use std::sync::atomic::AtomicU64;

use crate::contract::Capability;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Metric, Registry};

/// Buckets of load steps: 1 ms to ~30 s, ×2.
fn load_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

/// A new metric registered in `registry` under `name`, handed back for the host to
/// update: one line per series in [`Metrics::with_collectors`], in the order `/metrics`
/// shows them.
fn registered<M: Metric + Clone + Default>(registry: &mut Registry, name: &str, help: &str) -> M {
    registered_as(registry, name, help, M::default())
}

/// [`registered`], for a metric that is not made by `Default`.
fn registered_as<M: Metric + Clone>(
    registry: &mut Registry,
    name: &str,
    help: &str,
    metric: M,
) -> M {
    registry.register(name, help, metric.clone());
    metric
}

/// Every metric the host exports. One instance per process, shared by reference.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// controller-runtime's and client-go's series.
    pub standard: Standard,
    /// Informer changes delivered to a plugin's key mappings (before de-duplication).
    pub plugin_events: Family<PluginLabels, Counter>,
    /// Watch events (list items included) an informer received.
    pub informer_events: Family<InformerLabels, Counter>,
    /// Full lists an informer completed: 1 at start, one more per relist.
    pub informer_lists: Family<InformerLabels, Counter>,
    /// Objects an informer's cache holds.
    pub informer_objects: Family<InformerLabels, Gauge>,
    /// 1 while an informer's watch runs, 0 while nothing running here needs it.
    pub informer_watching: Family<InformerLabels, Gauge>,
    /// Bytes of JSON an informer's cache holds.
    pub informer_bytes: Family<InformerLabels, Gauge>,
    /// Objects an informer (or the watch of `WasmPlugin`s) cannot decode.
    pub informer_undecodable: Family<InformerLabels, Gauge>,
    /// Bytes of the host's caches a plugin's watches hold, shared ones divided among
    /// the plugins that share them.
    pub plugin_cache_bytes: Family<PluginLabels, Gauge>,
    /// Linear memory of the instance of a plugin's last finished reconcile.
    pub plugin_instance_memory: Family<PluginLabels, Gauge>,
    /// Bytes of a plugin's compiled code this replica keeps in memory (0 while it is
    /// parked: another replica holds the plugin's Lease).
    pub plugin_code_bytes: Family<PluginLabels, Gauge>,
    /// One series, value 1, naming the Lease holder this replica last saw.
    pub leader_election_holder: Family<LeaderLabels, Gauge>,
    /// The Lease's `leaseTransitions` as this replica last saw it.
    pub leader_election_transitions: Gauge,
    /// Leases labelled for a plugin of this group but not named after it, ignored.
    pub ignored_leases: Gauge,
    /// API requests a plugin made (writes, deletions, Events).
    pub plugin_api_requests: Family<PluginLabels, Counter>,
    /// Seconds a plugin's requests waited for its API rate.
    pub plugin_api_wait: Family<PluginLabels, Counter<f64, AtomicU64>>,
    /// Times a per-plugin limit refused, dropped, cut, delayed or stopped something.
    pub limit_hits: Family<LimitLabels, Counter>,
    /// A plugin's Lease's `leaseTransitions` (per-plugin election): its hand-overs.
    pub plugin_lease_transitions: Family<PluginLabels, Gauge>,
    /// Reconciles of a plugin that trapped or timed out in a row.
    pub plugin_consecutive_failures: Family<PluginLabels, Gauge>,
    /// SubjectAccessReviews made for a plugin's ServiceAccount, by result.
    pub access_reviews: Family<AccessReviewLabels, Counter>,
    /// Rules a plugin declared that its ServiceAccount is not granted.
    pub missing_rights: Family<PluginLabels, Gauge>,
    /// Host calls by plugin, WIT function and result.
    pub host_calls: Family<HostCallLabels, Counter>,
    /// Failed calls into plugins by cause.
    pub call_failures: Family<FailureLabels, Counter>,
    /// Reused instances retired, by reason.
    pub instance_recycles: Family<RecycleLabels, Counter>,
    /// Time of each step of loading a plugin file.
    pub load_seconds: Family<LoadStepLabels, Histogram, fn() -> Histogram>,
    /// The running plugins' own metrics (`wcm_plugin_<plugin>_<name>`).
    pub plugin_metrics: plugin::PluginMetricsRegistry,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// A fresh set of metrics, all registered under the `wcm` prefix.
    pub fn new() -> Metrics {
        Metrics::with_collectors(Vec::new())
    }

    /// A fresh set of metrics with `collectors` registered under the `wcm` prefix too:
    /// series read at each scrape from what modules above this one hold (the plugin
    /// table's states).
    pub fn with_collectors(collectors: Vec<Box<dyn Collector>>) -> Metrics {
        let mut root = Registry::default();
        let standard = Standard::register(&mut root);
        let plugin_metrics = plugin::PluginMetricsRegistry::default();
        root.register_collector(Box::new(plugin_metrics.clone()));
        root.register_collector(Box::new(process::ProcessCollector));
        let r = root.sub_registry_with_prefix("wcm");
        for collector in collectors {
            r.register_collector(collector);
        }
        let load_seconds: Family<LoadStepLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(load_buckets);
        Metrics {
            plugin_events: registered(
                r,
                "plugin_events",
                "Informer changes delivered to a \
                plugin's key mappings, before de-duplication",
            ),
            informer_events: registered(
                r,
                "informer_events",
                "Watch events received, list \
                items included",
            ),
            informer_lists: registered(
                r,
                "informer_lists",
                "Full lists completed: 1 at \
                start plus relists",
            ),
            informer_objects: registered(
                r,
                "informer_objects",
                "Objects held in an \
                informer's cache",
            ),
            informer_watching: registered(
                r,
                "informer_watching",
                "1 while an informer \
                watches, 0 while no plugin running here needs it",
            ),
            informer_bytes: registered(
                r,
                "informer_bytes",
                "Bytes of JSON held in an \
                informer's cache",
            ),
            informer_undecodable: registered(
                r,
                "informer_undecodable_objects",
                "Objects a \
                watch cannot decode (too deep, a field of the wrong type): left out of its \
                cache, or held at their last decodable version",
            ),
            plugin_cache_bytes: registered(
                r,
                "plugin_cache_bytes",
                "Bytes of the host's \
                caches a plugin's watches hold, shared ones divided among the plugins \
                sharing them",
            ),
            plugin_instance_memory: registered(
                r,
                "plugin_instance_memory_bytes",
                "Linear \
                memory of the instance of the plugin's last finished reconcile",
            ),
            plugin_code_bytes: registered(
                r,
                "plugin_code_bytes",
                "Bytes of the \
                plugin's compiled code this replica keeps in memory; 0 while another \
                replica holds the plugin",
            ),
            leader_election_holder: registered(
                r,
                "leader_election_holder",
                "The leader \
                Lease's holder as this replica last saw it (value 1)",
            ),
            leader_election_transitions: registered(
                r,
                "leader_election_transitions",
                "The \
                leader Lease's leaseTransitions as this replica last saw it",
            ),
            ignored_leases: registered(
                r,
                "leader_election_ignored_leases",
                "Leases \
                labelled for a plugin of this group but not named after it: ignored \
                (written by someone else)",
            ),
            plugin_api_requests: registered(
                r,
                "plugin_api_requests",
                "API requests a \
                plugin made: writes, deletions and Events",
            ),
            plugin_api_wait: registered(
                r,
                "plugin_api_wait_seconds",
                "Seconds a plugin's \
                API requests waited for its rate (--plugin-api-qps)",
            ),
            limit_hits: registered(
                r,
                "plugin_limit_hits",
                "Times a per-plugin limit \
                refused, dropped, cut, delayed or stopped something",
            ),
            plugin_lease_transitions: registered(
                r,
                "plugin_lease_transitions",
                "leaseTransitions of a plugin's Lease (--leader-elect-mode=per-plugin)",
            ),
            plugin_consecutive_failures: registered(
                r,
                "plugin_consecutive_failures",
                "Reconciles of a plugin that trapped or timed out in a row",
            ),
            access_reviews: registered(
                r,
                "plugin_access_reviews",
                "SubjectAccessReviews of \
                a plugin's ServiceAccount, by result",
            ),
            missing_rights: registered(
                r,
                "plugin_missing_rights",
                "Rules a plugin declared \
                that its ServiceAccount is not granted",
            ),
            host_calls: registered(
                r,
                "host_calls",
                "Calls plugins made to the host, by WIT \
                function and result",
            ),
            call_failures: registered(
                r,
                "plugin_call_failures",
                "Calls into plugins that \
                failed, by cause",
            ),
            instance_recycles: registered(
                r,
                "plugin_instance_recycles",
                "Reused plugin \
                instances retired, by reason (calls, memory, failure, upgrade)",
            ),
            load_seconds: registered_as(
                r,
                "plugin_load_seconds",
                "Time of each step of \
                loading a plugin file (read, compile, link, register)",
                load_seconds,
            ),
            standard,
            plugin_metrics,
            registry: root,
        }
    }

    /// Counts a terminal reconcile error of `plugin` (besides its `error` result).
    pub fn terminal_error(&self, plugin: &str) {
        let controller = standard::ControllerLabels {
            controller: plugin.to_string(),
        };
        self.standard
            .terminal_errors
            .get_or_create(&controller)
            .inc();
    }

    /// Counts one finished reconcile of `plugin` (controller-runtime's series).
    pub fn reconciled(&self, plugin: &str, result: ReconcileResult, took: Duration) {
        let controller = standard::ControllerLabels {
            controller: plugin.to_string(),
        };
        let s = &self.standard;
        s.reconcile_time
            .get_or_create(&controller)
            .observe(took.as_secs_f64());
        if result == ReconcileResult::error {
            s.reconcile_errors.get_or_create(&controller).inc();
        }
        let labels = standard::ResultLabels {
            controller: plugin.to_string(),
            result,
        };
        s.reconcile_total.get_or_create(&labels).inc();
    }

    /// Counts a failed call into `plugin`.
    pub fn call_failed(&self, plugin: &str, cause: FailureCause) {
        let labels = FailureLabels {
            plugin: plugin.to_string(),
            cause,
        };
        self.call_failures.get_or_create(&labels).inc();
    }

    /// Notes the linear memory of the instance `plugin`'s last reconcile ran in.
    pub fn instance_memory(&self, plugin: &str, bytes: usize) {
        let labels = PluginLabels {
            plugin: plugin.to_string(),
        };
        let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
        self.plugin_instance_memory
            .get_or_create(&labels)
            .set(bytes);
    }

    /// Counts a reused instance of `plugin` retired for `reason`.
    pub fn instance_recycled(&self, plugin: &str, reason: Recycle) {
        let labels = RecycleLabels {
            plugin: plugin.to_string(),
            reason,
        };
        self.instance_recycles.get_or_create(&labels).inc();
    }

    /// Sets `leader_election_master_status{name=lease}`.
    pub fn set_leading(&self, lease: &str, leading: bool) {
        let labels = standard::LeaseLabels {
            name: lease.to_string(),
        };
        self.standard
            .leader_status
            .get_or_create(&labels)
            .set(i64::from(leading));
    }

    /// Drops `leader_election_master_status{name=lease}`: this replica no longer takes
    /// part in that Lease (a plugin's, once the plugin stops here), so its standing 0
    /// must not read as "no replica holds it".
    pub fn forget_leading(&self, lease: &str) {
        let labels = standard::LeaseLabels {
            name: lease.to_string(),
        };
        self.standard.leader_status.remove(&labels);
    }

    /// The counter of `limit` for `plugin`.
    pub fn limit_hit_counter(&self, plugin: &str, limit: Limit) -> Counter {
        let labels = LimitLabels {
            plugin: plugin.to_string(),
            limit,
        };
        self.limit_hits.get_or_create(&labels).clone()
    }

    /// Counts one SubjectAccessReview of `plugin`'s ServiceAccount.
    pub fn count_access_review(&self, plugin: &str, result: ReviewResult) {
        let labels = AccessReviewLabels {
            plugin: plugin.to_string(),
            result,
        };
        self.access_reviews.get_or_create(&labels).inc();
    }

    /// Drops every per-plugin series of `plugin`, once it is unloaded.
    pub fn forget_plugin(&self, plugin: &str) {
        let labels = PluginLabels {
            plugin: plugin.to_string(),
        };
        self.standard.forget(plugin);
        self.plugin_events.remove(&labels);
        self.plugin_cache_bytes.remove(&labels);
        self.plugin_instance_memory.remove(&labels);
        self.plugin_code_bytes.remove(&labels);
        for &function in Capability::ALL {
            for &result in HostCallResult::ALL {
                self.host_calls.remove(&HostCallLabels {
                    plugin: plugin.to_string(),
                    function,
                    result,
                });
            }
        }
        for &cause in FailureCause::ALL {
            self.call_failures.remove(&FailureLabels {
                plugin: plugin.to_string(),
                cause,
            });
        }
        for &reason in Recycle::ALL {
            self.instance_recycles.remove(&RecycleLabels {
                plugin: plugin.to_string(),
                reason,
            });
        }
        self.plugin_api_requests.remove(&labels);
        self.plugin_api_wait.remove(&labels);
        self.plugin_consecutive_failures.remove(&labels);
        self.missing_rights.remove(&labels);
        for &result in ReviewResult::ALL {
            self.access_reviews.remove(&AccessReviewLabels {
                plugin: plugin.to_string(),
                result,
            });
        }
        for &limit in Limit::ALL {
            self.limit_hits.remove(&LimitLabels {
                plugin: plugin.to_string(),
                limit,
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
mod tests;
