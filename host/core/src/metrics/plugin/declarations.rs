//! The rules a plugin's metric declarations must follow, checked at load so a
//! mistake refuses the plugin with the reason instead of failing on every update.

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

/// Checks a registration's metric declarations; the reason names the metric.
pub fn check(declarations: &[MetricDeclaration]) -> Result<(), String> {
    if declarations.len() > MAX_METRICS {
        return Err(format!(
            "{} metrics, more than {MAX_METRICS}",
            declarations.len()
        ));
    }
    for (i, m) in declarations.iter().enumerate() {
        check_one(m).map_err(|e| format!("metric {:?}: {e}", crate::logs::shorten(&m.name)))?;
        if declarations[..i].iter().any(|d| d.name == m.name) {
            return Err(format!("metric {:?} declared twice", m.name));
        }
        let samples = samples_of(m);
        let earlier = declarations[..i].iter().flat_map(samples_of);
        if let Some(clash) = earlier.into_iter().find(|s| samples.contains(s)) {
            return Err(format!(
                "metric {:?}: its samples would be named {clash:?}, as another metric's are",
                m.name
            ));
        }
    }
    Ok(())
}

/// The names of a metric's sample lines: a counter's `_total`, a histogram's
/// `_bucket`, `_sum` and `_count`, a gauge's own name.
fn samples_of(m: &MetricDeclaration) -> Vec<String> {
    let suffixes: &[&str] = match m.kind {
        MetricKind::Counter => &["_total"],
        MetricKind::Gauge => &[""],
        MetricKind::Histogram => &["_bucket", "_sum", "_count"],
    };
    suffixes.iter().map(|s| format!("{}{s}", m.name)).collect()
}

fn check_one(m: &MetricDeclaration) -> Result<(), String> {
    check_name(&m.name)?;
    // `__` separates the plugin's name from the metric's in the exported name, so
    // neither a name nor its ending with a suffix may hold one.
    if m.name.contains("__") || m.name.ends_with('_') {
        return Err("a name must not contain `__` or end in `_`".into());
    }
    if m.kind == MetricKind::Counter && m.name.ends_with("_total") {
        return Err("a counter's name must not end in _total (it is added)".into());
    }
    // Help is written into the exposition as it is: a backslash or a quote would
    // start an escape or a string a parser reads differently.
    let printable =
        !m.help.is_empty() && !(m.help.chars()).any(|c| c.is_control() || c == '\\' || c == '"');
    if !printable || m.help.len() > MAX_HELP {
        return Err(format!(
            "help must be 1 to {MAX_HELP} printable characters, without \\ or \""
        ));
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
            crate::logs::shorten(name)
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
