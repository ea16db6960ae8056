//! The host calls that never reach the cluster: a plugin's own metrics, its settings
//! and its log lines, each bounded as the plugin's budget says.

use crate::capabilities::CapabilityError;
use crate::contract::Capability;
use crate::contract::Level;
use crate::limits::Limit;
use crate::metrics::plugin::{MetricError, Update};

use super::HostState;
use super::calls::Answer;

impl HostState {
    /// `metrics.add`, `metrics.set`, `metrics.observe`: one update of a metric the
    /// plugin declared; a series over its bound is counted as a limit hit.
    pub(crate) fn host_metric(
        &mut self,
        update: Update,
        name: &str,
        labels: &[String],
        value: f64,
    ) -> Answer<()> {
        let result = (|| {
            let access = self.access()?;
            let done = access.plugin_metrics().update(update, name, labels, value);
            if let Err(MetricError::TooManySeries(_)) = &done {
                access.budget().hit(Limit::metric_series);
            }
            done.map_err(|e| CapabilityError::Invalid(e.to_string()))
        })();
        self.counted(Capability::Metrics, result)
    }

    /// `config.settings`: the version's settings, in `register` and `reconcile`.
    pub(crate) fn host_settings(&self) -> Option<String> {
        self.settings.as_deref().map(str::to_string)
    }

    /// `log`: the plugin's line, escaped and cut to size, with its fields as one
    /// logfmt value, within its log rate.
    pub(crate) fn host_log(&mut self, level: Level, message: &str, fields: Vec<(String, String)>) {
        let Some(line) = self.logs.admit(message) else {
            return;
        };
        let (plugin, key) = (&*self.plugin, self.key.as_deref().unwrap_or("-"));
        if line.dropped_before > 0 {
            tracing::warn!(
                plugin,
                dropped = line.dropped_before,
                "plugin log lines dropped: over its log rate (--plugin-log-rate)"
            );
        }
        if let (true, Some(access)) = (line.was_cut, &self.access) {
            access.budget().hit(Limit::log_size);
        }
        let message = line.message;
        let fields = crate::logs::fields_text(&fields);
        let fields = (!fields.is_empty()).then_some(fields.as_str());
        match level {
            Level::Trace => tracing::trace!(plugin, key, fields, "{message}"),
            Level::Debug => tracing::debug!(plugin, key, fields, "{message}"),
            Level::Info => tracing::info!(plugin, key, fields, "{message}"),
            Level::Warn => tracing::warn!(plugin, key, fields, "{message}"),
            Level::Error => tracing::error!(plugin, key, fields, "{message}"),
        }
    }
}
