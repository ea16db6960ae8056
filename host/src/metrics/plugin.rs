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

/// Most metrics one plugin declares.
pub const MAX_METRICS: usize = 16;
/// Most labels of one metric.
pub const MAX_LABELS: usize = 4;
/// Most buckets of one histogram.
pub const MAX_BUCKETS: usize = 16;
/// Longest metric or label name.
const MAX_NAME: usize = 64;
/// Longest help text.
const MAX_HELP: usize = 256;
/// Longest label value.
pub const MAX_LABEL_VALUE: usize = 128;

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

/// Checks a registration's metric declarations; the reason names the metric.
pub fn check(declarations: &[MetricDeclaration]) -> Result<(), String> {
    if declarations.len() > MAX_METRICS {
        return Err(format!(
            "{} metrics, more than {MAX_METRICS}",
            declarations.len()
        ));
    }
    for (i, m) in declarations.iter().enumerate() {
        check_one(m)
            .map_err(|e| format!("metric {:?}: {e}", crate::kube::names::shorten(&m.name)))?;
        if declarations[..i].iter().any(|d| d.name == m.name) {
            return Err(format!("metric {:?} declared twice", m.name));
        }
    }
    Ok(())
}

fn check_one(m: &MetricDeclaration) -> Result<(), String> {
    check_name(&m.name)?;
    if m.kind == MetricKind::Counter && m.name.ends_with("_total") {
        return Err("a counter's name must not end in _total (it is added)".into());
    }
    let printable = !m.help.is_empty() && !m.help.chars().any(char::is_control);
    if !printable || m.help.len() > MAX_HELP {
        return Err(format!("help must be 1 to {MAX_HELP} printable characters"));
    }
    if m.labels.len() > MAX_LABELS {
        return Err(format!("{} labels, more than {MAX_LABELS}", m.labels.len()));
    }
    for (i, label) in m.labels.iter().enumerate() {
        check_name(label).map_err(|e| format!("label {e}"))?;
        if label == "plugin" || m.labels[..i].contains(label) {
            return Err(format!("label {label:?} is the host's or named twice"));
        }
    }
    check_buckets(m)
}

fn check_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let first = chars.next().is_some_and(|c| c.is_ascii_lowercase());
    let rest = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    match first && rest && name.len() <= MAX_NAME {
        true => Ok(()),
        false => Err(format!(
            "name {:?} must match [a-z][a-z0-9_]* and be at most {MAX_NAME} bytes",
            crate::kube::names::shorten(name)
        )),
    }
}

fn check_buckets(m: &MetricDeclaration) -> Result<(), String> {
    if m.kind != MetricKind::Histogram {
        return match m.buckets.is_empty() {
            true => Ok(()),
            false => Err("only a histogram has buckets".into()),
        };
    }
    let increasing = m.buckets.windows(2).all(|w| w[0] < w[1]);
    let finite = m.buckets.iter().all(|b| b.is_finite());
    if m.buckets.len() > MAX_BUCKETS || !increasing || !finite {
        return Err(format!(
            "buckets must be at most {MAX_BUCKETS} finite, increasing bounds"
        ));
    }
    Ok(())
}

impl PluginMetrics {
    /// The metrics of `plugin` as `declarations` (already checked) say, with at most
    /// `max_series` series across them.
    pub fn new(plugin: &str, declarations: &[MetricDeclaration], max_series: usize) -> Self {
        let prefix = format!("wcm_plugin_{}", plugin.replace('-', "_"));
        let metrics = (declarations.iter())
            .map(|m| {
                let declared = Declared {
                    exported: format!("{prefix}_{}", m.name),
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
            let name = crate::kube::names::shorten(name);
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
    /// without the descriptors: what the test kit reports.
    pub fn samples(metrics: &Arc<PluginMetrics>) -> Vec<String> {
        let exported = PluginMetricsRegistry::default();
        exported.insert(metrics.clone());
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register_collector(Box::new(exported));
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &registry);
        (text.lines())
            .filter(|l| !l.starts_with('#'))
            .map(str::to_string)
            .collect()
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
mod tests {
    use prometheus_client::encoding::text::encode;
    use prometheus_client::registry::Registry;

    use super::*;

    fn declared(name: &str, kind: MetricKind, labels: &[&str]) -> MetricDeclaration {
        MetricDeclaration {
            name: name.into(),
            help: format!("{name} of the test"),
            kind,
            labels: labels.iter().map(|l| l.to_string()).collect(),
            buckets: match kind {
                MetricKind::Histogram => vec![0.1, 1.0],
                _ => Vec::new(),
            },
        }
    }

    fn web_app(max_series: usize) -> PluginMetrics {
        let declarations = [
            declared("widgets", MetricKind::Counter, &["state"]),
            declared("queue_length", MetricKind::Gauge, &[]),
            declared("sync_seconds", MetricKind::Histogram, &[]),
        ];
        check(&declarations).expect("valid");
        PluginMetrics::new("web-app", &declarations, max_series)
    }

    fn exported(metrics: PluginMetrics) -> String {
        let exported = PluginMetricsRegistry::default();
        exported.insert(Arc::new(metrics));
        let mut registry = Registry::default();
        registry.register_collector(Box::new(exported));
        let mut text = String::new();
        encode(&mut text, &registry).expect("encodes");
        text
    }

    #[test]
    fn updates_are_exported_under_the_plugins_prefix_with_its_label() {
        let metrics = web_app(10);
        let ready = ["ready".to_string()];
        metrics
            .update(Update::Add, "widgets", &ready, 2.0)
            .expect("add");
        metrics
            .update(Update::Set, "queue_length", &[], 7.0)
            .expect("set");
        metrics
            .update(Update::Add, "queue_length", &[], -2.0)
            .expect("add");
        metrics
            .update(Update::Observe, "sync_seconds", &[], 0.5)
            .expect("observe");
        let text = exported(metrics);
        for line in [
            "# TYPE wcm_plugin_web_app_widgets counter",
            r#"wcm_plugin_web_app_widgets_total{plugin="web-app",state="ready"} 2.0"#,
            r#"wcm_plugin_web_app_queue_length{plugin="web-app"} 5.0"#,
            r#"wcm_plugin_web_app_sync_seconds_bucket{le="1.0",plugin="web-app"} 1"#,
        ] {
            assert!(text.contains(line), "{line} not in\n{text}");
        }
    }

    #[test]
    fn wrong_updates_are_refused_naming_the_metric_and_the_plugin() {
        let metrics = web_app(10);
        let ready = ["ready".to_string()];
        for (update, name, labels, value, reason) in [
            (
                Update::Add,
                "gadgets",
                &ready[..],
                1.0,
                "\"gadgets\" of plugin web-app: not declared",
            ),
            (
                Update::Add,
                "widgets",
                &[][..],
                1.0,
                "0 label values for the labels [\"state\"]",
            ),
            (
                Update::Add,
                "widgets",
                &ready[..],
                -1.0,
                "a counter only goes up",
            ),
            (
                Update::Set,
                "widgets",
                &ready[..],
                1.0,
                "a counter cannot Set",
            ),
            (
                Update::Observe,
                "queue_length",
                &[][..],
                1.0,
                "a gauge cannot Observe",
            ),
            (
                Update::Set,
                "queue_length",
                &[][..],
                f64::NAN,
                "NaN is not a finite number",
            ),
        ] {
            let err = metrics
                .update(update, name, labels, value)
                .expect_err(reason);
            assert!(err.to_string().contains(reason), "{err}");
        }
        let long = ["x".repeat(MAX_LABEL_VALUE + 1)];
        let err = metrics
            .update(Update::Add, "widgets", &long, 1.0)
            .expect_err("long");
        assert!(err.to_string().contains("at most 128 bytes"), "{err}");
    }

    #[test]
    fn series_past_the_plugins_bound_are_refused_and_old_ones_still_update() {
        let metrics = web_app(2);
        let state = |s: &str| [s.to_string()];
        metrics
            .update(Update::Add, "widgets", &state("a"), 1.0)
            .expect("first");
        metrics
            .update(Update::Set, "queue_length", &[], 1.0)
            .expect("second");
        let err = metrics
            .update(Update::Add, "widgets", &state("b"), 1.0)
            .expect_err("third");
        assert!(matches!(err, MetricError::TooManySeries(_)), "{err}");
        assert!(
            err.to_string().contains("more than the plugin's 2"),
            "{err}"
        );
        metrics
            .update(Update::Add, "widgets", &state("a"), 1.0)
            .expect("an old series");
    }
}
