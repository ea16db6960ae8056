//! The series controller-runtime and client-go export, under their own names and
//! labels, so dashboards and alerts written for Go controllers work unchanged:
//! `controller_runtime_*` by `controller` (the plugin's name), `workqueue_*` by `name`
//! (the plugin's name), `rest_client_requests_total` by code, method and host, and
//! `leader_election_master_status` by the Lease's name.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// A float gauge (seconds).
pub type SecondsGauge = Gauge<f64, AtomicU64>;

/// `controller`: the plugin, as controller-runtime names its controllers.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    /// The plugin's registered name.
    pub controller: String,
}

/// How a reconcile ended, as controller-runtime counts it.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)] // label values are lower-case on the wire
pub enum ReconcileResult {
    /// `done`.
    success,
    /// A trap, timeout, memory overrun, or an error the plugin returned.
    error,
    /// `requeue-after(0)`: again at once.
    requeue,
    /// `requeue-after(n)` with n > 0.
    requeue_after,
}

impl ReconcileResult {
    /// Every result, for removing a plugin's series.
    pub const ALL: [ReconcileResult; 4] = [
        ReconcileResult::success,
        ReconcileResult::error,
        ReconcileResult::requeue,
        ReconcileResult::requeue_after,
    ];
}

/// `controller` and `result`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// The plugin's registered name.
    pub controller: String,
    /// How the reconcile ended.
    pub result: ReconcileResult,
}

/// `name`: the plugin, as client-go names its work queues.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabels {
    /// The plugin's registered name.
    pub name: String,
}

/// One API request's outcome, as client-go's `rest_client_requests_total` labels it.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// HTTP status code, or `<error>` when there was no answer.
    pub code: String,
    /// HTTP method.
    pub method: String,
    /// The API server's host and port.
    pub host: String,
}

/// `name`: the Lease.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LeaseLabels {
    /// The Lease's name.
    pub name: String,
}

/// controller-runtime's and client-go's families.
#[derive(Debug)]
pub struct Standard {
    /// `controller_runtime_reconcile_total{controller,result}`.
    pub reconcile_total: Family<ResultLabels, Counter>,
    /// `controller_runtime_reconcile_errors_total{controller}`.
    pub reconcile_errors: Family<ControllerLabels, Counter>,
    /// `controller_runtime_terminal_reconcile_errors_total{controller}`: errors the
    /// plugin said retrying will not fix.
    pub terminal_errors: Family<ControllerLabels, Counter>,
    /// `controller_runtime_reconcile_time_seconds{controller}`.
    pub reconcile_time: Family<ControllerLabels, Histogram, fn() -> Histogram>,
    /// `controller_runtime_max_concurrent_reconciles{controller}`.
    pub max_concurrent_reconciles: Family<ControllerLabels, Gauge>,
    /// `controller_runtime_active_workers{controller}`.
    pub active_workers: Family<ControllerLabels, Gauge>,
    /// `workqueue_depth{name}`: keys waiting, ready or delayed.
    pub queue_depth: Family<QueueLabels, Gauge>,
    /// `workqueue_adds_total{name}`.
    pub queue_adds: Family<QueueLabels, Counter>,
    /// `workqueue_retries_total{name}`.
    pub queue_retries: Family<QueueLabels, Counter>,
    /// `workqueue_queue_duration_seconds{name}`: from added to taken.
    pub queue_duration: Family<QueueLabels, Histogram, fn() -> Histogram>,
    /// `workqueue_work_duration_seconds{name}`: from taken to done.
    pub work_duration: Family<QueueLabels, Histogram, fn() -> Histogram>,
    /// `workqueue_unfinished_work_seconds{name}`: summed age of keys in progress.
    pub unfinished_work: Family<QueueLabels, SecondsGauge>,
    /// `workqueue_longest_running_processor_seconds{name}`.
    pub longest_running: Family<QueueLabels, SecondsGauge>,
    /// `rest_client_requests_total{code,method,host}`.
    pub rest_requests: Family<RequestLabels, Counter>,
    /// `leader_election_master_status{name}`: 1 while this replica leads.
    pub leader_status: Family<LeaseLabels, Gauge>,
}

/// client-go's work-queue buckets: 1 µs to ~10 s, ×10.
fn queue_buckets() -> Histogram {
    Histogram::new(exponential_buckets(1e-6, 10.0, 8))
}

/// controller-runtime's reconcile-time buckets, roughly: 5 ms to ~80 s, ×2.
fn reconcile_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 15))
}

impl Standard {
    /// The families, registered under their own names in `root` (no prefix).
    pub fn register(root: &mut Registry) -> Standard {
        let s = Standard::families();
        let cr = root.sub_registry_with_prefix("controller_runtime");
        cr.register(
            "reconcile",
            "Reconciles per controller and result",
            s.reconcile_total.clone(),
        );
        cr.register(
            "reconcile_errors",
            "Reconcile errors per controller",
            s.reconcile_errors.clone(),
        );
        cr.register(
            "terminal_reconcile_errors",
            "Terminal reconcile errors (not retried) per controller",
            s.terminal_errors.clone(),
        );
        cr.register(
            "reconcile_time_seconds",
            "Reconcile wall time per controller",
            s.reconcile_time.clone(),
        );
        cr.register(
            "max_concurrent_reconciles",
            "Workers per controller",
            s.max_concurrent_reconciles.clone(),
        );
        cr.register(
            "active_workers",
            "Workers reconciling now",
            s.active_workers.clone(),
        );
        let wq = root.sub_registry_with_prefix("workqueue");
        wq.register(
            "depth",
            "Keys waiting, ready or delayed",
            s.queue_depth.clone(),
        );
        wq.register("adds", "Keys added", s.queue_adds.clone());
        wq.register(
            "retries",
            "Keys added again after a failure",
            s.queue_retries.clone(),
        );
        wq.register(
            "queue_duration_seconds",
            "Time a key waited before it was taken",
            s.queue_duration.clone(),
        );
        wq.register(
            "work_duration_seconds",
            "Time from taking a key to done",
            s.work_duration.clone(),
        );
        wq.register(
            "unfinished_work_seconds",
            "Summed age of the keys being worked on",
            s.unfinished_work.clone(),
        );
        wq.register(
            "longest_running_processor_seconds",
            "Age of the oldest key being worked on",
            s.longest_running.clone(),
        );
        let rest = root.sub_registry_with_prefix("rest_client");
        rest.register(
            "requests",
            "API requests by status code, method and host",
            s.rest_requests.clone(),
        );
        let le = root.sub_registry_with_prefix("leader_election");
        le.register(
            "master_status",
            "1 while this replica holds the Lease",
            s.leader_status.clone(),
        );
        s
    }

    fn families() -> Standard {
        Standard {
            reconcile_total: Family::default(),
            reconcile_errors: Family::default(),
            terminal_errors: Family::default(),
            reconcile_time: Family::new_with_constructor(reconcile_buckets as fn() -> Histogram),
            max_concurrent_reconciles: Family::default(),
            active_workers: Family::default(),
            queue_depth: Family::default(),
            queue_adds: Family::default(),
            queue_retries: Family::default(),
            queue_duration: Family::new_with_constructor(queue_buckets as fn() -> Histogram),
            work_duration: Family::new_with_constructor(queue_buckets as fn() -> Histogram),
            unfinished_work: Family::default(),
            longest_running: Family::default(),
            rest_requests: Family::default(),
            leader_status: Family::default(),
        }
    }

    /// The work-queue series of `plugin`.
    pub fn queue(&self, plugin: &str) -> QueueMetrics {
        let l = QueueLabels {
            name: plugin.to_string(),
        };
        QueueMetrics {
            depth: self.queue_depth.get_or_create(&l).clone(),
            adds: self.queue_adds.get_or_create(&l).clone(),
            retries: self.queue_retries.get_or_create(&l).clone(),
            queue_duration: self.queue_duration.get_or_create(&l).clone(),
            work_duration: self.work_duration.get_or_create(&l).clone(),
            unfinished: self.unfinished_work.get_or_create(&l).clone(),
            longest: self.longest_running.get_or_create(&l).clone(),
        }
    }

    /// Makes `plugin`'s reconcile counters exist at 0, as controller-runtime does when
    /// a controller starts: a rate over a counter that appears at its first increment
    /// misses that increment, and a ratio of errors to reconciles needs both series.
    /// Counters already there keep their counts.
    pub fn started(&self, plugin: &str) {
        let c = ControllerLabels {
            controller: plugin.to_string(),
        };
        for result in ReconcileResult::ALL {
            let _ = self.reconcile_total.get_or_create(&ResultLabels {
                controller: plugin.to_string(),
                result,
            });
        }
        let _ = self.reconcile_errors.get_or_create(&c);
        let _ = self.terminal_errors.get_or_create(&c);
    }

    /// Drops every series of `plugin`.
    pub fn forget(&self, plugin: &str) {
        let c = ControllerLabels {
            controller: plugin.to_string(),
        };
        for result in ReconcileResult::ALL {
            self.reconcile_total.remove(&ResultLabels {
                controller: plugin.to_string(),
                result,
            });
        }
        self.reconcile_errors.remove(&c);
        self.terminal_errors.remove(&c);
        self.reconcile_time.remove(&c);
        self.max_concurrent_reconciles.remove(&c);
        self.active_workers.remove(&c);
        let q = QueueLabels {
            name: plugin.to_string(),
        };
        self.queue_depth.remove(&q);
        self.queue_adds.remove(&q);
        self.queue_retries.remove(&q);
        self.queue_duration.remove(&q);
        self.work_duration.remove(&q);
        self.unfinished_work.remove(&q);
        self.longest_running.remove(&q);
    }
}

/// One plugin's work-queue series, held by its queue.
#[derive(Debug, Clone)]
pub struct QueueMetrics {
    /// `workqueue_depth`.
    pub depth: Gauge,
    /// `workqueue_adds_total`.
    pub adds: Counter,
    /// `workqueue_retries_total`.
    pub retries: Counter,
    /// `workqueue_queue_duration_seconds`.
    pub queue_duration: Histogram,
    /// `workqueue_work_duration_seconds`.
    pub work_duration: Histogram,
    /// `workqueue_unfinished_work_seconds`.
    pub unfinished: SecondsGauge,
    /// `workqueue_longest_running_processor_seconds`.
    pub longest: SecondsGauge,
}

impl QueueMetrics {
    /// Series registered nowhere: for a queue whose metrics nobody reads (tests,
    /// benchmarks).
    pub fn detached() -> QueueMetrics {
        QueueMetrics {
            depth: Gauge::default(),
            adds: Counter::default(),
            retries: Counter::default(),
            queue_duration: queue_buckets(),
            work_duration: queue_buckets(),
            unfinished: SecondsGauge::default(),
            longest: SecondsGauge::default(),
        }
    }
}
