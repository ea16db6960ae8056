//! Metrics plugins declare in their registration and update through the `metrics`
//! import: checked at load, bounded in series per plugin, and exported on `/metrics`
//! as `wcm_plugin_<plugin>_<name>{plugin, ...}` by one collector that reads every
//! running plugin's set at scrape time, so a plugin's metrics go when it goes
//! (prometheus-client's registry cannot unregister a metric).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

use crate::contract::{MetricDeclaration, MetricKind};

mod declarations;

pub use declarations::{MAX_BUCKETS, MAX_LABEL_VALUE, MAX_LABELS, MAX_METRICS, check};

/// A series: its label names and values, the plugin's label first.
type Labels = Vec<(String, String)>;
type HistogramFamily = Family<Labels, Histogram, Box<dyn Fn() -> Histogram + Send + Sync>>;

/// One declared metric's series.
enum Series {
    Counter(Family<Labels, Counter<f64, AtomicU64>>),
    Gauge(Family<Labels, Gauge<f64, AtomicU64>>),
    Histogram(HistogramFamily),
}

/// One declared metric.
struct Declared {
    exported: String,
    help: String,
    labels: Vec<String>,
    series: Series,
}

/// What a metric update was: the `metrics` import's three calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Update {
    /// `add`.
    Add,
    /// `set`.
    Set,
    /// `observe`.
    Observe,
}

/// Why an update was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetricError {
    /// Not declared, the wrong kind, labels or value.
    #[error("{0}")]
    Invalid(String),
    /// One series more than the plugin's bound.
    #[error("{0}")]
    TooManySeries(String),
}

/// One plugin's declared metrics and their series.
pub struct PluginMetrics {
    plugin: String,
    metrics: BTreeMap<String, Declared>,
    series: AtomicUsize,
    max_series: usize,
}

impl std::fmt::Debug for PluginMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginMetrics")
            .field("plugin", &self.plugin)
            .field("metrics", &self.metrics.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl PluginMetrics {
    /// The metrics of `plugin` as `declarations` (already checked) say, with at most
    /// `max_series` series across them.
    pub fn new(plugin: &str, declarations: &[MetricDeclaration], max_series: usize) -> Self {
        let metrics = (declarations.iter())
            .map(|m| {
                let declared = Declared {
                    exported: family_name(plugin, &m.name),
                    help: m.help.clone(),
                    labels: m.labels.clone(),
                    series: series_of(m),
                };
                (m.name.clone(), declared)
            })
            .collect();
        PluginMetrics {
            plugin: plugin.to_string(),
            metrics,
            series: AtomicUsize::new(0),
            max_series,
        }
    }

    /// A plugin that declared none.
    pub fn none(plugin: &str) -> Self {
        PluginMetrics::new(plugin, &[], 0)
    }

    /// Applies one update from the plugin; refused with the reason otherwise.
    pub fn update(
        &self,
        update: Update,
        name: &str,
        values: &[String],
        value: f64,
    ) -> Result<(), MetricError> {
        let invalid = |why: String| {
            let name = crate::logs::shorten(name);
            MetricError::Invalid(format!("metric {name:?} of plugin {}: {why}", self.plugin))
        };
        let declared = (self.metrics.get(name)).ok_or_else(|| invalid("not declared".into()))?;
        let labels = self.labels(declared, values).map_err(invalid)?;
        if !value.is_finite() {
            return Err(invalid(format!("{value} is not a finite number")));
        }
        if !self.has(&declared.series, &labels) {
            self.admit_series(name)?;
        }
        match (&declared.series, update) {
            (Series::Counter(f), Update::Add) if value >= 0.0 => {
                f.get_or_create(&labels).inc_by(value);
            }
            (Series::Counter(_), Update::Add) => {
                return Err(invalid("a counter only goes up".into()));
            }
            (Series::Gauge(f), Update::Add) => {
                f.get_or_create(&labels).inc_by(value);
            }
            (Series::Gauge(f), Update::Set) => {
                f.get_or_create(&labels).set(value);
            }
            (Series::Histogram(f), Update::Observe) => f.get_or_create(&labels).observe(value),
            (_, update) => {
                return Err(invalid(format!(
                    "a {} cannot {update:?}",
                    kind_of(&declared.series)
                )));
            }
        }
        Ok(())
    }

    /// The series' labels: the plugin's, then each declared name with its value.
    fn labels(&self, declared: &Declared, values: &[String]) -> Result<Labels, String> {
        if values.len() != declared.labels.len() {
            return Err(format!(
                "{} label values for the labels {:?}",
                values.len(),
                declared.labels
            ));
        }
        let mut labels = vec![("plugin".to_string(), self.plugin.clone())];
        for (name, value) in declared.labels.iter().zip(values) {
            if value.len() > MAX_LABEL_VALUE || value.chars().any(char::is_control) {
                return Err(format!(
                    "the value of label {name} must be at most {MAX_LABEL_VALUE} bytes \
                     without control characters"
                ));
            }
            labels.push((name.clone(), value.clone()));
        }
        Ok(labels)
    }

    fn has(&self, series: &Series, labels: &Labels) -> bool {
        match series {
            Series::Counter(f) => f.get(labels).is_some(),
            Series::Gauge(f) => f.get(labels).is_some(),
            Series::Histogram(f) => f.get(labels).is_some(),
        }
    }

    /// Counts one new series, or refuses it over the bound.
    fn admit_series(&self, name: &str) -> Result<(), MetricError> {
        let admitted = self
            .series
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < self.max_series).then_some(n + 1)
            });
        admitted.map(|_| ()).map_err(|_| {
            MetricError::TooManySeries(format!(
                "metric {name:?} of plugin {}: a new series would be more than the plugin's \
                 {} (--max-metric-series-per-plugin)",
                self.plugin, self.max_series
            ))
        })
    }

    /// Every sample of `metrics` as `/metrics` shows it (`name{labels} value`),
    /// without the descriptors: what the test kit reports. Series are sorted by
    /// metric and labels (a family keeps them in hash order, which would make a
    /// reviewed report differ from run to run); a histogram's lines stay together in
    /// the encoder's order.
    pub fn samples(metrics: &Arc<PluginMetrics>) -> Vec<String> {
        let exported = PluginMetricsRegistry::default();
        exported.insert(metrics.clone());
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register_collector(Box::new(exported));
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &registry);
        let mut lines: Vec<String> = (text.lines())
            .filter(|l| !l.starts_with('#'))
            .map(str::to_string)
            .collect();
        lines.sort_by_cached_key(|line| series_key(line));
        lines
    }

    /// Writes every declared metric with its series.
    fn encode(&self, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for declared in self.metrics.values() {
            let (name, help) = (&declared.exported, &declared.help);
            match &declared.series {
                Series::Counter(f) => {
                    f.encode(encoder.encode_descriptor(name, help, None, f.metric_type())?)?
                }
                Series::Gauge(f) => {
                    f.encode(encoder.encode_descriptor(name, help, None, f.metric_type())?)?
                }
                Series::Histogram(f) => {
                    f.encode(encoder.encode_descriptor(name, help, None, f.metric_type())?)?
                }
            }
        }
        Ok(())
    }
}

/// The family a plugin's metric is exported as: `wcm_plugin_<plugin>__<name>`, the
/// plugin's `-` written `_`. The double underscore keeps every plugin in a namespace
/// of its own: the host's own names have none, and a metric name may not contain one
/// (`declarations`), so no (plugin, metric) pair can name another pair's family or
/// one of the host's (a plugin `missing` declaring `rights` would otherwise have been
/// `wcm_plugin_missing_rights`).
pub fn family_name(plugin: &str, metric: &str) -> String {
    format!("wcm_plugin_{}__{metric}", plugin.replace('-', "_"))
}

/// What identifies a sample line's series: its metric (without a histogram's
/// `_bucket`, `_sum`, `_count`) and its labels without `le`.
fn series_key(line: &str) -> (String, String) {
    let (name, rest) = line.split_once('{').unwrap_or((line, ""));
    let metric = ["_bucket", "_sum", "_count"]
        .iter()
        .find_map(|suffix| name.strip_suffix(suffix))
        .unwrap_or(name);
    let labels = rest.split_once('}').map_or("", |(labels, _)| labels);
    let without_le = labels.split(',').filter(|l| !l.starts_with("le=\""));
    (metric.to_string(), without_le.collect::<Vec<_>>().join(","))
}

fn series_of(m: &MetricDeclaration) -> Series {
    match m.kind {
        MetricKind::Counter => Series::Counter(Family::default()),
        MetricKind::Gauge => Series::Gauge(Family::default()),
        MetricKind::Histogram => {
            let buckets = match m.buckets.is_empty() {
                true => exponential_buckets(0.005, 2.0, 12).collect(),
                false => m.buckets.clone(),
            };
            let new: Box<dyn Fn() -> Histogram + Send + Sync> =
                Box::new(move || Histogram::new(buckets.iter().copied()));
            Series::Histogram(Family::new_with_constructor(new))
        }
    }
}

fn kind_of(series: &Series) -> &'static str {
    match series {
        Series::Counter(_) => "counter",
        Series::Gauge(_) => "gauge",
        Series::Histogram(_) => "histogram",
    }
}

/// The running plugins' metrics, exported by one collector.
#[derive(Debug, Default, Clone)]
pub struct PluginMetricsRegistry {
    plugins: Arc<RwLock<BTreeMap<String, Arc<PluginMetrics>>>>,
}

impl PluginMetricsRegistry {
    /// Exports `metrics` for its plugin, in place of an earlier version's.
    pub fn insert(&self, metrics: Arc<PluginMetrics>) {
        let mut plugins = self.plugins.write().unwrap_or_else(|p| p.into_inner());
        plugins.insert(metrics.plugin.clone(), metrics);
    }

    /// Stops exporting `plugin`'s metrics.
    pub fn remove(&self, plugin: &str) {
        let mut plugins = self.plugins.write().unwrap_or_else(|p| p.into_inner());
        plugins.remove(plugin);
    }
}

impl Collector for PluginMetricsRegistry {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let plugins = self.plugins.read().unwrap_or_else(|p| p.into_inner());
        for metrics in plugins.values() {
            metrics.encode(&mut encoder)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
