//! Updates of the metrics the plugin declared with [`Registration::counter`],
//! [`Registration::gauge`] and [`Registration::histogram`]: the host exports them on
//! its `/metrics` as `wcm_plugin_<plugin>_<name>` with the label `plugin` and the
//! declared labels. Each call gives one label value per declared label, in order.
//! Only during `reconcile`.
//!
//! [`Registration::counter`]: crate::Registration::counter
//! [`Registration::gauge`]: crate::Registration::gauge
//! [`Registration::histogram`]: crate::Registration::histogram

use crate::Error;
use crate::wit::wcm::controller::metrics as host;

fn owned(labels: &[&str]) -> Vec<String> {
    labels.iter().map(|l| l.to_string()).collect()
}

/// Adds `value` to a counter (at least 0) or a gauge.
pub fn add(name: &str, labels: &[&str], value: f64) -> Result<(), Error> {
    host::add(name, &owned(labels), value)
}

/// Adds 1 to a counter.
pub fn inc(name: &str, labels: &[&str]) -> Result<(), Error> {
    add(name, labels, 1.0)
}

/// Sets a gauge.
pub fn set(name: &str, labels: &[&str], value: f64) -> Result<(), Error> {
    host::set(name, &owned(labels), value)
}

/// Observes one value of a histogram.
pub fn observe(name: &str, labels: &[&str], value: f64) -> Result<(), Error> {
    host::observe(name, &owned(labels), value)
}
